"""Pseudo-relevance feedback through Lucene: its cost against a plain search, same index, same run.

    python -m bench.feedback_search [--model offline-minilm] [--repeats 5] [--threads 1] [--out FILE]

Indexes the documents of every registered domain together (``index --store-vectors``; ids
prefixed by the domain) and searches with every domain's held-out queries, queries encoded
beforehand so that only retrieval is timed. Three systems, interleaved ``--repeats`` times:

* ``plain``: ``LuceneRetriever.run`` (one Anserini batch search);
* ``feedback``: ``run(feedback=Feedback())`` (batch first pass, stored-vector reads, Rocchio,
  batch second pass);
* ``feedback_one_by_one``: ``search(feedback=)`` per query (two single searches each).

Reports the median over repeats of ms per query, and the ratios. The two feedback systems
must return the same top 10 for every query (checked before timing).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    import torch

    import corpora
    from sparse_adapt.data import Query, load_documents, load_queries
    from sparse_adapt.modeling.encoder import SpladeEncoder
    from sparse_adapt.retrieval.export import ExportConfig, export_vectors
    from sparse_adapt.retrieval.feedback import Feedback
    from sparse_adapt.retrieval.lucene import IndexMeta, build_index
    from sparse_adapt.retrieval.searcher import LuceneRetriever

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="offline-minilm")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="torch threads and Anserini search threads")
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    splade = SpladeEncoder.from_pretrained(args.model)
    docs, queries = [], []
    for name in corpora.names():
        files = corpora.get(name)
        docs += [{"doc_id": f"{name}-{d.doc_id}", "text": d.text} for d in load_documents(files.docs)]
        queries += [Query(f"{name}-{q.qid}", q.text) for q in load_queries(files.heldout_queries)]
    with tempfile.TemporaryDirectory(prefix="bench-feedback-") as tmp:
        work = Path(tmp)
        (work / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
        stats = export_vectors(splade, work / "docs.jsonl", work / "vectors", ExportConfig(), model_name=args.model)
        seconds = build_index(work / "vectors", work / "index", store_vectors=True)
        IndexMeta(stats.scale, args.model, stats.documents, seconds, vectors=True).save(work / "index")
        retriever = LuceneRetriever(work / "index", splade)
        retriever.encoder.prime([q.text for q in queries])
        fb = Feedback()
        systems = {
            "plain": lambda: retriever.run(queries, k=10, threads=args.threads),
            "feedback": lambda: retriever.run(queries, k=10, feedback=fb, threads=args.threads),
            "feedback_one_by_one": lambda: {q.qid: retriever.search(q.text, 10, feedback=fb) for q in queries},
        }
        batched, single = systems["feedback"](), systems["feedback_one_by_one"]()  # also the warm-up
        assert all(list(batched[q.qid]) == [h.doc_id for h in single[q.qid]] for q in queries)
        systems["plain"]()
        times: dict[str, list[float]] = {name: [] for name in systems}
        for _ in range(args.repeats):
            for name, fn in systems.items():
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
    ms = {name: round(statistics.median(t) * 1000 / len(queries), 3) for name, t in times.items()}
    result = {
        "settings": vars(args) | {"out": str(args.out)}, "documents": len(docs), "queries": len(queries),
        "ms_per_query": ms, "feedback/plain": round(ms["feedback"] / ms["plain"], 2),
        "feedback_one_by_one/feedback": round(ms["feedback_one_by_one"] / ms["feedback"], 2),
        "load_average_before": load_before, "load_average_after": os.getloadavg(),
    }
    text = json.dumps(result, indent=2) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
