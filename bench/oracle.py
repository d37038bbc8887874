"""Oracle training queries: would training queries *of the held-out kind* lift the held-out group?

    python -m bench.oracle --domains software,insurance,forestry --inputs hand-written,corpus --json oracle.json

A diagnostic, not a method: it trains on half of a domain's held-out domain-semantic queries.
Pseudo-queries are crops of the documents; the held-out domain-semantic queries are human
paraphrases in other words. If the gap between them were what holds the student back, lists
made from paraphrases of the held-out kind should lift the *other* paraphrases of the same
documents, and a query generator would be the way forward.

Per domain the held-out domain-semantic queries, in the order of their numbers, are split
into two interleaved folds (positions 0, 2, 4, ... and 1, 3, 5, ...), so both folds hold
paraphrases of the same documents, as a doc2query generator's queries would. For each fold it
runs ``adapt`` (seed ``--seed``) with the inputs of ``--inputs`` (``hand-written``: the
domain's terms, dictionary and training lists; ``corpus``: the files ``adapt`` generates from
``docs.jsonl`` alone, made once per domain) plus one list per query of that fold
(:func:`oracle_lists`), and scores the *other* fold's queries, never trained on by that model.
Compare each row's per-query values with the same inputs' ``bench.byoc`` rows (same seed).

The extra lists also add distill steps (epochs are fixed unless ``[distill] max_steps`` is
set); ``--config`` runs the same with a training config.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Sequence

GROUP = "heldout-domain-semantic"
INPUTS = ("hand-written", "corpus")
# Hand-graded lists score the best documents 10 and a term's other documents 2-6: a grade-2
# judgement is the list's top, a grade-1 one a positive below it.
GRADE_SCORE = {2: 10.0, 1: 6.0}
NEGATIVES = 7  # the spec's lists: the best document and 7 others


def folds(qids: Sequence[str]) -> tuple[list[str], list[str]]:
    """Two interleaved folds of ``qids`` ordered by their trailing number (``in-h2`` < ``in-h10``)."""
    def number(q: str) -> tuple[int, str]:
        m = re.search(r"(\d+)$", q)
        return (int(m.group(1)) if m else -1, q)

    ordered = sorted(qids, key=number)
    return ordered[0::2], ordered[1::2]


def oracle_lists(splade, teacher, documents, queries: dict[str, str], qrels: dict[str, dict[str, int]],
                 qids: Sequence[str], negatives: int = NEGATIVES) -> list[dict]:
    """One train.jsonl record per query of ``qids``: its judged-relevant documents scored by grade
    (``GRADE_SCORE``), then the ``negatives`` unjudged-or-irrelevant documents ``splade`` ranks
    highest (``make-train``'s hard-negative ranking: ties in corpus order), scored by ``teacher``
    and mapped per list onto [-8, 0] (every one a negative; the teacher orders them)."""
    from sparse_adapt.corpus.pseudo import PseudoQuery, hard_negatives

    text = {d.doc_id: d.text for d in documents}
    relevant = {q: {d: g for d, g in qrels[q].items() if g > 0 and d in text} for q in qids}
    for q in qids:
        if not relevant[q]:
            raise ValueError(f"query {q} has no relevant document in the qrels")
    # Each query's whole ranking (its first relevant document stands as the source, left out).
    pseudo = [PseudoQuery(q, queries[q], "semantic", sorted(relevant[q])[0]) for q in qids]
    ranked = hard_negatives(splade, documents, pseudo, k=len(documents))
    records = []
    for q in qids:
        negs = [d for d in ranked[q] if d not in relevant[q]][:negatives]
        raw = teacher.score(queries[q], [text[d] for d in negs]) if negs else []
        lo, hi = (min(raw), max(raw)) if negs else (0.0, 0.0)
        neg_scores = [-8.0 + 8.0 * (r - lo) / (hi - lo) if hi > lo else -8.0 for r in raw]
        pairs = sorted(relevant[q].items(), key=lambda p: (-p[1], p[0]))
        scored = [(d, GRADE_SCORE[min(g, 2)]) for d, g in pairs] + sorted(zip(negs, neg_scores), key=lambda p: -p[1])
        records.append({
            "qid": f"oracle-{q}", "query": queries[q], "doc_ids": [d for d, _ in scored],
            "doc_texts": [text[d] for d, _ in scored], "teacher_scores": [round(float(s), 4) for _, s in scored],
        })
    return records


def main() -> None:
    from bench.byoc import heldout_per_query
    from sparse_adapt.atomic import write_atomic
    from sparse_adapt.corpus.adapt import prepare_inputs, run_adapt
    from sparse_adapt.corpus.mining import DEFAULT_MIN_COUNT, DEFAULT_TOP
    from sparse_adapt.corpus.pseudo import DEFAULT_MAX_QUERIES, DEFAULT_NEGATIVES, DEFAULT_SIBLINGS
    from sparse_adapt.corpus.teacher import DEFAULT_TEACHER, load_teacher
    from sparse_adapt.modeling.encoder import SpladeEncoder
    from sparse_adapt.progress import SILENT
    from sparse_adapt.report.domains import EvalSet, resolve_domain

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--domains", default="software,insurance,forestry")
    ap.add_argument("--base", default="offline-minilm")
    ap.add_argument("--inputs", default=",".join(INPUTS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--config", type=Path, default=None)
    ap.add_argument("--workdir", type=Path, default=Path("runs/oracle"))
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    chosen = args.inputs.split(",")
    unknown = [i for i in chosen if i not in INPUTS]
    if unknown:
        ap.error(f"--inputs: unknown {', '.join(map(repr, unknown))} (one of {', '.join(INPUTS)})")
    splade = SpladeEncoder.from_pretrained(args.base)
    teacher = load_teacher(DEFAULT_TEACHER)
    rows = []
    for spec in args.domains.split(","):
        domain = resolve_domain(spec)
        files = domain.files
        ev = EvalSet.load(files)
        queries = {q.qid: q.text for q in ev.queries}
        pair = folds(ev.groups[GROUP])
        # one fold's lists, the same whichever inputs they join
        extra = [oracle_lists(splade, teacher, ev.documents, queries, ev.qrels, trained_on) for trained_on in pair]
        for inputs in chosen:
            if inputs == "hand-written":
                terms, dictionary, train = files.terms, files.dictionary, files.train
            else:  # "corpus"
                gen = args.workdir / domain.name / args.base / f"generated-seed{args.seed}"
                gen.mkdir(parents=True, exist_ok=True)
                if not (gen / "train.jsonl").is_file():
                    prepare_inputs(
                        files.docs, gen, args.base, terms=None, dictionary=None, train=None, teacher=teacher,
                        seed=args.seed, top=DEFAULT_TOP, min_count=DEFAULT_MIN_COUNT, max_queries=DEFAULT_MAX_QUERIES,
                        negatives=DEFAULT_NEGATIVES, siblings=DEFAULT_SIBLINGS, term_labels=True, glosses=False,
                        hooks=SILENT,
                    )
                terms, dictionary, train = gen / "domain_terms.json", gen / "dictionary.jsonl", gen / "train.jsonl"
            given = Path(train).read_text(encoding="utf-8")
            given += "" if not given or given.endswith("\n") else "\n"
            for f, (trained_on, scored) in enumerate((pair, pair[::-1])):
                run_dir = args.workdir / domain.name / args.base / f"{inputs}-fold{f}-seed{args.seed}"
                combined = run_dir.parent / f"{run_dir.name}-train.jsonl"
                write_atomic(combined, given + "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in extra[f]))
                t0 = time.perf_counter()
                result = run_adapt(files.docs, run_dir, args.base, terms=terms, dictionary=dictionary, train=combined,
                                   config=args.config, seed=args.seed)
                per = heldout_per_query(SpladeEncoder.from_pretrained(result.final), files)
                row = {"domain": domain.name, "base": args.base, "inputs": inputs, "seed": args.seed, "fold": f,
                       "trained_on": list(trained_on), "seconds": round(time.perf_counter() - t0, 1),
                       "semantic": {q: round(per[GROUP][q], 6) for q in scored},
                       "explicit": per["heldout-domain-explicit"], "control": per["heldout-control"]}
                rows.append(row)
                print(json.dumps(row), flush=True)
                if args.json:
                    args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
