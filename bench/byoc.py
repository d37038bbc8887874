"""Bring-your-own-corpus acceptance run: ``adapt`` given only ``docs.jsonl`` on every suite
domain and base, against the base and against ``adapt`` with the hand-written inputs.

For each (domain, base, inputs, seed) it runs ``sparse_adapt.corpus.adapt.run_adapt`` with
the default settings into ``WORKDIR/<domain>/<base>/<inputs>/seed<k>`` (a rerun resumes/reuses), then
scores the domain's held-out queries (never trained on, written before any training) with
the base and the adapted model and reports nDCG@10 per held-out group, with the number of
queries behind each number. Criteria (issue 12): domain-semantic >= base + 0.10,
adversarial controls >= base - 0.02. Each group also gets its per-query values (base,
adapted), how many queries the adapted model wins, ties and loses, and the p-value of a
paired permutation test of the change (scipy; exact up to 16 queries): with 7 to 20 queries a group, the reader
sees which changes one rank move could explain.

    python -m bench.byoc --workdir runs/byoc --json bench/results/byoc.json
    python -m bench.byoc --domains pharma --bases offline-splade-tiny --inputs corpus --seeds 0,1
    python -m bench.byoc --domains /path/to/domain      # a directory with the bundled file names
    python -m bench.byoc --config variant.toml --workdir runs/byoc-variant --json variant.json
    python -m bench.byoc --workdir runs/byoc --feedback --json feedback.json   # the same models, scored with feedback
    python -m bench.byoc --workdir runs/byoc --pool --json pooled.json   # the same models, a larger corpus

``--pool`` scores each domain's queries against its own documents plus every other
registered domain's (ids prefixed ``<domain>/``, never relevant): the suite's 36- and 37-document
corpora make a paraphrase's few relevant documents easy to find, and the pool shows how much
of a number that is.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

import corpora
from sparse_adapt.data import Document
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.report.benchmark_md import METRIC
from sparse_adapt.report.domains import EvalSet, pool_documents, resolve_domain
from sparse_adapt.report.paired import paired_test
from sparse_adapt.retrieval.evaluation import evaluate_per_query, score_in_memory
from sparse_adapt.retrieval.feedback import Feedback

GROUPS = ("heldout-domain-semantic", "heldout-domain-explicit", "heldout-control")
INPUTS = ("corpus", "hand-written")
SEMANTIC_GAIN, CONTROL_LOSS = 0.10, 0.02


def heldout_per_query(
    model: SpladeEncoder, files: corpora.CorpusFiles, max_active_dims: int | None = None,
    feedback: Feedback | None = None, extra_documents: list[Document] = (),
) -> dict[str, dict[str, float]]:
    """``{group: {qid: nDCG@10}}`` over the held-out groups' judged queries, encoding only those;
    ``max_active_dims`` cuts the documents as ``export --max-active-dims`` does; ``feedback``
    scores with Rocchio pseudo-relevance feedback as ``evaluate --feedback`` does;
    ``extra_documents`` (never relevant) are searched beside the domain's own."""
    ev = EvalSet.load(files)
    wanted = {q for g in GROUPS for q in ev.groups[g] if q in ev.qrels}
    run = score_in_memory(model, [*ev.documents, *extra_documents], [q for q in ev.queries if q.qid in wanted],
                           max_active_dims=max_active_dims, feedback=feedback)
    per = evaluate_per_query(ev.qrels, run, METRIC)
    return {g: {q: per[q] for q in ev.groups[g] if q in per} for g in GROUPS}


def group_mean(per_query: dict[str, float]) -> float:
    """A group's nDCG@10 from ``heldout_per_query``: what the benchmark suite (``EvalSet``) reports."""
    return round(float(np.mean(list(per_query.values()))), 6)


def row_key(row: dict) -> tuple:
    """What identifies a result row (rows written before seeds existed are seed 0)."""
    return row["domain"], row["base"], row["inputs"], row.get("seed", 0)


def paired_change(base: dict[str, float], adapted: dict[str, float]) -> dict:
    """Per-query comparison of two systems on the same queries: the mean change and
    :func:`paired_test` (ties within 1e-9), exact for groups of up to 16 queries."""
    qids = sorted(base)
    if sorted(adapted) != qids:
        raise ValueError("base and adapted were scored on different queries")
    b = np.array([base[q] for q in qids])
    a = np.array([adapted[q] for q in qids])
    return {
        "change": round(float((a - b).mean()), 6), **paired_test(a, b, tie=1e-9),
        "per_query": {q: [round(float(x), 6), round(float(y), 6)] for q, x, y in zip(qids, b, a)},
    }


def run_one(domain: str, base: str, inputs: str, workdir: Path, seed: int = 0, config: Path | None = None,
            glosses: bool = False, make_train: dict | None = None, pretrain: bool | None = None,
            pretrained: Path | None = None, max_active_dims: int | None = None,
            feedback: Feedback | None = None, extra_documents: list[Document] = ()) -> dict:
    """``pretrained``: a ``sparse-adapt pretrain`` output of ``base`` to train from (what ``adapt``
    would build in each run directory, made once); ``pretrain``: as ``adapt --pretrain``."""
    from sparse_adapt.corpus.adapt import run_adapt

    resolved = resolve_domain(domain)
    files = resolved.files
    given = {} if inputs == "corpus" else {"terms": files.terms, "dictionary": files.dictionary, "train": files.train}
    start = str(pretrained) if pretrained is not None else base
    t0 = time.perf_counter()
    result = run_adapt(files.docs, workdir / resolved.name / base / inputs / f"seed{seed}", start, seed=seed, config=config,
                       glosses=glosses, pretrain=False if pretrained is not None else pretrain,
                       **(make_train or {}), **given)
    seconds = time.perf_counter() - t0
    final = SpladeEncoder.from_pretrained(result.final)
    return {"seconds": round(seconds, 1),
            "per_query": heldout_per_query(final, files, max_active_dims, feedback, extra_documents),
            "generated": result.files.generated}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--domains", default=",".join(corpora.SPLITS["dev"] + corpora.SPLITS["test"]))
    ap.add_argument("--bases", default="offline-minilm,offline-splade-tiny")
    ap.add_argument("--inputs", default=",".join(INPUTS))
    ap.add_argument("--seeds", default="0", help="comma-separated; each seeds training and, from the corpus alone, the pseudo-queries' crops")
    ap.add_argument("--workdir", type=Path, default=Path("runs/byoc"))
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--config", type=Path, default=None,
                    help="a training config (as `adapt --config`) for a variant; give it its own --workdir and --json")
    ap.add_argument("--glosses", action="store_true", help="adapt --glosses (lay-word glosses); a variant: own --workdir and --json")
    ap.add_argument("--negatives", type=int, default=None, help="adapt --negatives (hard negatives per pseudo-query); a variant")
    ap.add_argument("--siblings", type=int, default=None, help="adapt --siblings (same-term candidates per pseudo-query); a variant")
    ap.add_argument("--no-pretrain", action="store_true", help="adapt --no-pretrain (the rows before pretraining existed)")
    ap.add_argument("--pretrained", type=Path, default=None,
                    help="a `sparse-adapt pretrain` output of the (one) base, trained from instead of pretraining per run")
    ap.add_argument("--max-active-dims", type=int, default=None,
                    help="score the adapted model with its documents cut to N terms (export --max-active-dims); "
                    "the base is scored uncut; a variant: own --json")
    ap.add_argument("--feedback", action="store_true",
                    help="score base and adapted model with Rocchio pseudo-relevance feedback (evaluate --feedback's "
                    "defaults); rerun on the same --workdir with its own --json")
    ap.add_argument("--pool", action="store_true",
                    help="score each domain's queries against its documents plus every other registered domain's "
                    "(base and adapted alike); rerun on the same --workdir with its own --json")
    args = ap.parse_args()
    if args.pretrained is not None and (args.no_pretrain or "," in args.bases):
        ap.error("--pretrained is the pretraining of one base: give one --bases and no --no-pretrain")
    domains = [(spec, resolve_domain(spec)) for spec in args.domains.split(",")]
    for spec, domain in domains:  # before any training: a missing group stopped a run hours in (KeyError)
        lacking = [g for g in GROUPS if g not in EvalSet.load(domain.files).groups]
        if lacking:
            ap.error(f"{spec}: its query_groups.json has no {', '.join(lacking)} group; "
                     f"bench.byoc scores {', '.join(GROUPS)}")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    feedback = Feedback() if args.feedback else None
    make_train = {k: v for k, v in (("negatives", args.negatives), ("siblings", args.siblings)) if v is not None}
    rows = []
    previous = json.loads(args.json.read_text()) if args.json and args.json.is_file() else []
    for spec, domain in domains:
        extra = pool_documents(domain.name) if args.pool else []
        for base in args.bases.split(","):
            base_scores = heldout_per_query(SpladeEncoder.from_pretrained(base), domain.files, feedback=feedback,
                                            extra_documents=extra)
            for inputs, seed in ((i, int(k)) for i in args.inputs.split(",") for k in args.seeds.split(",")):
                one = run_one(spec, base, inputs, args.workdir, seed, args.config, args.glosses, make_train,
                              pretrain=False if args.no_pretrain else None, pretrained=args.pretrained,
                              max_active_dims=args.max_active_dims, feedback=feedback, extra_documents=extra)
                row = {"domain": domain.name, "split": domain.split, "base": base, "inputs": inputs, "seed": seed,
                       "seconds": one["seconds"], "groups": {}}
                if args.pretrained is not None:
                    row["pretrained"] = str(args.pretrained)
                if args.max_active_dims is not None:
                    row["max_active_dims"] = args.max_active_dims
                if feedback is not None:
                    row["feedback"] = asdict(feedback)
                if args.pool:
                    row["pool"] = len(extra)  # other domains' documents searched beside the domain's own
                for g in GROUPS:
                    b, a = base_scores[g], one["per_query"][g]
                    row["groups"][g] = {"queries": len(b), "base": group_mean(b), "adapted": group_mean(a), **paired_change(b, a)}
                sem, ctl = row["groups"]["heldout-domain-semantic"], row["groups"]["heldout-control"]
                row["semantic_ok"] = sem["change"] >= SEMANTIC_GAIN
                row["controls_ok"] = ctl["change"] >= -CONTROL_LOSS
                rows.append(row)
                print(json.dumps(row), flush=True)
                if args.json:
                    keyed = {row_key(r): r for r in previous + rows}
                    args.json.parent.mkdir(parents=True, exist_ok=True)
                    args.json.write_text(json.dumps(list(keyed.values()), indent=1) + "\n")


if __name__ == "__main__":
    main()
