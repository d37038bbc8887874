"""The dense reference: nDCG@10 of the all-MiniLM-L6-v2 bi-encoder per query group.

    python -m bench.dense [DOMAIN ...]      # default: the bundled corpus and every suite domain
    python -m bench.dense --model DIR       # another mean-pooled bi-encoder (a local directory)

The same held-out groups the benchmark suite scores, ranked by cosine similarity of the dense
embeddings (``make-train``'s default teacher), not by a sparse model: what a model trained for
semantic search reaches on these queries, to read the sparse results against.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch


def dense_run(teacher, documents, queries) -> dict[str, dict[str, float]]:
    """``{qid: {doc_id: cosine}}``: every query against every document, by dense embeddings."""
    docs = teacher.embed([d.text for d in documents])  # (N, H), unit length
    embedded = teacher.embed([q.text for q in queries])  # (Q, H)
    sims = (embedded @ docs.T).tolist()  # (Q, N) cosine
    return {q.qid: {d.doc_id: float(s) for d, s in zip(documents, row)} for q, row in zip(queries, sims)}


def dense_scores(teacher, domain: str) -> dict[str, dict]:
    from sparse_adapt.report.domains import EvalSet, resolve_domain

    # only the evaluation files: a directory domain without hand-written inputs is scored too
    ev = EvalSet.load(resolve_domain(domain, hand_written=False).files)
    return ev.run_scores(dense_run(teacher, ev.documents, ev.queries))


def main(argv: list[str] | None = None) -> int:
    import corpora

    parser = argparse.ArgumentParser(prog="python -m bench.dense", description=__doc__.split("\n\n")[0])
    every = ["gatrocraptic", *(d for members in corpora.SPLITS.values() for d in members)]
    parser.add_argument("domains", nargs="*", default=every)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model", default=None, help="a bi-encoder directory (default: offline-minilm)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from sparse_adapt.corpus.teacher import DenseTeacher, load_teacher

    teacher = load_teacher() if args.model is None else DenseTeacher.load(args.model)
    print(json.dumps({d: dense_scores(teacher, d) for d in args.domains}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
