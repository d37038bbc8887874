"""Issue rows: qrels naming unknown documents or queries, long queries, empty queries.
Evaluation says what it could not judge, refuses metrics that could only be 0, and every
command reports the texts it truncated; an empty query is the same error everywhere."""

from __future__ import annotations

import json

import pytest

from corpora import GATROCRAPTIC
from sparse_adapt.data import load_documents, load_qrels, load_queries
from sparse_adapt.modeling.encoder import SpladeEncoder
from tests.faults.conftest import assert_one_line_error, cli

FILES = ["--docs", GATROCRAPTIC.docs, "--queries", GATROCRAPTIC.queries]


def _qrels(tmp_path, extra: str = "", keep=lambda qid, doc: True):
    lines = [f"{q} 0 {d} {g}" for q, judged in load_qrels(GATROCRAPTIC.qrels).items() for d, g in judged.items()
             if keep(q, d)]
    path = tmp_path / "qrels.tsv"
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


def test_qrels_naming_unknown_ids_warn_with_counts(tiny_model_dir, tmp_path, capsys):
    qrels = _qrels(tmp_path, "q1 0 d999 1\nq1 0 d998 0\nq999 0 d1 1\n")
    result = cli(capsys, ["evaluate", "--model", tiny_model_dir, *FILES, "--qrels", qrels, "--json"])
    assert result.code == 0, result.err
    json.loads(result.out)  # warnings never reach stdout
    judged = load_qrels(qrels)
    known = {q.qid for q in load_queries(GATROCRAPTIC.queries)}
    judged_docs = {d for q, docs in judged.items() if q in known for d in docs}
    assert f"1 of {len(judged)} judged queries are not in {GATROCRAPTIC.queries}" in result.err_line
    assert f"2 of {len(judged_docs)} judged documents are not in {GATROCRAPTIC.docs}" in result.err_line
    assert "(e.g. d998, d999)" in result.err_line and "(e.g. q999)" in result.err_line


def test_qrels_whose_relevant_documents_are_all_unknown_are_an_error(tiny_model_dir, tmp_path, capsys):
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("q1 0 x1 1\nq2 0 x2 2\n")
    result = cli(capsys, ["evaluate", "--model", tiny_model_dir, *FILES, "--qrels", qrels])
    assert_one_line_error(result, str(qrels), "none of the 2 relevant documents is in", "every metric would be 0")


def test_qrels_judging_none_of_the_queries_are_an_error(tiny_model_dir, tmp_path, capsys):
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("other1 0 d1 1\n")
    result = cli(capsys, ["evaluate", "--model", tiny_model_dir, *FILES, "--qrels", qrels])
    assert_one_line_error(result, str(qrels), "none of its 1 judged queries is in")


def test_long_queries_and_documents_are_counted(tiny_model_dir, tmp_path, capsys):
    splade = SpladeEncoder.from_pretrained(tiny_model_dir)
    queries = load_queries(GATROCRAPTIC.queries)
    long_query = " ".join(["spending"] * 10_000)
    path = tmp_path / "queries.jsonl"
    path.write_text("".join(json.dumps({"qid": q.qid, "text": long_query if i == 0 else q.text}) + "\n"
                            for i, q in enumerate(queries)))
    # independent count: pieces without truncation against the model's query maximum
    expected = sum(len(splade.tokenizer(t)["input_ids"]) > splade.settings.query_max_length
                   for t in [long_query] + [q.text for q in queries[1:]])
    result = cli(capsys, ["evaluate", "--model", tiny_model_dir, "--docs", GATROCRAPTIC.docs, "--queries", path,
                          "--qrels", GATROCRAPTIC.qrels])
    assert result.code == 0, result.err
    assert (f"{expected} of {len(queries)} queries are longer than {splade.settings.query_max_length} pieces "
            f"and were truncated") in result.err_line
    documents = load_documents(GATROCRAPTIC.docs)
    long_docs = sum(len(splade.tokenizer(d.text)["input_ids"]) > splade.settings.doc_max_length for d in documents)
    if long_docs:
        assert f"{long_docs} of {len(documents)} documents are longer than" in result.err_line
    else:
        assert "documents are longer than" not in result.err_line


def test_encode_says_when_a_text_was_truncated(tiny_model_dir, capsys):
    result = cli(capsys, ["encode", " ".join(["spending"] * 10_000), "--model", tiny_model_dir, "--query"])
    assert result.code == 0, result.err
    assert "warning: the text is longer than 16 pieces: only its start was encoded" in result.err_line
    as_doc = cli(capsys, ["encode", " ".join(["spending"] * 10_000), "--model", tiny_model_dir])
    assert "warning: the text is longer than 48 pieces: only its start was encoded" in as_doc.err_line
    short = cli(capsys, ["encode", "spending", "--model", tiny_model_dir])
    assert short.code == 0 and "warning" not in short.err


def test_encode_k_short_form_and_bounds(tiny_model_dir, capsys):
    # the JSON-free table prints one row per term: -k is --k's short form
    one = cli(capsys, ["encode", "budget spending", "--model", tiny_model_dir, "-k", "1"])
    three = cli(capsys, ["encode", "budget spending", "--model", tiny_model_dir, "--k", "3"])
    assert one.code == 0 and three.code == 0
    assert len(three.out.strip().splitlines()) > len(one.out.strip().splitlines())
    # the title counts the vector's active terms, not the -k rows shown
    splade = SpladeEncoder.from_pretrained(tiny_model_dir)
    active = len(splade.decode(splade.encode_document(["budget spending"]))[0])
    assert active > 3 and f"{active} active terms" in one.out and f"{active} active terms" in three.out
    assert cli(capsys, ["encode", "budget", "--model", tiny_model_dir, "-k", "0"]).code == 2


def test_encode_shows_a_bracketed_token_as_itself(tmp_path, capsys):
    """BERT's [unused0] is a token a vector can hold; read as rich markup, its row printed empty."""
    import torch

    from tests.conftest import make_tiny_bert

    splade = make_tiny_bert()
    with torch.no_grad():  # the row fires for every text
        splade.mlm.get_output_embeddings().bias[splade.tokenizer.convert_tokens_to_ids("[unused0]")] = 50.0
    model = splade.save_pretrained(tmp_path / "m")
    result = cli(capsys, ["encode", "budget", "--model", model, "-k", "1"])
    assert result.code == 0, result.err
    assert "[unused0]" in result.out


def test_encode_prints_the_k_best_terms_of_the_query_or_the_document_vector(tiny_model_dir, capsys):
    # 20 words: past the 16 pieces of a query, within the 48 of a document, so the two vectors differ
    text = ("budget spending report audit ledger invoice revenue forecast payroll tax grant fund deficit surplus "
            "loan bond asset equity margin quota")
    splade = SpladeEncoder.from_pretrained(tiny_model_dir)
    want = {flag: [(t, f"{w:.4f}") for t, w in splade.decode(vectors)[0][:3]]
            for flag, vectors in (("", splade.encode_document([text])), ("--query", splade.encode_query([text])))}
    assert want[""] != want["--query"]
    for flag, terms in want.items():
        result = cli(capsys, ["encode", text, "--model", tiny_model_dir, "-k", "3", *([flag] if flag else [])])
        assert result.code == 0, result.err
        rows = [[c for c in line.split() if c not in "│|"] for line in result.out.splitlines()]
        assert [tuple(r) for r in rows if len(r) == 2 and r[1].replace(".", "").isdigit()] == terms, flag
        # only the query's 16 pieces cut the text short
        assert ("the text is longer than 16 pieces" in result.err) == (flag == "--query"), flag


def test_export_counts_truncated_documents(tiny_model_dir, tmp_path, capsys):
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"doc_id": "long", "text": "budget " * 5000}) + "\n"
                    + json.dumps({"doc_id": "short", "text": "a budget"}) + "\n")
    out = tmp_path / "vectors"
    result = cli(capsys, ["export", "--model", tiny_model_dir, "--docs", docs, "--out", out])
    assert result.code == 0, result.err
    assert "1 of 2 documents is longer than 48 pieces and was truncated" in result.err_line
    assert json.loads((out / "sparse_adapt_export.json").read_text())["truncated"] == 1


@pytest.mark.parametrize("blank", ["", "   ", "\t\n"])
@pytest.mark.parametrize("command", [
    lambda q, m, tmp: ["encode", q, "--model", m],
    lambda q, m, tmp: ["explain", q, "--model", m],
    lambda q, m, tmp: ["search", q, "--index", tmp / "no-index", "--model", m],
], ids=["encode", "explain", "search"])
def test_an_empty_query_is_the_same_error_in_every_command(command, blank, tiny_model_dir, tmp_path, capsys):
    result = cli(capsys, command(blank, tiny_model_dir, tmp_path))
    assert_one_line_error(result, "is empty")
