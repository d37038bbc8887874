"""Retrieval through a Lucene impact index, producing runs ``{qid: {doc_id: score}}`` like
:func:`sparse_adapt.retrieval.evaluation.score_in_memory` does in memory.

Queries are encoded by our model and quantised with the index's scale
(:func:`sparse_adapt.retrieval.export.quantise`); Lucene's score is then the integer dot product
``sum_t round(s*q_t) * round(s*d_t)``. Runs keep Lucene's raw scores: rankings are what
evaluation needs, and divide by ``scale**2`` to compare a score with the exact one.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np
import scipy.sparse as sp

from sparse_adapt.data import Query
from sparse_adapt.errors import ConfigError
from sparse_adapt.modeling.vectors import dicts_to_rows
from sparse_adapt.retrieval.ranking import ranking
from sparse_adapt.retrieval.export import lucene_vocabulary, quantise
from sparse_adapt.retrieval.feedback import Feedback, rocchio
from sparse_adapt.retrieval.lucene import IndexMeta, LuceneError, impact_searcher
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.modeling.fingerprint import model_hashes, same_model


class QueryModel(Protocol):
    """What encodes the queries: a ``SpladeEncoder`` or an ``OnnxSpladeEncoder``."""

    def encode(self, texts: Sequence[str], kind: str, batch_size: int) -> sp.csr_matrix: ...

    def id_to_token(self) -> list[str]: ...


class QuantisedQueryEncoder:
    """Pyserini query encoder (anything with ``encode(text) -> {term: int}``) over our model.

    ``prime(texts)`` encodes many queries in batches up front; ``encode`` then answers from
    that cache, so batch searches do not run one forward pass per query.
    """

    def __init__(self, splade: QueryModel, scale: int, batch_size: int = 32):
        self.splade = splade
        self.scale = scale
        self.batch_size = batch_size
        self.vocab = lucene_vocabulary(splade)
        self._cache: dict[str, dict[str, int]] = {}

    def prime(self, texts: Sequence[str]) -> None:
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if todo:
            matrix = self.splade.encode(todo, "query", self.batch_size)  # (n, V)
            self._cache.update(zip(todo, quantise(matrix, self.vocab, self.scale)))

    def encode(self, text: str) -> dict[str, int]:
        if text not in self._cache:
            self.prime([text])
        return self._cache[text]


@dataclass
class Hit:
    doc_id: str
    score: float  # Lucene's score: integer impact dot product


def require_stored_vectors(index_dir: str | Path, meta: IndexMeta | None = None) -> None:
    """Feedback reads the first pass's documents' vectors back from the index: refused, before
    any model loads, for an index built without ``--store-vectors``."""
    meta = meta if meta is not None else IndexMeta.load(Path(index_dir)) if Path(index_dir).is_dir() else None
    if Path(index_dir).is_dir() and meta is None:  # the retriever says why (the impact scale is unknown)
        return
    if meta is not None and not meta.vectors:
        raise LuceneError(
            f"{index_dir}: built without --store-vectors, so feedback cannot read its documents' vectors; "
            "rebuild it with `sparse-adapt index --store-vectors`"
        )


class LuceneRetriever:
    """Search an index built by ``sparse-adapt index`` with queries encoded by ``splade``."""

    def __init__(self, index_dir: str | Path, splade: QueryModel, scale: int | None = None):
        self.index_dir = Path(index_dir)
        if not self.index_dir.is_dir():
            what = "a file, not an index directory" if self.index_dir.exists() else "no such index directory"
            raise LuceneError(f"{index_dir}: {what}; build one with `sparse-adapt index`")
        meta = IndexMeta.load(self.index_dir)
        if scale is None:
            if meta is None:
                raise ConfigError(
                    f"{index_dir}: no sparse_adapt_index.json (not built by `sparse-adapt index`): its impact scale is "
                    "unknown; rebuild it with `sparse-adapt index`, or from Python give LuceneRetriever(..., scale=N)"
                )
            scale = meta.scale
        self.meta = meta
        self.scale = scale
        self.encoder = QuantisedQueryEncoder(splade, scale)
        self.searcher = impact_searcher(self.index_dir, self.encoder)

    def model_warning(self, model: str) -> str | None:
        """Why the query model (``model`` names it) may not be the one that encoded the index, or None.

        Compares content hashes of the weights and vocabulary, not paths: a directory
        retrained in place is a different model behind the same name.
        """
        if self.meta is None:
            return None
        if not self.meta.model_sha256:
            return (f"{self.index_dir} records no model hash (built by an older version): "
                    f"cannot check that {model!r} encoded its documents")
        if not isinstance(self.encoder.splade, SpladeEncoder):  # an ONNX export: its metadata holds the hash
            onnx = self.encoder.splade.meta
            if not onnx.model_sha256:  # exported before the hash was recorded: the path is all there is
                return None if self.meta.model == model else (
                    f"{self.index_dir} was exported with {self.meta.model!r}; the ONNX query encoder comes from {model!r}")
            mine = (onnx.model_sha256, onnx.weights_sha256)
        else:
            mine = model_hashes(self.encoder.splade)
        if same_model((self.meta.model_sha256, self.meta.weights_sha256), mine):
            return None
        return (f"{self.index_dir} was built from a different model than {model!r} "
                f"(sha256 of weights, vocabulary and document length {self.meta.model_sha256[:12]} vs {mine[0][:12]}; "
                f"exported as {self.meta.model!r}): "
                f"query and document vectors do not match")

    @property
    def num_docs(self) -> int:
        return int(self.searcher.num_docs)

    def _depth(self, k: int) -> int:
        """``k`` hits, at most the documents the index holds: Lucene takes a Java int, and a deeper
        ask (``-k 2147483647``) failed inside Java with a traceback where it could return no more."""
        return min(int(k), self.num_docs)

    def search(self, text: str, k: int = 10, feedback: Feedback | None = None) -> list[Hit]:
        k = self._depth(k)
        if feedback is not None:
            (vector,) = self.feedback_queries([text], feedback)
            return self.search_encoded(vector, k)
        return _whole_ties(lambda n: self.searcher.search(text, n), k)

    def feedback_queries(
        self, texts: Sequence[str], feedback: Feedback, threads: int = 1
    ) -> list[dict[str, int]]:
        """The quantised queries after Rocchio feedback (``feedback.py``) from their first-pass hits.

        The same :func:`rocchio` as in memory, on integer impacts: the query's
        ``round(scale * q)`` plus ``weight`` times the mean of its best documents' stored
        impacts (cut to ``terms`` terms), rounded again. Needs an index built with
        ``--store-vectors``.
        """
        require_stored_vectors(self.index_dir, self.meta)
        self.encoder.prime(texts)
        # The first pass settled as every search is: Lucene's own top `docs` breaks ties its
        # way, so another document was fed back than `search` lists first.
        first = self.search_batch(texts, feedback.docs, threads)
        fed = sorted({h.doc_id for hits in first for h in hits})
        column = {d: j for j, d in enumerate(fed)}
        term_id = {t: i for i, t in enumerate(self.encoder.vocab)}
        try:
            Q = dicts_to_rows([self.encoder.encode(t) for t in texts], term_id)  # (n_queries, V)
            D = dicts_to_rows([self.stored_vector(d) for d in fed], term_id)  # (n_fed, V)
        except KeyError as e:
            raise LuceneError(f"{self.index_dir}: the stored term {e.args[0]!r} is not in the query model's "
                              "vocabulary; the index was built by another model") from None
        # Lucene returned each query's `docs` best documents already, so all of them are fed back.
        picked = np.zeros((len(texts), len(fed)))  # (n_queries, n_fed)
        for i, hits in enumerate(first):
            picked[i, [column[h.doc_id] for h in hits]] = 1.0
        expanded = rocchio(Q, D, picked, feedback, fed)  # (n_queries, V), already in impact units
        return quantise(expanded, self.encoder.vocab, 1)

    def holds(self, doc_id: str) -> bool:
        """Whether the index holds ``doc_id`` (a document with no term at the export's scale is not)."""
        return self.searcher.doc(doc_id) is not None

    def stored_vector(self, doc_id: str) -> dict[str, int]:
        """A document's integer impacts as exported, from an index built with ``--store-vectors``."""
        doc = self.searcher.doc(doc_id)
        raw = doc.raw() if doc is not None else None
        if raw is None:
            raise LuceneError(f"{self.index_dir}: document {doc_id!r} has no stored vector; "
                              "rebuild the index with `sparse-adapt index --store-vectors`")
        return json.loads(raw)["vector"]

    def search_encoded(self, vector: dict[str, int], k: int = 10) -> list[Hit]:
        """Search with an already quantised query (for timing Lucene alone)."""
        query, k = _java_query(vector), self._depth(k)
        return _whole_ties(lambda n: self.searcher.object.search(query, n), k)

    def search_encoded_batch(
        self, vectors: Sequence[dict[str, int]], k: int = 10, threads: int = 1
    ) -> list[list[Hit]]:
        """:meth:`search_encoded` for many queries in one call to Anserini's threaded batch search."""
        k = self._depth(k)
        pyclass = _pyclass()
        queries, ids = pyclass("java.util.ArrayList")(), pyclass("java.util.ArrayList")()
        java = [_java_query(vector) for vector in vectors]
        for i, query in enumerate(java):
            queries.add(query)
            ids.add(str(i))
        results = self.searcher.object.batch_search(queries, ids, int(k) + 1, int(threads))  # + 1: see _settled
        by_id = {r.getKey(): r.getValue() for r in results.entrySet().toArray()}
        return [_settled(list(by_id.get(str(i), [])), k, lambda n, q=q: self.searcher.object.search(q, n))
                for i, q in enumerate(java)]

    def run(
        self, queries: Sequence[Query], k: int = 100, threads: int = 1, feedback: Feedback | None = None
    ) -> dict[str, dict[str, float]]:
        """Top-``k`` of every query: ``{qid: {doc_id: score}}``; with ``feedback``, of the
        Rocchio-expanded queries (:meth:`feedback_queries`); both passes are batch searches."""
        if feedback is not None:
            vectors = self.feedback_queries([q.text for q in queries], feedback, threads)
            hits = self.search_encoded_batch(vectors, k, threads)
            return {q.qid: {h.doc_id: h.score for h in found} for q, found in zip(queries, hits)}
        texts = [q.text for q in queries]
        self.encoder.prime(texts)
        return {q.qid: {h.doc_id: h.score for h in found} for q, found in zip(queries, self.search_batch(texts, k, threads))}

    def search_batch(self, texts: Sequence[str], k: int, threads: int = 1) -> list[list[Hit]]:
        """:meth:`search` (without feedback) for many texts in one call to Anserini's threaded
        batch search; the texts' vectors are best primed on the encoder first."""
        ids, k = [str(i) for i in range(len(texts))], self._depth(k)  # positions: texts may repeat
        by_id = self.searcher.batch_search(list(texts), ids, k + 1, threads)  # + 1: see _settled
        return [_settled(list(by_id.get(i, [])), k, lambda n, t=t: self.searcher.search(t, n))
                for i, t in zip(ids, texts)]


def _ranked(hits) -> list[Hit]:
    """Lucene's hits in the order every evaluation uses (``evaluation.ranking``: ties by
    descending doc id, where Anserini breaks them by ascending doc id)."""
    return [Hit(d, s) for d, s in ranking({h.docid: float(h.score) for h in hits})]


def _whole_ties(fetch, k: int) -> list[Hit]:
    """The first ``k`` of ``fetch(n)``'s hits (Lucene's best ``n``) in ``ranking`` order: while
    the hit after the ``k``-th ties with it, more are fetched, since Lucene picks among tied
    documents by its own rule (ascending doc id) and the order's own pick could lie beyond."""
    n = k + 1
    while True:
        hits = fetch(n)
        if len(hits) < n or hits[-1].score != hits[k - 1].score:
            return _ranked(hits)[:k]
        n *= 2


def _settled(raw: list, k: int, refetch) -> list[Hit]:
    """The first ``k`` of a batch search's hits fetched ``k + 1`` deep, in ``ranking`` order; when
    the one past ``k`` ties with the ``k``-th, ``refetch(n)`` (this query alone) widens as
    :func:`_whole_ties` does, so a batch returns what one search would."""
    if len(raw) > k and raw[k].score == raw[k - 1].score:
        return _whole_ties(refetch, k)
    return _ranked(raw[:k])


def _pyclass():
    from sparse_adapt.retrieval.lucene import searcher_module

    return searcher_module().autoclass


@functools.cache
def _map_classes() -> tuple[object, object]:
    """``(java.util.HashMap, java.lang.Integer)``, looked up once per process, not per query."""
    pyclass = _pyclass()
    return pyclass("java.util.HashMap"), pyclass("java.lang.Integer")


def _java_query(vector: dict[str, int]) -> object:
    """A quantised query as the ``java.util.HashMap<String, Integer>`` Anserini's impact searcher takes."""
    hashmap, jint = _map_classes()
    jmap = hashmap()
    for term, w in vector.items():
        jmap.put(term, jint(w))
    return jmap
