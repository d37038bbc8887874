"""IRDataset over what an ir_datasets id yields (its own record types, handed over in memory:
nothing is downloaded). A local BEIR folder's lines are checked before ir_datasets parses them
(test_evaluate_cli.py), so only an id's records reach IRDataset's own checks: these."""

from __future__ import annotations

import errno
import os
import re

import pytest
from ir_datasets.formats import GenericDoc, GenericQuery, TrecQrel

from sparse_adapt.data import Document, Query
from sparse_adapt.data.records import DataError
from sparse_adapt.retrieval.datasets import DatasetError, IRDataset, import_ir_datasets, load_dataset


class Listed:
    """The three iterators of an ir_datasets Dataset, over given records (or raising ``error``)."""

    def __init__(self, docs=(), queries=(), qrels=(), error: Exception | None = None):
        self.docs, self.queries, self.qrels, self.error = list(docs), list(queries), list(qrels), error

    def _iter(self, records):
        if self.error is not None:
            raise self.error
        return iter(records)

    def docs_iter(self):
        return self._iter(self.docs)

    def queries_iter(self):
        return self._iter(self.queries)

    def qrels_iter(self):
        return self._iter(self.qrels)


def toy(**records) -> IRDataset:
    return IRDataset("toy/test", Listed(**records))


def test_an_ids_documents_read_as_our_records_whitespace_collapsed():
    docs = [GenericDoc("d1", "  alpha\n beta "), GenericDoc("d2", "gamma")]
    assert list(toy(docs=docs).documents()) == [Document("d1", "alpha beta"), Document("d2", "gamma")]


@pytest.mark.parametrize("docs, message", [
    # the record's number counts from 1, as a file's lines do
    ([GenericDoc("d1", "alpha"), GenericDoc("d2", 5)], "document record 2: field 'text': expected a string, got 5"),
    ([GenericDoc("d1", "alpha \ud800")], "document record 1: field 'text': contains an unpaired surrogate"),
    ([GenericDoc("d\ud800", "alpha")], "document record 1: field '_id': contains an unpaired surrogate"),
    ([GenericDoc("", "alpha")], "document record 1: field '_id': expected a non-empty string, got ''"),
    ([GenericDoc("doc one", "alpha")], "document record 1: field '_id': 'doc one' holds whitespace"),
    # invisible characters only: a non-empty string, still no text to encode
    ([GenericDoc("d1", "\u200b \n")], "document record 1 ('d1'): empty text"),
    ([GenericDoc("d1", "alpha"), GenericDoc("d1", "beta")], "document record 2: field '_id': duplicate id 'd1'"),
], ids=["text not a string", "surrogate", "surrogate in id", "empty id", "id with whitespace", "invisible text",
        "duplicate id"])
def test_an_ids_bad_document_is_refused_naming_its_record(docs, message):
    with pytest.raises(DatasetError, match="^" + re.escape(f"toy/test: {message}")):
        list(toy(docs=docs).documents())


def test_an_ids_qrels_keep_negative_grades_and_refuse_two_grades_for_one_pair():
    # TREC collections judge some pairs -1 or -2 (spam, junk): a qrels file reads them too
    judged = [TrecQrel("q1", "d1", -2, "0"), TrecQrel("q1", "d2", 2, "0"), TrecQrel("q1", "d2", 2, "1")]
    assert toy(qrels=judged).qrels() == {"q1": {"d1": -2, "d2": 2}}
    with pytest.raises(DatasetError, match="^toy/test: q1 d2 is judged 2 and 0 in its qrels"):
        toy(qrels=[*judged, TrecQrel("q1", "d2", 0, "0")]).qrels()
    with pytest.raises(DatasetError, match="^toy/test: no relevance judgements"):
        toy(qrels=[]).qrels()


def test_an_ids_qrels_refuse_a_grade_a_qrels_file_would_refuse():
    # ranx holds grades as int64: one beyond the bound (either sign) overflowed it; the bound itself is kept
    limit = 1_000_000
    assert toy(qrels=[TrecQrel("q1", "d1", limit, "0"), TrecQrel("q1", "d2", -limit, "0")]).qrels() == {
        "q1": {"d1": limit, "d2": -limit}}
    for grade in (limit + 1, -limit - 1):
        with pytest.raises(DatasetError, match=f"^toy/test: q1 d1: a relevance grade between -{limit} and {limit} "
                                               f"expected, got {grade}$"):
            toy(qrels=[TrecQrel("q1", "d1", grade, "0")]).qrels()


def test_an_ids_repeated_query_is_refused_naming_its_record():
    # two texts for one id: which one was searched would depend on the order they were read
    queries = [GenericQuery("q1", "alpha"), GenericQuery("q1", "beta")]
    with pytest.raises(DatasetError, match=r"^toy/test: query record 2: field '_id': duplicate id 'q1'$"):
        toy(queries=queries, qrels=[TrecQrel("q1", "d1", 1, "0")]).queries()


def test_an_ids_queries_are_its_judged_ones_unless_asked_for_all():
    queries = [GenericQuery("q1", "alpha"), GenericQuery("q2", "beta"), GenericQuery("q3", "gamma")]
    ds = toy(queries=queries, qrels=[TrecQrel("q2", "d1", 1, "0")])
    assert ds.queries() == [Query("q2", "beta")]
    assert ds.queries(judged_only=False) == [Query("q1", "alpha"), Query("q2", "beta"), Query("q3", "gamma")]
    with pytest.raises(DatasetError, match="^toy/test: no queries with judgements$"):
        toy(queries=queries, qrels=[TrecQrel("q9", "d1", 1, "0")]).queries()


@pytest.mark.parametrize("error, read, message", [
    (KeyError("text"), "documents", r"^toy/test: cannot read its documents \(KeyError: 'text'\)$"),
    (TypeError("not subscriptable"), "documents", r"^toy/test: cannot read its documents \(TypeError: not subscriptable\)$"),
    (AssertionError(), "qrels", r"^toy/test: its qrels file lacks BEIR's header line"),  # BeirQrels' way of saying it
    # no qrels file involved: no header advice
    (AssertionError("bad doc"), "documents", r"^toy/test: cannot read its documents \(AssertionError: bad doc\)$"),
], ids=["KeyError", "TypeError", "AssertionError", "AssertionError-documents"])
def test_what_ir_datasets_raises_while_parsing_is_one_line_naming_the_dataset(error, read, message):
    ds = toy(error=error)
    with pytest.raises(DatasetError, match=message):
        list(ds.documents()) if read == "documents" else ds.qrels()


def test_what_ir_datasets_raises_while_reading_queries_names_the_queries():
    # an AssertionError there is no qrels header missing: that advice would send the user to the wrong file
    for error, said in ((KeyError("text"), "KeyError: 'text'"),
                        (AssertionError("bad query"), "AssertionError: bad query")):
        with pytest.raises(DatasetError, match=f"^toy/test: cannot read its queries \\({re.escape(said)}\\)$"):
            toy(error=error).queries(judged_only=False)


def test_our_own_file_errors_pass_through_unwrapped(tmp_path):
    # a DataError names file and line already; wrapped, it lost both behind "cannot read"
    error = DataError(tmp_path / "corpus.jsonl", 3, "_id", "missing")
    with pytest.raises(DataError) as caught:
        list(toy(error=error).documents())
    assert caught.value is error


def test_what_is_neither_a_folder_nor_an_id_is_said_so(tmp_path):
    # a file is no BEIR folder: its name is looked up as an id, and that lookup is what fails
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"doc_id": "d1", "text": "alpha"}\n')
    for name in (str(docs), "no-such/dataset"):
        with pytest.raises(DatasetError, match=f"^{name!r} is neither a directory nor an ir_datasets id$"):
            load_dataset(name)


def test_an_id_without_qrels_is_refused_before_anything_is_read():
    # beir/scifact is the corpus with its queries; only its splits (beir/scifact/test) carry qrels
    with pytest.raises(DatasetError, match="^ir_datasets 'beir/scifact' has no qrels; evaluation needs all three$"):
        load_dataset("beir/scifact")


def test_a_folder_holding_a_folder_named_corpus_jsonl_is_no_beir_folder(tmp_path):
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("")
    (tmp_path / "corpus.jsonl").unlink()
    (tmp_path / "corpus.jsonl").mkdir()
    with pytest.raises(DatasetError, match=f"is not a BEIR folder: missing {tmp_path / 'corpus.jsonl'}$"):
        load_dataset(str(tmp_path))


@pytest.mark.parametrize("code", [errno.EACCES, errno.EPERM, errno.EROFS])
def test_an_ir_datasets_home_that_cannot_be_made_says_the_way_out(code, monkeypatch):
    """ir_datasets makes its home folder on import; a read-only HOME (EROFS on a read-only mount)
    is a one-line error naming IR_DATASETS_HOME, any other OSError stays what it is."""
    import builtins

    real_import, raised = builtins.__import__, [code]

    def importing(name, *args, **kwargs):
        if name == "ir_datasets":
            raise OSError(raised[0], os.strerror(raised[0]), "/home/me/.ir_datasets")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", importing)
    with pytest.raises(DatasetError, match=r"cannot make its folder /home/me/\.ir_datasets .*set IR_DATASETS_HOME"):
        import_ir_datasets()
    raised[0] = errno.ENOSPC
    with pytest.raises(OSError) as caught:
        import_ir_datasets()
    assert caught.value.errno == errno.ENOSPC and not isinstance(caught.value, DatasetError)


def test_a_local_folders_qrels_may_open_with_blank_lines_and_a_document_may_have_only_a_title(tmp_path):
    """As a --qrels file: blank lines before BEIR's header are skipped, not taken for a missing
    header, and a negative grade stays negative. As a --docs file: a BEIR record with a title
    and no 'text' is its title."""
    import json

    from sparse_adapt.data import load_documents, load_qrels
    from tests.retrieval.test_evaluate_cli import write_beir

    beir = write_beir(tmp_path / "beir")
    qrels = beir / "qrels" / "test.tsv"
    qrels.write_text("\n  \n" + qrels.read_text() + "q99\td1\t-1\n")
    with (beir / "corpus.jsonl").open("a") as f:
        f.write(json.dumps({"_id": "z", "title": "Only a title"}) + "\n")
    ds = load_dataset(str(beir))
    assert ds.qrels() == load_qrels(qrels) and ds.qrels()["q99"] == {"d1": -1}
    documents = list(ds.documents())
    assert documents == load_documents(beir / "corpus.jsonl") and documents[-1] == Document("z", "Only a title")


def test_a_repeated_id_in_a_local_folder_names_the_line_it_was_first_on(tmp_path):
    import json

    from tests.retrieval.test_evaluate_cli import write_beir

    beir = write_beir(tmp_path / "beir")
    with (beir / "corpus.jsonl").open("a") as f:
        f.write(json.dumps({"_id": "d3", "title": "", "text": "again"}) + "\n")
    with pytest.raises(DataError, match=r"corpus\.jsonl:27: field '_id': duplicate id 'd3' \(first on line 3\)"):
        list(load_dataset(str(beir)).documents())


def test_the_files_named_as_a_folders_inputs_are_the_ones_it_is_read_from(tmp_path):
    # evaluate --save-run refuses to overwrite these: they must be the split load_dataset reads
    from sparse_adapt.retrieval.datasets import local_beir_files
    from tests.retrieval.test_evaluate_cli import write_beir

    beir = write_beir(tmp_path / "beir")
    qrels = local_beir_files(beir)["qrels"]
    assert load_dataset(str(beir)).qrels()
    qrels.unlink()
    with pytest.raises(DatasetError, match=f"is not a BEIR folder: missing {re.escape(str(qrels))}$"):
        load_dataset(str(beir))
