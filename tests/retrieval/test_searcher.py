"""``searcher.py``'s own rules, with stand-ins for Lucene (no JVM): how tied hits are settled,
what the query encoder caches, and what a retriever says of the index behind it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp

from sparse_adapt.errors import ConfigError
from sparse_adapt.retrieval.lucene import IndexMeta, LuceneError
from sparse_adapt.retrieval.searcher import Hit, LuceneRetriever, QuantisedQueryEncoder, _settled, _whole_ties

# Lucene's order: descending score, ties by ascending doc id. The rule's (``ranking``) breaks
# ties by descending doc id, so among b, c and d (all 2.0) it takes d first.
SCORES = {"a": 3.0, "b": 2.0, "c": 2.0, "d": 2.0, "e": 1.0}
LUCENE = [SimpleNamespace(docid=d, score=s) for d, s in sorted(SCORES.items(), key=lambda kv: (-kv[1], kv[0]))]


def _fetch(asked: list[int]):
    def fetch(n: int) -> list:
        asked.append(n)
        return LUCENE[:n]
    return fetch


def _stand_in_java(monkeypatch) -> None:
    """Pyserini's Java list and map classes stood in for by Python ones (no JVM)."""
    import sparse_adapt.retrieval.searcher as searcher

    class JavaList(list):
        add = list.append

    class JavaMap(dict):
        put = dict.__setitem__

    monkeypatch.setattr(searcher, "_pyclass", lambda: lambda name: JavaList)
    monkeypatch.setattr(searcher, "_map_classes", lambda: (JavaMap, int))


def _java_results(hits: dict):
    """What the Java batch search returns: a map whose entries hold each id's hits."""
    entries = [SimpleNamespace(getKey=lambda i=i: i, getValue=lambda h=h: h) for i, h in hits.items()]
    return SimpleNamespace(entrySet=lambda: SimpleNamespace(toArray=lambda: entries))


def test_a_tie_at_the_kth_hit_is_fetched_whole_and_settled_by_the_rule():
    asked: list[int] = []
    # k = 2: Lucene's best 3 (a, b, c) end in a tie with the 2nd, so 6 are asked (5 exist)
    assert _whole_ties(_fetch(asked), 2) == [Hit("a", 3.0), Hit("d", 2.0)]
    assert asked == [3, 6]
    asked.clear()
    assert _whole_ties(_fetch(asked), 4) == [Hit("a", 3.0), Hit("d", 2.0), Hit("c", 2.0), Hit("b", 2.0)]
    assert asked == [5]  # e (1.0) past the 4th: no tie to widen


def test_a_batch_hit_list_is_refetched_only_when_its_extra_hit_ties():
    asked: list[int] = []
    assert _settled(LUCENE[:3], 2, _fetch(asked)) == [Hit("a", 3.0), Hit("d", 2.0)] and asked == [3, 6]
    asked.clear()
    assert _settled(LUCENE[:5], 4, _fetch(asked)) == [Hit("a", 3.0), Hit("d", 2.0), Hit("c", 2.0), Hit("b", 2.0)]
    assert asked == []
    assert _settled(LUCENE[:2], 2, _fetch(asked)) == [Hit("a", 3.0), Hit("b", 2.0)] and asked == []  # all there are


class _Counting:
    """A query model over 3 terms that counts the texts it encodes."""

    def __init__(self):
        self.encoded: list[list[str]] = []
        self.kinds: list[str] = []

    def id_to_token(self) -> list[str]:
        return ["t0", "t1", "t2"]

    def encode(self, texts, kind, batch_size):
        self.encoded.append(list(texts))
        self.kinds.append(kind)
        return sp.csr_matrix(np.array([[0.5, 0.0, 0.123]] * len(texts)))


def test_the_query_encoder_encodes_each_text_once():
    model = _Counting()
    encoder = QuantisedQueryEncoder(model, scale=100)
    encoder.prime(["q1", "q2", "q1"])
    assert encoder.encode("q1") == {"t0": 50, "t2": 12} and encoder.encode("q2") == {"t0": 50, "t2": 12}
    encoder.encode("q3")
    encoder.prime(["q2", "q3"])
    assert model.encoded == [["q1", "q2"], ["q3"]]
    assert model.kinds == ["query", "query"]  # the query window and settings, not the documents'


def _retriever(index_dir, meta: IndexMeta | None = None, splade=None, docs: dict | None = None) -> LuceneRetriever:
    """A retriever over stand-ins: ``docs`` maps an id to its stored line (None: no stored vector)."""
    retriever = object.__new__(LuceneRetriever)
    retriever.index_dir, retriever.meta, retriever.scale = index_dir, meta, 100
    retriever.encoder = SimpleNamespace(splade=splade)
    stored = docs or {}
    retriever.searcher = SimpleNamespace(
        doc=lambda d: None if d not in stored else SimpleNamespace(raw=lambda: stored[d]), num_docs=len(stored))
    return retriever


def test_an_index_directory_without_its_description_is_refused_before_lucene(tmp_path):
    with pytest.raises(ConfigError, match=r"no sparse_adapt_index\.json .*its impact scale is unknown"):
        LuceneRetriever(tmp_path, _Counting())


def test_stored_vectors_are_read_back_and_a_missing_one_is_said(tmp_path):
    retriever = _retriever(tmp_path, docs={"d1": json.dumps({"id": "d1", "vector": {"t0": 7}}), "d2": None})
    assert retriever.stored_vector("d1") == {"t0": 7}
    assert retriever.holds("d1") and retriever.holds("d2") and not retriever.holds("d3")
    for doc_id in ("d2", "d3"):
        with pytest.raises(LuceneError, match=f"document '{doc_id}' has no stored vector; rebuild the index with"):
            retriever.stored_vector(doc_id)


def _meta(model_sha256: str) -> IndexMeta:
    return IndexMeta(scale=100, model="exported-model", documents=1, seconds=0.0, model_sha256=model_sha256)


def test_model_warning_of_an_index_without_a_hash_and_of_an_onnx_export_without_one(tmp_path):
    assert "records no model hash (built by an older version): cannot check that 'm' encoded" in \
        _retriever(tmp_path, _meta("")).model_warning("m")
    assert _retriever(tmp_path, None).model_warning("m") is None  # no description: nothing to compare
    # An ONNX export made before its hash was recorded: only the names can be compared.
    onnx = SimpleNamespace(meta=SimpleNamespace(model_sha256="", weights_sha256=""))
    retriever = _retriever(tmp_path, _meta("f" * 64), splade=onnx)
    assert retriever.model_warning("exported-model") is None
    assert retriever.model_warning("other") == (f"{tmp_path} was exported with 'exported-model'; "
                                                "the ONNX query encoder comes from 'other'")


def test_a_batch_search_encodes_its_queries_in_one_batch_and_asks_one_hit_past_k(tmp_path):
    """The hit past the k-th tells a tie at the k-th (``_settled``); and Pyserini encodes each
    query as it searches it, one forward pass per query unless they are primed together."""
    from sparse_adapt.data import Query

    model, asked = _Counting(), []
    retriever = _retriever(tmp_path, docs=dict.fromkeys(["d1", "d2"]))
    retriever.encoder = QuantisedQueryEncoder(model, scale=100)

    def batch_search(texts, ids, k, threads):
        asked.append(k)
        return {i: [SimpleNamespace(docid="d1", score=float(sum(retriever.encoder.encode(t).values())))]
                for i, t in zip(ids, texts)}

    retriever.searcher.batch_search = batch_search
    run = retriever.run([Query("1", "a"), Query("2", "b"), Query("3", "a")], k=1)
    assert run == {"1": {"d1": 62.0}, "2": {"d1": 62.0}, "3": {"d1": 62.0}}  # 50 + 12 each
    assert asked == [2] and model.encoded == [["a", "b"]]


def test_a_batch_of_encoded_queries_asks_one_hit_past_k_and_settles_its_tie(tmp_path, monkeypatch):

    _stand_in_java(monkeypatch)
    asked = []

    def batch_search(queries, ids, k, threads):
        asked.append(k)
        return _java_results({i: LUCENE[:k] for i in ids})

    retriever = _retriever(tmp_path, docs=dict.fromkeys(SCORES))
    retriever.searcher.object = SimpleNamespace(batch_search=batch_search, search=lambda query, n: LUCENE[:n])
    assert retriever.search_encoded_batch([{"t0": 1}], k=2) == [[Hit("a", 3.0), Hit("d", 2.0)]]
    assert asked == [3]


def _feedback_retriever(tmp_path, stored: dict[str, dict], first: dict[str, list[str]], asked: list[int]):
    """Stored vectors ``stored`` and first-pass hits ``first`` (text -> doc ids)."""
    meta = IndexMeta(scale=100, model="m", documents=len(stored), seconds=0.0, vectors=True)
    retriever = _retriever(tmp_path, meta, docs={d: json.dumps({"id": d, "vector": v}) for d, v in stored.items()})
    retriever.encoder = QuantisedQueryEncoder(_Counting(), scale=100)

    def search_batch(texts, k, threads=1):
        asked.append(k)
        return [[Hit(d, 1.0) for d in first[t]] for t in texts]

    retriever.search_batch = search_batch
    return retriever


def test_feedback_adds_each_querys_own_first_documents_in_impact_units(tmp_path):
    from sparse_adapt.retrieval.feedback import Feedback

    asked: list[int] = []
    retriever = _feedback_retriever(tmp_path, {"d1": {"t1": 40}, "d2": {"t1": 10, "t2": 30}},
                                    {"q1": ["d1"], "q2": ["d2"]}, asked)
    # each query is {t0: 50, t2: 12}; + 0.5 x its own document's impacts, rounded
    assert retriever.feedback_queries(["q1", "q2"], Feedback(docs=1, weight=0.5)) == [
        {"t0": 50, "t1": 20, "t2": 12}, {"t0": 50, "t1": 5, "t2": 27}]
    assert asked == [1]


def test_feedback_from_an_index_of_another_vocabulary_is_one_error(tmp_path):
    from sparse_adapt.retrieval.feedback import Feedback

    retriever = _feedback_retriever(tmp_path, {"d1": {"zz": 3}}, {"q": ["d1"]}, [])
    with pytest.raises(LuceneError, match="the stored term 'zz' is not in the query model's vocabulary"):
        retriever.feedback_queries(["q"], Feedback())


def test_a_search_deeper_than_the_index_asks_lucene_for_its_documents_alone(tmp_path):
    # Lucene takes a Java int: -k 2147483647 (+ 1 for the tie check) overflowed it
    retriever = _retriever(tmp_path, docs=dict.fromkeys(["d1", "d2"]))
    asked = []
    retriever.searcher.batch_search = lambda texts, ids, k, threads: asked.append(k) or {}
    assert retriever.search_batch(["q"], 2147483647) == [[]] and asked == [3]


def test_feedback_from_an_index_without_stored_vectors_is_refused(tmp_path):
    from sparse_adapt.retrieval.feedback import Feedback
    from sparse_adapt.retrieval.searcher import require_stored_vectors

    meta = IndexMeta(scale=100, model="m", documents=1, seconds=0.0, vectors=False)
    with pytest.raises(LuceneError, match="built without --store-vectors"):
        _retriever(tmp_path, meta).feedback_queries(["q"], Feedback())
    require_stored_vectors(tmp_path, IndexMeta(scale=100, model="m", documents=1, seconds=0.0, vectors=True))


def test_model_warning_compares_an_onnx_exports_recorded_hashes(tmp_path):
    meta = IndexMeta(scale=100, model="exported-model", documents=1, seconds=0.0, model_sha256="a" * 64,
                     weights_sha256="b" * 64)

    def onnx(model_sha256: str):
        return SimpleNamespace(meta=SimpleNamespace(model_sha256=model_sha256, weights_sha256="b" * 64))

    assert _retriever(tmp_path, meta, splade=onnx("a" * 64)).model_warning("other-name") is None  # same hash, any name
    warning = _retriever(tmp_path, meta, splade=onnx("c" * 64)).model_warning("exported-model")
    assert warning.startswith(f"{tmp_path} was built from a different model than 'exported-model'")
    assert "aaaaaaaaaaaa vs cccccccccccc" in warning


def test_a_scale_given_from_python_is_the_one_queries_are_quantised_with(tmp_path, monkeypatch):
    import sparse_adapt.retrieval.searcher as searcher

    monkeypatch.setattr(searcher, "impact_searcher", lambda index_dir, encoder: SimpleNamespace(num_docs=0))
    described, bare = tmp_path / "described", tmp_path / "bare"
    described.mkdir()
    bare.mkdir()
    IndexMeta(scale=100, model="m", documents=1, seconds=0.0).save(described)
    # 0.5 x 7 = 3.5 -> 4 and 0.123 x 7 = 0.861 -> 1, where the index's own 100 gives 50 and 12
    for index_dir in (described, bare):  # without a description the given scale is all there is
        retriever = LuceneRetriever(index_dir, _Counting(), scale=7)
        assert retriever.scale == 7 and retriever.encoder.encode("q") == {"t0": 4, "t2": 1}


def test_a_single_search_deeper_than_the_index_asks_lucene_for_its_documents_alone(tmp_path, monkeypatch):

    # as search_batch: 2147483647 + 1 overflowed Lucene's Java int, with or without a text to encode
    _stand_in_java(monkeypatch)
    asked = []
    retriever = _retriever(tmp_path, docs=dict.fromkeys(SCORES))
    retriever.searcher.search = lambda text, n: asked.append(n) or LUCENE[:n]
    retriever.searcher.object = SimpleNamespace(search=lambda query, n: asked.append(n) or LUCENE[:n])
    everything = [Hit("a", 3.0), Hit("d", 2.0), Hit("c", 2.0), Hit("b", 2.0), Hit("e", 1.0)]
    assert retriever.search("q", 2147483647) == everything and asked == [6]
    asked.clear()
    assert retriever.search_encoded({"t0": 1}, 2147483647) == everything and asked == [6]


def test_feedback_adds_the_mean_of_all_of_a_querys_first_documents(tmp_path):
    from sparse_adapt.retrieval.feedback import Feedback

    asked: list[int] = []
    docs = {"d1": {"t1": 40}, "d2": {"t1": 20, "t2": 40}}
    retriever = _feedback_retriever(tmp_path, docs, {"q": ["d1", "d2"]}, asked)
    # {t0: 50, t2: 12} + 0.5 x mean(d1, d2) = + 0.5 x {t1: 30, t2: 20}; d1 alone would give t1 20, t2 12
    assert retriever.feedback_queries(["q"], Feedback(docs=2, weight=0.5)) == [{"t0": 50, "t1": 15, "t2": 22}]
    assert asked == [2]


def test_a_tie_that_ends_inside_the_wider_fetch_stops_widening():
    # a 3; b, c 2; then 1.0 all the way: the tie at k = 2 ends by the 6th hit, so no 12 are asked
    lucene = LUCENE[:3] + [SimpleNamespace(docid=f"z{i}", score=1.0) for i in range(20)]
    asked: list[int] = []

    def fetch(n: int) -> list:
        asked.append(n)
        return lucene[:n]

    assert _whole_ties(fetch, 2) == [Hit("a", 3.0), Hit("c", 2.0)] and asked == [3, 6]


def test_a_missing_index_and_a_file_given_as_the_index_are_told_apart(tmp_path):
    with pytest.raises(LuceneError, match="missing: no such index directory; build one with"):
        LuceneRetriever(tmp_path / "missing", _Counting())
    (tmp_path / "file").write_text("x")
    with pytest.raises(LuceneError, match="file: a file, not an index directory; build one with"):
        LuceneRetriever(tmp_path / "file", _Counting())


def test_batch_searches_hand_lucene_the_threads_asked_for(tmp_path, monkeypatch):
    from sparse_adapt.data import Query
    from sparse_adapt.retrieval.feedback import Feedback

    _stand_in_java(monkeypatch)
    threads = []

    def batch_search(queries, ids, k, n_threads):
        threads.append(n_threads)
        return _java_results({i: LUCENE[:1] for i in ids})

    retriever = _retriever(tmp_path, docs=dict.fromkeys(SCORES))
    retriever.encoder = QuantisedQueryEncoder(_Counting(), scale=100)
    retriever.searcher.batch_search = (
        lambda texts, ids, k, n_threads: threads.append(n_threads) or {i: LUCENE[:1] for i in ids})
    retriever.run([Query("1", "q")], k=1, threads=3)
    retriever.searcher.object = SimpleNamespace(batch_search=batch_search)
    retriever.search_encoded_batch([{"t0": 1}], k=1, threads=4)
    assert threads == [3, 4]
    # with feedback both passes are batch searches on the threads given
    retriever.meta = IndexMeta(scale=100, model="m", documents=5, seconds=0.0, vectors=True)
    retriever.searcher.doc = lambda d: SimpleNamespace(raw=lambda: json.dumps({"id": d, "vector": {"t1": 10}}))
    threads.clear()
    retriever.run([Query("1", "q")], k=1, threads=5, feedback=Feedback(docs=1))
    assert threads == [5, 5]


def test_feedback_encodes_its_queries_in_one_batch(tmp_path):
    from sparse_adapt.retrieval.feedback import Feedback

    retriever = _feedback_retriever(tmp_path, {"d1": {"t1": 40}}, {"q1": ["d1"], "q2": ["d1"]}, [])
    retriever.feedback_queries(["q1", "q2"], Feedback(docs=1))
    # Pyserini encodes each query as it searches it: one forward pass each unless primed together
    assert retriever.encoder.splade.encoded == [["q1", "q2"]]


def test_a_single_search_with_feedback_searches_the_expanded_query(tmp_path, monkeypatch):
    from sparse_adapt.retrieval.feedback import Feedback

    _stand_in_java(monkeypatch)
    retriever = _feedback_retriever(tmp_path, {"d1": {"t1": 40}, "d2": {}, "d3": {}}, {"q1": ["d1"]}, [])
    searched = []
    retriever.searcher.search = lambda text, n: pytest.fail("searched the text without its feedback")
    retriever.searcher.object = SimpleNamespace(search=lambda query, n: searched.append((dict(query), n)) or [])
    assert retriever.search("q1", 1, feedback=Feedback(docs=1, weight=0.5)) == []
    assert searched == [({"t0": 50, "t1": 20, "t2": 12}, 2)]  # k + 1 (the tie check), not all 3


def test_an_index_hashed_before_the_document_window_counted_matches_an_onnx_export_by_its_weights(tmp_path):
    # such an index recorded the weights' hash as model_sha256 (and no weights_sha256)
    meta = IndexMeta(scale=100, model="exported-model", documents=1, seconds=0.0, model_sha256="b" * 64)
    onnx = SimpleNamespace(meta=SimpleNamespace(model_sha256="a" * 64, weights_sha256="b" * 64))
    assert _retriever(tmp_path, meta, splade=onnx).model_warning("other-name") is None
    onnx.meta.weights_sha256 = "c" * 64
    assert "was built from a different model" in _retriever(tmp_path, meta, splade=onnx).model_warning("other-name")


def test_a_tie_in_a_later_querys_batch_hits_is_refetched_for_that_query(tmp_path, monkeypatch):

    _stand_in_java(monkeypatch)
    # the first query's hits have no tie at k = 2; the second's (b, c at 2.0) do
    plain = [SimpleNamespace(docid=d, score=s) for d, s in (("x", 3.0), ("y", 1.0), ("z", 0.5))]
    lucene = {"q1": plain, "q2": LUCENE}
    retriever = _retriever(tmp_path, docs=dict.fromkeys(SCORES))
    retriever.searcher.batch_search = lambda texts, ids, k, threads: {i: lucene[t][:k] for i, t in zip(ids, texts)}
    retriever.searcher.search = lambda text, n: lucene[text][:n]
    want = [[Hit("x", 3.0), Hit("y", 1.0)], [Hit("a", 3.0), Hit("d", 2.0)]]
    assert retriever.search_batch(["q1", "q2"], 2) == want

    def batch_search(queries, ids, k, threads):
        return _java_results({i: search(q, k) for q, i in zip(queries, ids)})

    def search(query, n):
        return lucene["q2" if query == {"t0": 2} else "q1"][:n]

    retriever.searcher.object = SimpleNamespace(batch_search=batch_search, search=search)
    assert retriever.search_encoded_batch([{"t0": 1}, {"t0": 2}], k=2) == want
