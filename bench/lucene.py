"""Lucene path benchmark: export throughput, index build time, search latency, agreement.

    python -m bench.lucene [--docs 20000] [--min-words 4] [--max-words 8] [--threads 1] [--out FILE]

For the bundled 26-document Gatrocraptic corpus and a synthetic corpus (``--docs``
documents of ``--min-words``..``--max-words`` words drawn, seeded, from the Gatrocraptic
vocabulary) it measures, with the offline base:

* export: documents/s of ``sparse_adapt.retrieval.export.export_vectors`` (model already loaded);
* index: wall seconds of ``sparse_adapt.retrieval.lucene.build_index`` (Anserini in a child process:
  Python imports and JVM start included, which dominate for small corpora);
* search latency per query, after warm-up, for the 26 Gatrocraptic queries (15 + 11 held
  out): query encoding alone; Lucene alone (quantised query already built); exact
  in-memory scoring alone (sparse ``D @ q`` over the float weights plus a top-10 selection);
* on Gatrocraptic: nDCG@10 through Lucene vs in memory, and how many queries have
  identical top-10 lists.

Timings on a shared machine vary with its load; the load average before and after is printed.
Short synthetic documents keep the 20k export to minutes on 2 shared cores: the MLM head
(V = 30522 logits per token) dominates encoding cost, so time grows with tokens, not docs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from corpora import GATROCRAPTIC


def synthetic_docs(path: Path, n: int, min_words: int, max_words: int, seed: int = 0) -> None:
    texts = [json.loads(l)["text"] for l in GATROCRAPTIC.docs.read_text(encoding="utf-8").splitlines() if l.strip()]
    vocab = sorted({w for t in texts for w in re.findall(r"[\w\-]+", t.lower())})
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            words = " ".join(rng.choice(vocab) for _ in range(rng.randint(min_words, max_words)))
            f.write(json.dumps({"doc_id": f"s{i}", "text": words}) + "\n")


def exported_matrix(vectors_dir: Path, vocab: list[str], scale: int) -> tuple[list[str], sp.csr_matrix]:
    """The exported documents back as a (N, V) float CSR (impact / scale)."""
    from sparse_adapt.retrieval.export import VECTORS_FILE

    ids = {t: i for i, t in enumerate(vocab)}
    doc_ids, indptr, indices, data = [], [0], [], []
    with (vectors_dir / VECTORS_FILE).open(encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            doc_ids.append(rec["id"])
            for t, v in rec["vector"].items():
                indices.append(ids[t])
                data.append(v / scale)
            indptr.append(len(indices))
    return doc_ids, sp.csr_matrix((np.array(data, np.float32), indices, indptr), shape=(len(doc_ids), len(vocab)))


def per_query_ms(fn, items, repeats: int) -> float:
    """Median over queries of the mean time of ``fn(item)`` over ``repeats`` calls, in ms."""
    for item in items:  # warm-up (JIT, caches)
        fn(item)
    times = []
    for item in items:
        start = time.perf_counter()
        for _ in range(repeats):
            fn(item)
        times.append((time.perf_counter() - start) / repeats * 1000)
    return statistics.median(times)


def bench_corpus(name, docs_path, splade, queries, workdir: Path, repeats: int, batch_size: int) -> dict:
    from sparse_adapt.retrieval.export import ExportConfig, export_vectors, lucene_vocabulary
    from sparse_adapt.retrieval.lucene import build_index
    from sparse_adapt.retrieval.searcher import LuceneRetriever

    vectors, index = workdir / f"{name}-vectors", workdir / f"{name}-index"
    stats = export_vectors(splade, docs_path, vectors, ExportConfig(batch_size=batch_size), model_name="offline-minilm")
    index_s = build_index(vectors, index)
    from sparse_adapt.retrieval.lucene import IndexMeta

    IndexMeta(stats.scale, "offline-minilm", stats.documents, index_s).save(index)
    start = time.perf_counter()
    retriever = LuceneRetriever(index, splade)
    open_s = time.perf_counter() - start
    texts = [q.text for q in queries]
    q_float = splade.encode(texts, "query")  # (Q, V)
    q_int = [retriever.encoder.encode(t) for t in texts]
    doc_ids, D = exported_matrix(vectors, lucene_vocabulary(splade), stats.scale)
    DT = D.T.tocsr()  # (V, N): a query row times DT scores every document

    def in_memory(i: int):
        scores = (q_float[i] @ DT).toarray().ravel()  # (N,)
        k = min(10, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        return [doc_ids[j] for j in top[np.argsort(-scores[top])]]

    encode_ms = per_query_ms(lambda t: splade.encode([t], "query"), texts, max(1, repeats // 4))
    lucene_ms = per_query_ms(lambda v: retriever.search_encoded(v, 10), q_int, repeats)
    memory_ms = per_query_ms(in_memory, range(len(texts)), repeats)
    return {
        "corpus": name, "documents": stats.documents, "postings": stats.postings,
        "export_s": round(stats.seconds, 2), "export_docs_per_s": round(stats.docs_per_second, 1),
        "index_s": round(index_s, 2), "searcher_open_s": round(open_s, 2),
        "query_encode_ms": round(encode_ms, 2), "lucene_search_ms": round(lucene_ms, 3),
        "in_memory_search_ms": round(memory_ms, 3), "index_dir": str(index), "retriever": retriever,
    }


def agreement(retriever, splade) -> dict:
    from sparse_adapt.data import load_documents, load_qrels, load_queries
    from sparse_adapt.retrieval.evaluation import evaluate_run, score_in_memory, top_k

    docs, queries, qrels = load_documents(GATROCRAPTIC.docs), load_queries(GATROCRAPTIC.queries), load_qrels(GATROCRAPTIC.qrels)
    exact = score_in_memory(splade, docs, queries)
    lucene = retriever.run(queries, k=100)
    matched = {q: {d: s for d, s in r.items() if s > 0} for q, r in exact.items()}
    exact_top = top_k(matched, 10)
    same = sum(list(lucene[q.qid])[:10] == exact_top[q.qid] for q in queries)
    return {
        "ndcg@10_lucene": evaluate_run(qrels, lucene)["ndcg@10"],
        "ndcg@10_in_memory_matched": evaluate_run(qrels, matched)["ndcg@10"],
        "ndcg@10_in_memory_all_docs": evaluate_run(qrels, exact)["ndcg@10"],
        "identical_top10": f"{same}/{len(queries)}",
    }


def main() -> None:
    import torch
    from rich.console import Console
    from rich.table import Table

    from sparse_adapt.data import load_queries
    from sparse_adapt.modeling.encoder import SpladeEncoder

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=20000, help="synthetic corpus size")
    ap.add_argument("--min-words", type=int, default=4)
    ap.add_argument("--max-words", type=int, default=8)
    # One thread: on a 2-core machine shared with other work, 2 torch threads oversubscribe the
    # cores and spin (measured: single-query encoding 0.05 s with 1 thread, 0.38 s with 2).
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=20, help="timed calls per query")
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    console = Console()
    console.print(f"load average before: {os.getloadavg()}")
    splade = SpladeEncoder.from_pretrained("offline-minilm")
    splade.encode(["warm up the encoder before timing anything"] * 8)
    queries = load_queries(GATROCRAPTIC.queries) + load_queries(GATROCRAPTIC.heldout_queries)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-lucene-") as tmp:
        work = Path(tmp)
        rows.append(bench_corpus("gatrocraptic", GATROCRAPTIC.docs, splade, queries, work, args.repeats, args.batch_size))
        quality = agreement(rows[0]["retriever"], splade)
        synthetic = work / "synthetic.jsonl"
        synthetic_docs(synthetic, args.docs, args.min_words, args.max_words)
        rows.append(bench_corpus(f"synthetic-{args.docs}", synthetic, splade, queries, work, args.repeats, args.batch_size))
    for r in rows:
        r.pop("retriever"), r.pop("index_dir")
    table = Table(title=f"Lucene path, offline-minilm, {args.threads} torch threads")
    for col in rows[0]:
        table.add_column(col)
    for r in rows:
        table.add_row(*(str(v) for v in r.values()))
    console.print(table)
    console.print(quality)
    console.print(f"load average after: {os.getloadavg()}")
    result = {"settings": vars(args) | {"out": str(args.out)}, "corpora": rows, "gatrocraptic_quality": quality}
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
