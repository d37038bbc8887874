"""Held-out domain-semantic queries split by how many of their words their best document uses.

    python -m bench.overlap [--rows bench/results/byoc.json] [--split-at 0.34]

A sparse model scores a query by the terms it shares with a document, after expansion; a
dense bi-encoder needs no shared term. Per held-out domain-semantic query of the dev and test
domains: the share of its content words (general-English Zipf < 6, so not "the", "of", "is";
compared by their first ``STEM`` letters, so "claimed" meets "claims" and "flooding" "floods") that occur in
its best-judged relevant documents (grade 2; grade 1 where it has none). The queries are split
at ``--split-at`` (by default about the median on these domains) and each side gets the mean
nDCG@10 of the dense all-MiniLM-L6-v2 teacher (computed here), and, from ``--rows`` (the
per-query values ``bench.byoc`` saved), each base before and after ``adapt`` (corpus only: the
mean of seeds 0 and 1; hand-written: seed 0). Nothing is trained.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Iterable

import numpy as np

GROUP = "heldout-domain-semantic"
# A crude stem: "claimed"/"claims" and "flooding"/"floods" meet; so do "policy"/"police", and
# "leak"/"leaked" do not. Enough to tell queries that reuse their document's words from those that do not.
STEM = 5
FUNCTION_ZIPF = 6.0  # wordfreq Zipf >= 6: ~1 in 1,000 words or more ("the", "of", "and", "is")


def content_stems(text: str) -> set[str]:
    """The first ``STEM`` letters of each word of 3+ letters rarer than ``FUNCTION_ZIPF``."""
    from sparse_adapt.corpus.mining import general_zipf

    return {w[:STEM] for w in re.findall(r"[a-z]+", text.casefold()) if len(w) > 2 and general_zipf(w) < FUNCTION_ZIPF}


def overlap(query: str, documents: Iterable[str]) -> float:
    """Share of ``query``'s content stems found in any of ``documents`` (0 when it has none)."""
    mine = content_stems(query)
    if not mine:
        return 0.0
    theirs = set().union(*(content_stems(d) for d in documents))
    return len(mine & theirs) / len(mine)


def best_documents(judged: dict[str, int]) -> list[str]:
    """The grade-2 documents of one query's qrels, or its grade-1 ones when it has no grade 2."""
    top = [d for d, g in judged.items() if g >= 2]
    return top or [d for d, g in judged.items() if g > 0]


BASES = ("offline-minilm", "offline-splade-tiny")


def table(queries: list[dict], split_at: float) -> list[str]:
    """The markdown table: per split and overlap side, the mean of each column over one set of
    queries, those with a row of every model (a domain without rows once left the teacher's
    column averaged over more queries than the models' beside it, under one count)."""
    full = [r for r in queries if all(b in r for b in BASES)]
    lines = ["| split | content-word overlap | queries | dense teacher | minilm base | minilm corpus (seeds 0, 1) "
             "| minilm hand-written | tiny base | tiny corpus (seeds 0, 1) | tiny hand-written |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for split in ("dev", "test"):
        for name, keep in ((f"< {split_at:g}", lambda o: o < split_at), (f">= {split_at:g}", lambda o: o >= split_at)):
            sel = [r for r in full if r["split"] == split and keep(r["overlap"])]
            cells = [f"{np.mean([r['dense'] for r in sel]):.3f}" if sel else "-"]
            cells += [f"{np.mean([r[b][k] for r in sel]):.3f}" if sel else "-" for b in BASES
                      for k in ("base", "corpus", "hand")]
            lines.append(f"| {split} | {name} | {len(sel)} | " + " | ".join(cells) + " |")
    if left := len(queries) - len(full):
        lines.append(f"\n{left} of {len(queries)} queries have no row of every model (their domains were not run) "
                     "and are in no column.")
    return lines


def main(argv: list[str] | None = None) -> int:
    import torch

    import corpora
    from bench.byoc import row_key
    from bench.dense import dense_run
    from sparse_adapt.corpus.teacher import load_teacher
    from sparse_adapt.data import Query
    from sparse_adapt.report.benchmark_md import METRIC
    from sparse_adapt.report.domains import EvalSet, resolve_domain
    from sparse_adapt.retrieval.evaluation import evaluate_per_query

    ap = argparse.ArgumentParser(prog="python -m bench.overlap", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=Path, default=Path("bench/results/byoc.json"))
    ap.add_argument("--split-at", type=float, default=0.34)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None, help="write every query's overlap and values here")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = {row_key(r): r for r in json.loads(args.rows.read_text(encoding="utf-8"))}
    teacher = load_teacher()

    def per_query(domain: str, base: str, inputs: str, seed: int) -> dict | None:
        row = rows.get((domain, base, inputs, seed))
        return None if row is None else row["groups"][GROUP]["per_query"]

    queries = []
    for split in ("dev", "test"):
        for domain in corpora.SPLITS[split]:
            ev = EvalSet.load(resolve_domain(domain).files)
            text = {d.doc_id: d.text for d in ev.documents}
            qtext = {q.qid: q.text for q in ev.queries}
            qids = [q for q in ev.groups[GROUP] if q in ev.qrels]
            dense = evaluate_per_query(ev.qrels, dense_run(teacher, ev.documents, [Query(q, qtext[q]) for q in qids]), METRIC)
            for q in qids:
                rec = {"qid": q, "split": split, "domain": domain, "dense": round(dense[q], 6),
                       "overlap": round(overlap(qtext[q], [text[d] for d in best_documents(ev.qrels[q])]), 4)}
                for base in ("offline-minilm", "offline-splade-tiny"):
                    seeds = [per_query(domain, base, "corpus", k) for k in (0, 1)]
                    hand = per_query(domain, base, "hand-written", 0)
                    if any(s is None for s in seeds) or hand is None:
                        continue
                    rec[base] = {"base": seeds[0][q][0], "corpus": float(np.mean([s[q][1] for s in seeds])), "hand": hand[q][1]}
                queries.append(rec)
    if args.json:
        args.json.write_text(json.dumps(queries, indent=1) + "\n", encoding="utf-8")
    print("\n".join(table(queries, args.split_at)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
