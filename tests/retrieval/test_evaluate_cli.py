"""`sparse-adapt evaluate`: in-memory metrics, ir_datasets (a local BEIR folder), --compare."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from ranx import Qrels, Run, evaluate

from corpora import GATROCRAPTIC
from sparse_adapt.cli import main
from sparse_adapt.data import load_documents, load_qrels, load_queries
from sparse_adapt.data.records import DataError
from sparse_adapt.retrieval.evaluation import run_tag
from tests.conftest import make_tiny_bert

FILES = ["--docs", str(GATROCRAPTIC.docs), "--queries", str(GATROCRAPTIC.queries), "--qrels", str(GATROCRAPTIC.qrels)]
METRICS = ["ndcg@10", "mrr@10", "recall@5"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Two tiny random models, made sparse (a random head fires ~28k terms per text; a decoder
    bias of -0.3 leaves a few dozen) so that the independent dict-based scoring stays fast."""
    import torch

    root = tmp_path_factory.mktemp("models")
    out = {}
    for seed in (0, 1):
        splade = make_tiny_bert(seed=seed)
        with torch.no_grad():
            splade.mlm.get_output_embeddings().bias -= 0.3
        out[seed] = str(splade.save_pretrained(root / f"tiny{seed}"))
    return out


def _qrels_of(path: Path, keep) -> Path:
    """The bundled qrels' lines whose query ``keep`` accepts, written to ``path``."""
    path.write_text("".join(l for l in GATROCRAPTIC.qrels.read_text().splitlines(keepends=True) if keep(l.split()[0])))
    return path


def run_json(capsys, argv) -> dict:
    capsys.readouterr()
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def independent_metrics(model_dir: str, keep: int | None = None) -> dict[str, float]:
    """Dot products of {token: weight} dicts, ranked and scored by ranx directly; ``keep``: each
    document's that many largest weights only (dicts are sorted by weight)."""
    from sparse_adapt.modeling.encoder import SpladeEncoder

    splade = SpladeEncoder.from_pretrained(model_dir)
    docs, queries = load_documents(GATROCRAPTIC.docs), load_queries(GATROCRAPTIC.queries)
    dv = [dict(list(v.items())[:keep]) for v in splade.encode_to_dicts([d.text for d in docs], "document")]
    qv = splade.encode_to_dicts([q.text for q in queries], "query")
    run = {
        q.qid: {d.doc_id: sum(w * v.get(t, 0.0) for t, w in qw.items()) for d, v in zip(docs, dv)}
        for q, qw in zip(queries, qv)
    }
    return evaluate(Qrels(load_qrels(GATROCRAPTIC.qrels)), Run(run), METRICS, make_comparable=True)


def test_in_memory_json_has_exactly_the_three_metrics(models, capsys):
    got = run_json(capsys, ["evaluate", "--model", models[0], *FILES, "--json"])
    assert list(got) == METRICS
    want = independent_metrics(models[0])
    for m in METRICS:
        assert got[m] == pytest.approx(want[m], abs=1e-5)


def test_max_active_dims_scores_cut_documents(models, capsys):
    got = run_json(capsys, ["evaluate", "--model", models[0], *FILES, "--max-active-dims", "3", "--json"])
    cut, full = independent_metrics(models[0], keep=3), independent_metrics(models[0])
    assert cut != full  # a cut of 3 terms changes the ranking of these random models
    for m in METRICS:
        assert got[m] == pytest.approx(cut[m], abs=1e-5)


def feedback_metrics(model: str, docs_k: int, weight: float, terms: int = 32) -> dict[str, float]:
    """Rocchio worked in dense numpy, independent of ``retrieval/feedback.py``: each query plus
    ``weight`` x the mean of its ``docs_k`` best positive-scoring documents (ties: file order),
    that mean cut to its ``terms`` largest weights (ties: lower id); ranked by ranx."""
    from sparse_adapt.modeling.encoder import SpladeEncoder

    splade = SpladeEncoder.from_pretrained(model)
    docs, queries = load_documents(GATROCRAPTIC.docs), load_queries(GATROCRAPTIC.queries)
    D = splade.encode([d.text for d in docs], "document").toarray().astype(np.float64)
    Q = splade.encode([q.text for q in queries], "query").toarray().astype(np.float64)
    first = Q @ D.T
    expanded = Q.copy()
    for i, row in enumerate(first):
        best = [j for j in sorted(range(len(docs)), key=lambda j: (-row[j], j))[:docs_k] if row[j] > 0]
        if not best:
            continue
        centroid = D[best].mean(axis=0)
        keep = sorted((t for t in range(len(centroid)) if centroid[t] > 0), key=lambda t: (-centroid[t], t))[:terms]
        cut = np.zeros_like(centroid)
        cut[keep] = centroid[keep]
        expanded[i] += weight * cut
    S = expanded @ D.T
    run = {q.qid: {d.doc_id: float(S[i, j]) for j, d in enumerate(docs) if S[i, j] > 0} for i, q in enumerate(queries)}
    return evaluate(Qrels(load_qrels(GATROCRAPTIC.qrels)), Run(run), METRICS, make_comparable=True)


def test_feedback_scores_the_expanded_queries(models, capsys):
    got = run_json(capsys, ["evaluate", "--model", models[0], *FILES, "--feedback", "--feedback-docs", "2",
                            "--feedback-weight", "1.5", "--json"])
    want = feedback_metrics(models[0], 2, 1.5)
    assert want != independent_metrics(models[0])  # feedback changes this random model's ranking
    for m in METRICS:
        assert got[m] == pytest.approx(want[m], abs=1e-5)


def test_feedback_against_the_same_model_without_it(models, capsys):
    """--compare names the other system as given: the same model, scored without feedback."""
    got = run_json(capsys, ["evaluate", "--model", models[0], *FILES, "--feedback", "--compare", models[0], "--json"])
    report = got["comparison"]
    assert list(report["model_names"]) == [f"{models[0]} (feedback)", models[0]]
    with_fb, without = feedback_metrics(models[0], 1, 0.5), independent_metrics(models[0])  # the defaults: 1 / 0.5 / 32
    assert with_fb != without
    for m in METRICS:
        assert report[f"{models[0]} (feedback)"]["scores"][m] == pytest.approx(with_fb[m], abs=1e-5)
        assert report[models[0]]["scores"][m] == pytest.approx(without[m], abs=1e-5)


def write_beir(folder: Path, titles: dict[str, str] | None = None) -> Path:
    """The Gatrocraptic files in BEIR's layout (plus an unjudged query, as BEIR's queries.jsonl has)."""
    titles = titles or {}
    (folder / "qrels").mkdir(parents=True)
    with (folder / "corpus.jsonl").open("w") as f:
        for d in load_documents(GATROCRAPTIC.docs):
            f.write(json.dumps({"_id": d.doc_id, "title": titles.get(d.doc_id, ""), "text": d.text}) + "\n")
    with (folder / "queries.jsonl").open("w") as f:
        for q in load_queries(GATROCRAPTIC.queries):
            f.write(json.dumps({"_id": q.qid, "text": q.text, "metadata": {}}) + "\n")
        f.write(json.dumps({"_id": "train-only", "text": "a query of another split"}) + "\n")
    with (folder / "qrels" / "test.tsv").open("w") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for qid, judged in load_qrels(GATROCRAPTIC.qrels).items():
            for doc_id, grade in judged.items():
                f.write(f"{qid}\t{doc_id}\t{grade}\n")
    return folder


def test_local_beir_folder_loads_through_ir_datasets(tmp_path):
    from ir_datasets.datasets.base import Dataset

    from sparse_adapt.retrieval.datasets import load_dataset

    ds = load_dataset(str(write_beir(tmp_path / "beir", titles={"d2": "Timeouts"})))
    assert isinstance(ds.dataset, Dataset)
    docs = {d.doc_id: d.text for d in load_documents(GATROCRAPTIC.docs)}
    got = {d.doc_id: d.text for d in ds.documents()}
    assert got["d2"] == "Timeouts " + docs["d2"]  # BEIR's title is part of the text
    del got["d2"], docs["d2"]
    assert got == docs
    assert [q.qid for q in ds.queries()] == [q.qid for q in load_queries(GATROCRAPTIC.queries)]  # unjudged dropped
    assert ds.qrels() == load_qrels(GATROCRAPTIC.qrels)


def test_a_beir_corpus_file_reads_as_its_folder_does(tmp_path):
    # --docs corpus.jsonl (sparse_adapt.data) and --dataset FOLDER (ir_datasets) give the same texts, line
    # breaks and runs of spaces included: a byte-level BPE tokenizer tells them apart
    from sparse_adapt.data import load_documents, load_queries
    from sparse_adapt.retrieval.datasets import load_dataset

    beir = write_beir(tmp_path / "beir", titles={"d2": "Timeouts  and\nretries"})
    corpus = beir / "corpus.jsonl"
    lines = corpus.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    record["text"] = "  two  spaces\nand a line break  "
    corpus.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n", encoding="utf-8")
    via_file = {d.doc_id: d.text for d in load_documents(corpus)}
    assert via_file == {d.doc_id: d.text for d in load_dataset(str(beir)).documents()}
    assert via_file[record["_id"]] == "two spaces and a line break"
    queries = beir / "queries.jsonl"
    lines = queries.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    record["text"] = record["text"].replace(" ", "\n ", 1)
    queries.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n", encoding="utf-8")
    via_file = {q.qid: q.text for q in load_queries(queries)}
    assert all(via_file[q.qid] == q.text for q in load_dataset(str(beir)).queries())


def test_dataset_option_equals_the_same_files(models, tmp_path, capsys):
    beir = write_beir(tmp_path / "beir")
    via_dataset = run_json(capsys, ["evaluate", "--model", models[0], "--dataset", str(beir), "--json"])
    via_files = run_json(capsys, ["evaluate", "--model", models[0], *FILES, "--json"])
    assert via_dataset == via_files


@pytest.mark.parametrize("edit, where, message", [
    (lambda t: t + "q11\td1\t99999999999999999999\n", ":LAST:", "field 'grade': expected a relevance grade between"),
    # ir_datasets' own reader took int("1_0") as grade 10 and Arabic-Indic digits as numbers
    (lambda t: t + "q11\td1\t1_0\n", ":LAST:", "field 'grade': expected an integer, got '1_0'"),
    (lambda t: t + "q11\td1\t\u0663\n", ":LAST:", "field 'grade': expected an integer"),
    (lambda t: t + "q11\td1\t1\textra\n", ":LAST:", "columns"),
    (lambda t: t.split("\n", 1)[1], ":1:", "expected BEIR's header line"),
    (lambda t: "", "", "no judgements in file"),
    (lambda t: t.split("\n", 1)[0] + "\n", "", "no judgements in file"),
], ids=["grade beyond int64", "underscore digits", "non-ASCII digits", "extra column", "no header", "empty",
        "header alone"])
def test_a_beir_folders_qrels_are_read_as_a_qrels_file(tmp_path, edit, where, message):
    from sparse_adapt.retrieval.datasets import load_dataset

    beir = write_beir(tmp_path / "beir")
    path = beir / "qrels" / "test.tsv"
    path.write_text(edit(path.read_text()))
    where = where.replace(":LAST:", f":{len(path.read_text().splitlines())}:")
    with pytest.raises(DataError, match=re.escape(f"{path}{where}") + ".*" + re.escape(message)):
        load_dataset(str(beir)).qrels()


def test_a_beir_folders_crlf_qrels_with_a_blank_last_line_read_as_the_same_file_given_to_qrels(tmp_path):
    from sparse_adapt.retrieval.datasets import load_dataset

    beir = write_beir(tmp_path / "beir")
    path = beir / "qrels" / "test.tsv"
    plain = load_dataset(str(beir)).qrels()
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n") + b"\r\n  \r\n")  # ir_datasets: "got 0 columns"
    assert load_dataset(str(beir)).qrels() == plain == load_qrels(path)


@pytest.mark.parametrize("part, line, message", [
    ("corpus", {"_id": 5, "title": "", "text": "x"}, "corpus.jsonl:27: field '_id': expected a non-empty string, got 5"),
    ("corpus", {"_id": "z", "title": "", "text": None}, "corpus.jsonl:27: field 'text': expected a string, got None"),
    ("corpus", {"_id": "z", "title": "", "text": " "}, "corpus.jsonl:27: field 'text': a BEIR record needs a non-empty"),
    ("corpus", {"_id": "d1", "title": "", "text": "again"}, "corpus.jsonl:27: field '_id': duplicate id 'd1' (first on line 1)"),
    ("queries", {"_id": "q99", "text": ""}, "queries.jsonl:17: field 'text': expected a non-empty string"),
    ("corpus", {"_id": "doc one", "title": "", "text": "x"}, "corpus.jsonl:27: field '_id': 'doc one' holds whitespace"),
    ("corpus", {"_id": "z", "title": "\u200b", "text": "\u0000"}, "corpus.jsonl:27: field 'text': a BEIR record needs a non-empty"),
    ("corpus", {"_id": "z", "title": "", "text": "\u0301\ufe0f"}, "corpus.jsonl:27: field 'text': a BEIR record needs a non-empty"),
    ("corpus", {"_id": "\ufeffz", "title": "", "text": "x"}, "corpus.jsonl:27: field '_id': .* holds the invisible or control character U.FEFF"),
    ("corpus", {"_id": "z", "title": "", "text": "alpha \ud800"}, "corpus.jsonl:27: field 'text': contains an unpaired surrogate"),
    ("queries", {"_id": "q\ud800", "text": "x"}, "queries.jsonl:17: field '_id': contains an unpaired surrogate"),
])
def test_a_bad_beir_record_is_refused_like_the_same_line_of_a_docs_file(part, line, message, tmp_path, capsys):
    """ir_datasets parses the folder without these checks: each line gets those of a --docs
    (--queries) line first, naming file and line; the records it yields get the rest."""
    from sparse_adapt.retrieval.datasets import DatasetError, load_dataset

    beir = write_beir(tmp_path / "beir")
    with (beir / f"{part}.jsonl").open("a") as f:
        f.write(json.dumps(line) + "\n")
    with pytest.raises((DataError, DatasetError), match=message.replace("(", "\\(").replace(")", "\\)")):
        ds = load_dataset(str(beir))
        list(ds.documents()) if part == "corpus" else ds.queries()


@pytest.mark.parametrize("part, raw, message", [
    ("corpus", '{"_id": "z", "text": "x", "text": "y"}', "corpus.jsonl:27: field 'text': appears twice in one JSON object"),
    ("queries", '{"_id": "q99", "_id": "q98", "text": "x"}', "queries.jsonl:17: field '_id': appears twice"),
    ("corpus", '{"title": "", "text": "x"}', "corpus.jsonl:27: field '_id': missing"),
    ("queries", '{"_id": "q99"}', "queries.jsonl:17: field 'text': missing"),
    ("corpus", '{"_id": "z", "text": "x"', "corpus.jsonl:27: invalid JSON"),
    ("queries", '["q99", "x"]', "queries.jsonl:17: expected a JSON object, got list"),
])
def test_a_beir_line_ir_datasets_would_misread_is_refused_naming_file_and_line(part, raw, message, tmp_path):
    # ir_datasets' parser keeps a repeated key's last value and fails on a missing field
    # without a line; the folder's files are read as --docs/--queries files are.
    from sparse_adapt.data.records import DataError
    from sparse_adapt.retrieval.datasets import load_dataset

    beir = write_beir(tmp_path / "beir")
    with (beir / f"{part}.jsonl").open("a") as f:
        f.write(raw + "\n")
    ds = load_dataset(str(beir))
    with pytest.raises(DataError, match=message.replace("(", "\\(").replace("[", "\\[")):
        list(ds.documents()) if part == "corpus" else ds.queries()


def test_blank_lines_and_an_absent_title_read_in_a_beir_folder_as_in_its_files(tmp_path):
    from sparse_adapt.retrieval.datasets import load_dataset

    beir = write_beir(tmp_path / "beir")
    for part, record in (("corpus", {"_id": "z", "text": "no title here"}), ("queries", {"_id": "q99", "text": "x"})):
        path = beir / f"{part}.jsonl"
        lines = path.read_text().splitlines()
        path.write_text("\n" + "\n".join(lines[:3]) + "\n\n  \n" + "\n".join(lines[3:] + [json.dumps(record)]) + "\n\n")
    ds = load_dataset(str(beir))
    documents = list(ds.documents())
    assert documents == load_documents(beir / "corpus.jsonl") and documents[-1].text == "no title here"
    queries = ds.queries(judged_only=False)
    assert queries == load_queries(beir / "queries.jsonl") and queries[-1].qid == "q99"


def test_beir_folder_without_qrels_is_a_clear_error(models, tmp_path, capsys):
    beir = write_beir(tmp_path / "beir")
    (beir / "qrels" / "test.tsv").unlink()
    assert main(["evaluate", "--model", models[0], "--dataset", str(beir)]) == 2
    assert "qrels/test.tsv" in "".join(capsys.readouterr().err.split())


def test_an_ir_datasets_read_error_without_a_message_is_still_one_line(models, tmp_path, capsys, monkeypatch):
    """str(OSError()) is empty: taking its first line raised IndexError, a traceback."""
    from sparse_adapt.retrieval import datasets

    class Failing:
        documents = None

        def queries(self):
            raise OSError()

    monkeypatch.setattr(datasets, "load_dataset", lambda name: Failing())
    assert main(["evaluate", "--model", models[0], "--dataset", "msmarco-passage/dev"]) == 2
    err = capsys.readouterr().err
    assert "cannot read ir_datasets 'msmarco-passage/dev': OSError" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--dataset", "x", "--docs", "d.jsonl"], "drop --docs"),
        (["--docs", str(GATROCRAPTIC.docs)], "sparse-adapt evaluate: missing --queries and --qrels"),
        (["--docs", str(GATROCRAPTIC.docs), "--queries", str(GATROCRAPTIC.queries)],
         "sparse-adapt evaluate: missing --qrels (or pass --dataset) (see sparse-adapt evaluate --help)"),
        (["--queries", str(GATROCRAPTIC.queries), "--qrels", str(GATROCRAPTIC.qrels)], "needs --docs"),
        ([*FILES, "--stat-test", "magic"], "--stat-test"),
        ([*FILES, "--compare", "run.trec", "--stat-test", "magic"],
         "--stat-test must be one of student, fisher, tukey, got 'magic'"),
        (["--index", "idx", "--queries", str(GATROCRAPTIC.queries), "--qrels", str(GATROCRAPTIC.qrels),
          "--max-active-dims", "8"], "--max-active-dims applies to in-memory"),
        ([*FILES, "--feedback-docs", "2"], "--feedback-docs tunes pseudo-relevance feedback; add --feedback"),
        ([*FILES, "--feedback-weight", "1", "--feedback-terms", "4"], "--feedback-weight, --feedback-terms tunes"),
        ([*FILES, "--feedback", "--feedback-docs", "0"], "--feedback-docs must be a positive integer, got 0"),
        ([*FILES, "--feedback", "--feedback-weight", "nan"], "--feedback-weight must be a positive finite number"),
        ([*FILES, "--feedback", "--feedback-terms", "0"], "--feedback-terms must be a positive integer"),
        # accepted and ignored, each had passed for a setting of the run
        ([*FILES, "--stat-test", "fisher"], "--stat-test applies to --compare, which was not given"),
        ([*FILES, "--max-p", "0.5"], "--max-p applies to --compare, which was not given"),
        ([*FILES, "--overwrite"], "--overwrite applies to --save-run, which was not given"),
        (["--index", "idx", *FILES], "--docs is not read with --index"),
        (["--index", "idx", *FILES, "--compare", "run.trec"], "--docs is not read with --index"),
    ],
)
def test_bad_option_combinations(models, capsys, argv, message):
    assert main(["evaluate", "--model", models[0], *argv]) == 2
    assert message in " ".join(capsys.readouterr().err.split())


def test_compare_two_models(models, capsys):
    got = run_json(capsys, ["evaluate", "--model", models[0], *FILES, "--compare", models[1], "--json"])
    report = got["comparison"]
    assert report["model_names"] == [models[0], models[1]]
    for seed in (0, 1):
        want = independent_metrics(models[seed])
        for m in METRICS:
            assert report[models[seed]]["scores"][m] == pytest.approx(want[m], abs=1e-3)
    p = report[models[0]]["comparisons"][models[1]]["ndcg@10"]
    assert 0.0 <= p <= 1.0
    assert got["metrics"] == run_json(capsys, ["evaluate", "--model", models[0], *FILES, "--json"])


def test_compare_with_a_saved_run_prints_ranx_table(models, tmp_path, capsys):
    run_file = tmp_path / "other.trec"
    b = run_json(capsys, ["evaluate", "--model", models[1], *FILES, "--json", "--save-run", str(run_file)])
    assert run_file.read_text().splitlines()[0].split()[1] == "Q0"  # TREC run format
    assert {line.split()[5] for line in run_file.read_text().splitlines()} == {run_tag(models[1])}
    fed = tmp_path / "fed.trec"  # a feedback run is tagged so: it was told from the plain one by its file name alone
    run_json(capsys, ["evaluate", "--model", models[1], *FILES, "--json", "--feedback", "--save-run", str(fed)])
    assert {line.split()[5] for line in fed.read_text().splitlines()} == {run_tag(f"{models[1]}+feedback")}
    got = run_json(capsys, ["evaluate", "--model", models[0], *FILES, "--compare", str(run_file), "--json"])
    assert got["comparison"][str(run_file)]["scores"] == pytest.approx(b, abs=1e-3)
    capsys.readouterr()
    assert main(["evaluate", "--model", models[0], *FILES, "--compare", str(run_file)]) == 0
    out = capsys.readouterr().out
    assert "NDCG@10" in out and str(run_file) in out and "student" in out


def test_a_compare_model_that_cannot_load_stops_evaluate_before_any_scoring(models, tmp_path, capsys, monkeypatch):
    from sparse_adapt.retrieval import evaluation

    monkeypatch.setattr(evaluation, "score_in_memory", lambda *a, **k: pytest.fail("scoring started"))
    assert main(["evaluate", "--model", models[0], *FILES, "--compare", str(tmp_path / "no-such-model")]) == 2
    assert "no-such-model" in capsys.readouterr().err


def test_compare_on_one_query_says_no_test_is_possible_in_one_warning_line(models, tmp_path, capsys):
    """scipy's statistics of one pair are NaN; its two RuntimeWarnings came with their source lines."""
    qrels = _qrels_of(tmp_path / "one.tsv", lambda q: q == "q11")
    argv = ["evaluate", "--model", models[0], "--docs", str(GATROCRAPTIC.docs), "--queries", str(GATROCRAPTIC.queries),
            "--qrels", str(qrels), "--compare", models[1]]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert [l for l in captured.err.splitlines() if "--compare" in l or not l.startswith("warning: ")] == [
        "warning: --compare: 1 evaluated query: a paired student test needs 2 or more, so no difference is marked"]
    assert "RuntimeWarning" not in captured.err and "1 query, student paired test" in captured.out


@pytest.mark.parametrize("name, text, message", [
    ("nan.trec", "q11 Q0 d21 1 NaN run\n", "nan.trec:1: field 'score': expected a finite number"),
    ("text.trec", "q11 Q0 d21 1 abc run\n", "text.trec:1: field 'score': expected a number, got 'abc'"),
    ("short.trec", "q11 Q0 d21 1\n", "short.trec:1: expected 6 columns"),
    ("twice.trec", "q11 Q0 d21 1 2.0 run\nq11 Q0 d21 2 1.0 run\n", "twice.trec:2: field 'doc_id': 'd21' is ranked twice"),
    ("empty.trec", "\n", "empty.trec: no ranked documents"),
    ("list.json", "[1, 2]", "list.json: expected an object of query id"),
    ("inner.json", '{"q11": [1]}', "inner.json: field 'q11': expected an object of doc_id -> score"),
    ("nan.json", '{"q11": {"d21": NaN}}', "field 'q11.d21': expected a finite number"),
    ("missing.trec", None, "missing.trec: file not found"),
])
def test_a_bad_compare_run_is_one_line_before_any_encoding(name, text, message, tmp_path, capsys, monkeypatch):
    from sparse_adapt.modeling.encoder import SpladeEncoder

    run_file = tmp_path / name
    if text is not None:
        run_file.write_text(text)
    monkeypatch.setattr(SpladeEncoder, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("encoding started")))
    capsys.readouterr()
    assert main(["evaluate", "--model", "unused", *FILES, "--compare", str(run_file)]) == 2
    err = capsys.readouterr().err
    assert message in " ".join(err.split()) and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("grades, message", [
    ("0", "no judgement of its"),
    ("99999999999999999999999999", "field 'grade': expected a relevance grade between"),
])
def test_qrels_that_could_only_score_zero_or_overflow_are_refused(grades, message, tmp_path, capsys):
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text(f"q11 0 d21 {grades}\nq11 0 d22 0\n")
    argv = ["evaluate", "--model", "unused", "--docs", str(GATROCRAPTIC.docs), "--queries", str(GATROCRAPTIC.queries),
            "--qrels", str(qrels)]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in " ".join(err.split()) and "Traceback" not in err


def test_a_query_with_an_empty_ranking_scores_zero_without_numba_warnings(monkeypatch):
    import warnings

    from numba.core.errors import NumbaTypeSafetyWarning

    import ranx

    import sparse_adapt.retrieval.evaluation as evaluation

    real = ranx.evaluate

    def compiling_evaluate(*args, **kwargs):
        # What ranx's kernels do the first time they compile for an empty ranking.
        warnings.warn("unsafe cast from uint64 to int64. Precision may be lost.", NumbaTypeSafetyWarning)
        return real(*args, **kwargs)

    monkeypatch.setattr(ranx, "evaluate", compiling_evaluate)  # evaluation imports it where it evaluates
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    run = {"q1": {"d3": 2.0, "d1": 1.0}, "q2": {}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mean = evaluation.evaluate_run(qrels, run, ["mrr@10"])
        per_query = evaluation.evaluate_per_query(qrels, run, "mrr@10")
    assert mean == {"mrr@10": 0.25}  # (1/2 + 0) / 2
    assert per_query == {"q1": 0.5, "q2": 0.0}
    assert [str(w.message) for w in caught] == []


def test_beir_files_given_one_by_one_read_as_ir_datasets_reads_the_folder(models, tmp_path, capsys):
    """`--docs/--queries/--qrels` take BEIR's own files (ids '_id', title + text, a 3-column qrels
    with its header): the same documents as ir_datasets' BEIR reader and the same metrics."""
    from sparse_adapt.retrieval.datasets import load_dataset

    beir = write_beir(tmp_path / "beir", titles={"d2": "Timeouts", "d5": "LDAP"})
    assert load_documents(beir / "corpus.jsonl") == list(load_dataset(str(beir)).documents())
    assert load_qrels(beir / "qrels" / "test.tsv") == load_qrels(GATROCRAPTIC.qrels)
    files = ["--docs", str(beir / "corpus.jsonl"), "--queries", str(beir / "queries.jsonl"), "--qrels", str(beir / "qrels" / "test.tsv")]
    via_files = run_json(capsys, ["evaluate", "--model", models[0], *files, "--json"])
    via_dataset = run_json(capsys, ["evaluate", "--model", models[0], "--dataset", str(beir), "--json"])
    assert via_files == via_dataset


def test_a_run_is_never_written_into_the_dataset_folder_and_depth_needs_an_index(models, tmp_path, capsys):
    beir = write_beir(tmp_path / "beir")
    corpus = (beir / "corpus.jsonl").read_bytes()
    assert main(["evaluate", "--model", models[0], "--dataset", str(beir), "--save-run", str(beir / "corpus.jsonl"),
                 "--overwrite"]) == 2
    assert "is also an input" in " ".join(capsys.readouterr().err.split())
    assert (beir / "corpus.jsonl").read_bytes() == corpus
    assert main(["evaluate", "--model", models[0], "--dataset", str(beir), "--depth", "50"]) == 2
    assert "--depth applies to --index" in " ".join(capsys.readouterr().err.split())


def test_a_saved_run_names_the_evaluated_queries_it_has_no_line_for(models, tmp_path, capsys, monkeypatch):
    import sparse_adapt.cli.evaluate as cli_evaluate

    def nothing_for_q2(model, data, documents, **kwargs):
        return {q.qid: ({} if q.qid == "q2" else {"d1": 1.0}) for q in data.queries}

    monkeypatch.setattr(cli_evaluate, "_in_memory", nothing_for_q2)
    run = tmp_path / "run.trec"
    assert main(["evaluate", "--model", models[0], "--docs", str(GATROCRAPTIC.docs), "--queries",
                 str(GATROCRAPTIC.queries), "--qrels", str(GATROCRAPTIC.qrels), "--save-run", str(run), "--json"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert f"1 evaluated query retrieved no document and has no line in {run} (e.g. q2): trec_eval scores them only with -c" in err
    assert {line.split()[0] for line in run.read_text().splitlines()} == {q.qid for q in load_queries(GATROCRAPTIC.queries)} - {"q2"}


def test_an_unjudged_query_retrieving_nothing_is_not_named_among_the_evaluated_ones(models, tmp_path, capsys, monkeypatch):
    """q3 has no judgement here: its missing run line costs no metric, so the warning leaves it out."""
    import sparse_adapt.cli.evaluate as cli_evaluate

    monkeypatch.setattr(cli_evaluate, "_in_memory", lambda model, data, documents, **kwargs: {
        q.qid: ({} if q.qid in ("q2", "q3") else {"d1": 1.0}) for q in data.queries})
    qrels = _qrels_of(tmp_path / "qrels.tsv", lambda q: q != "q3")
    run = tmp_path / "run.trec"
    assert main(["evaluate", "--model", models[0], "--docs", str(GATROCRAPTIC.docs), "--queries",
                 str(GATROCRAPTIC.queries), "--qrels", str(qrels), "--save-run", str(run), "--json"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert f"1 evaluated query retrieved no document and has no line in {run} (e.g. q2):" in err


def test_compare_on_two_queries_runs_the_test_at_the_default_threshold(models, tmp_path, capsys):
    """Two pairs are enough for the paired test: no one-query warning; p < 0.05 unless --max-p says otherwise."""
    qrels = _qrels_of(tmp_path / "two.tsv", lambda q: q in ("q11", "q3"))
    assert main(["evaluate", "--model", models[0], "--docs", str(GATROCRAPTIC.docs), "--queries",
                 str(GATROCRAPTIC.queries), "--qrels", str(qrels), "--compare", models[1]]) == 0
    captured = capsys.readouterr()
    assert "needs 2 or more" not in captured.err
    assert "2 queries, student paired test, p < 0.05 marked by superscripts" in " ".join(captured.out.split())


def test_json_output_writes_nan_and_infinities_as_null():
    from sparse_adapt.cli.evaluate import _json_safe

    got = _json_safe({"p": float("nan"), "scores": [1.5, float("inf"), (float("-inf"), 2)], "n": 3, "s": "x"})
    assert got == {"p": None, "scores": [1.5, None, [None, 2]], "n": 3, "s": "x"}
    json.loads(json.dumps(got), parse_constant=lambda c: pytest.fail(f"bare {c} in the JSON"))


def test_the_title_counts_the_judged_queries_and_a_compare_run_without_them_is_refused(models, tmp_path, capsys):
    """Only q11 is judged: the title says 1 query, not the file's count; a run of other queries
    has nothing to compare."""
    qrels = _qrels_of(tmp_path / "one.tsv", lambda q: q == "q11")
    argv = ["evaluate", "--model", models[0], "--docs", str(GATROCRAPTIC.docs), "--queries", str(GATROCRAPTIC.queries),
            "--qrels", str(qrels)]
    capsys.readouterr()
    assert main(argv) == 0
    assert ", 1 query (in memory)" in " ".join(capsys.readouterr().out.split())  # the title may wrap
    other = tmp_path / "other.trec"
    other.write_text("q1 Q0 d21 1 2.0 run\n")
    assert main([*argv, "--compare", str(other)]) == 2
    errors = [l for l in capsys.readouterr().err.splitlines() if not l.startswith("warning: ")]
    assert errors == [f"error: --compare {other}: the run has none of the evaluated queries"]


@pytest.mark.parametrize("suffix", [".json", ".trec", ".txt", ".run", ".tsv", ".lz4"])
def test_a_compare_path_with_a_run_file_s_suffix_is_a_run_even_where_it_is_missing(suffix, tmp_path):
    # else a mistyped runs/bm25.tsv was looked up on the Hub as a model name
    from sparse_adapt.cli.evaluate import _is_run

    assert _is_run(str(tmp_path / f"bm25{suffix}")) and not _is_run(str(tmp_path / "bm25"))


def test_a_compare_run_missing_one_evaluated_query_is_compared_with_a_warning(models, tmp_path, capsys):
    """q11 and q3 are judged, the run holds q11 only: compared all the same (q3 counts 0 for it),
    and the warning says the comparison is lopsided."""
    qrels = _qrels_of(tmp_path / "two.tsv", lambda q: q in ("q11", "q3"))
    doc = next(l.split()[2] for l in qrels.read_text().splitlines() if l.split()[0] == "q11")
    other = tmp_path / "other.trec"
    other.write_text(f"q11 Q0 {doc} 1 2.0 run\n")
    assert main(["evaluate", "--model", models[0], "--docs", str(GATROCRAPTIC.docs), "--queries",
                 str(GATROCRAPTIC.queries), "--qrels", str(qrels), "--compare", str(other)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert (f"--compare {other}: 1 of 2 evaluated queries is not in the run and counts as 0 for it (e.g. q3)"
            in err)


def test_a_model_compared_with_itself_gets_a_second_name(models, capsys):
    got = run_json(capsys, ["evaluate", "--model", models[0], *FILES, "--compare", models[0], "--json"])
    assert got["comparison"]["model_names"] == [models[0], f"{models[0]} (compare)"]


def test_save_run_over_the_compare_run_is_refused_even_with_overwrite(tmp_path, capsys):
    # the run file compared against is an input: written over, the user's other system would be lost
    other = tmp_path / "other.trec"
    other.write_text("q11 Q0 d21 1 2.0 bm25\n")
    assert main(["evaluate", "--model", "unused", *FILES, "--compare", str(other), "--save-run", str(other),
                 "--overwrite"]) == 2
    assert "is also an input" in " ".join(capsys.readouterr().err.split())
    assert other.read_text() == "q11 Q0 d21 1 2.0 bm25\n"


def test_long_texts_are_said_once_when_a_second_model_is_compared(models, tmp_path, capsys):
    """One warning per kind of text: the compared model reads the same texts, so it adds none."""
    queries, docs = load_queries(GATROCRAPTIC.queries), load_documents(GATROCRAPTIC.docs)
    long = " ".join(["spending"] * 600)
    (tmp_path / "queries.jsonl").write_text("".join(
        json.dumps({"qid": q.qid, "text": long if i == 0 else q.text}) + "\n" for i, q in enumerate(queries)))
    (tmp_path / "docs.jsonl").write_text("".join(
        json.dumps({"doc_id": d.doc_id, "text": long if i == 0 else d.text}) + "\n" for i, d in enumerate(docs)))
    capsys.readouterr()
    assert main(["evaluate", "--model", models[0], "--docs", str(tmp_path / "docs.jsonl"), "--queries",
                 str(tmp_path / "queries.jsonl"), "--qrels", str(GATROCRAPTIC.qrels), "--compare", models[1]]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert err.count("queries are longer than") == 1
    assert err.count(f"1 of {len(docs)} documents is longer than") == 1


def test_the_title_names_the_documents_and_says_they_were_cut(models, capsys):
    capsys.readouterr()
    assert main(["evaluate", "--model", models[0], *FILES, "--max-active-dims", "3"]) == 0
    title = "".join(capsys.readouterr().out.split())  # rich may wrap a long path anywhere
    assert f"{models[0]}on{GATROCRAPTIC.docs}," in title  # the documents ranked, not the qrels file
    assert "(inmemory,documentscutto3terms)" in title


def test_compare_json_stays_json_where_ranx_gives_no_p_value(models, capsys):
    # identical runs get a NaN p-value from ranx: a bare NaN is no JSON for a strict reader
    capsys.readouterr()
    assert main(["evaluate", "--model", models[0], *FILES, "--compare", models[0], "--json"]) == 0
    got = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"{c} in the JSON output"))
    assert got["comparison"][models[0]]["comparisons"][f"{models[0]} (compare)"]["ndcg@10"] is None
