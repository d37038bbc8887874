"""Bring-your-own-corpus acceptance run: ``adapt`` given only ``docs.jsonl`` on every suite
domain and base, against the base and against ``adapt`` with the hand-written inputs.

For each (domain, base, inputs, seed) it runs ``sparse_adapt.corpus.adapt.run_adapt`` with
the default settings into ``WORKDIR/<domain>/<base>/<inputs>/seed<k>`` (a rerun resumes/reuses), then
scores the domain's held-out queries (never trained on, written before any training) with
the base and the adapted model and reports nDCG@10 per held-out group, with the number of
queries behind each number. Criteria (issue 12): domain-semantic >= base + 0.10,
adversarial controls >= base - 0.02.

    python -m bench.byoc --workdir runs/byoc --json bench/results/byoc.json
    python -m bench.byoc --domains pharma --bases offline-splade-tiny --inputs corpus --seeds 0,1
    python -m bench.byoc --domains /path/to/domain      # a directory with the bundled file names
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import corpora
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.report.benchmark import METRIC, EvalSet, resolve_domain
from sparse_adapt.retrieval.evaluation import score_in_memory

GROUPS = ("heldout-domain-semantic", "heldout-domain-explicit", "heldout-control")
INPUTS = ("corpus", "hand-written")
SEMANTIC_GAIN, CONTROL_LOSS = 0.10, 0.02


def heldout_ndcg(model: SpladeEncoder, files: corpora.CorpusFiles) -> dict[str, tuple[float, int]]:
    """``{group: (nDCG@10, judged queries)}`` of the held-out groups, scored like the benchmark
    suite scores them (``EvalSet``), encoding only the held-out queries."""
    ev = EvalSet.load(files)
    wanted = {q for g in GROUPS for q in ev.groups[g]}
    scores = ev.run_scores(score_in_memory(model, ev.documents, [q for q in ev.queries if q.qid in wanted]))
    return {g: (scores[g][METRIC], scores[g]["queries"]) for g in GROUPS}


def run_one(domain: str, base: str, inputs: str, workdir: Path, seed: int = 0) -> dict:
    from sparse_adapt.corpus.adapt import run_adapt

    resolved = resolve_domain(domain)
    files = resolved.files
    given = {} if inputs == "corpus" else {"terms": files.terms, "dictionary": files.dictionary, "train": files.train}
    t0 = time.perf_counter()
    result = run_adapt(files.docs, workdir / resolved.name / base / inputs / f"seed{seed}", base, seed=seed, **given)
    seconds = time.perf_counter() - t0
    return {"seconds": round(seconds, 1), "ndcg": heldout_ndcg(SpladeEncoder.from_pretrained(result.final), files),
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
    args = ap.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    rows = []
    previous = json.loads(args.json.read_text()) if args.json and args.json.is_file() else []
    for spec in args.domains.split(","):
        domain = resolve_domain(spec)
        for base in args.bases.split(","):
            base_ndcg = heldout_ndcg(SpladeEncoder.from_pretrained(base), domain.files)
            for inputs, seed in ((i, int(k)) for i in args.inputs.split(",") for k in args.seeds.split(",")):
                one = run_one(spec, base, inputs, args.workdir, seed)
                row = {"domain": domain.name, "split": domain.split, "base": base, "inputs": inputs, "seed": seed,
                       "seconds": one["seconds"], "groups": {}}
                for g in GROUPS:
                    (b, n), (a, _) = base_ndcg[g], one["ndcg"][g]
                    row["groups"][g] = {"queries": n, "base": b, "adapted": a, "change": round(a - b, 6)}
                sem, ctl = row["groups"]["heldout-domain-semantic"], row["groups"]["heldout-control"]
                row["semantic_ok"] = sem["change"] >= SEMANTIC_GAIN
                row["controls_ok"] = ctl["change"] >= -CONTROL_LOSS
                rows.append(row)
                print(json.dumps(row), flush=True)
                if args.json:
                    keyed = {(r["domain"], r["base"], r["inputs"], r.get("seed", 0)): r for r in previous + rows}
                    args.json.parent.mkdir(parents=True, exist_ok=True)
                    args.json.write_text(json.dumps(list(keyed.values()), indent=1) + "\n")


if __name__ == "__main__":
    main()
