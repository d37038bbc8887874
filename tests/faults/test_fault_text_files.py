"""Issue rows: non-UTF-8 input, a UTF-8 BOM, CRLF line ends. Every loader reads UTF-8 the
same way: a bad byte is one error naming file and line, a BOM and CRLF are accepted, and
files that differ only by them load to the same records (and metrics)."""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest

from corpora import GATROCRAPTIC
from sparse_adapt import data
from sparse_adapt.data import documents
from sparse_adapt.errors import SparseAdaptError
from sparse_adapt.training.config_files import load_config
from tests.faults.conftest import assert_one_line_error, cli, train_argv
from tests.training.test_stages import DICTIONARY, DOCS, TRAIN

# loader -> (file name, its content as lines); line 2 gets the bad byte.
FILES = {
    "documents": (data.load_documents, "docs.jsonl", [json.dumps(d) for d in DOCS]),
    "queries": (data.load_queries, "queries.jsonl", ['{"qid": "q1", "text": "caf\u00e9 hours"}', '{"qid": "q2", "text": "tea"}']),
    "train": (data.load_train, "train.jsonl", [json.dumps(t) for t in TRAIN]),
    "dictionary": (data.load_dictionary, "dict.jsonl", [json.dumps(d) for d in DICTIONARY]),
    "qrels": (data.load_qrels, "qrels.tsv", ["q1 0 d1 1", "q1 0 d2 0", "q2 0 d3 2"]),
    "domain terms": (data.load_domain_terms, "terms.json", ["{", '"jargon": ["Zorblatt", "caf\u00e9"]', "}"]),
    "query groups": (data.load_query_groups, "groups.json", ["{", '"control": ["q1", "q2"]', "}"]),
    "config (JSON)": (load_config, "c.json", ["{", '"distill": {"epochs": 3}', "}"]),
    "config (TOML)": (load_config, "c.toml", ["[distill]", "epochs = 3"]),
}


def _write(path: Path, lines: list[str], newline: str = "\n", bom: bool = False) -> Path:
    raw = (newline.join(lines) + newline).encode("utf-8")
    path.write_bytes((codecs.BOM_UTF8 if bom else b"") + raw)
    return path


@pytest.mark.parametrize("kind", ["documents", "queries", "train", "dictionary"])
def test_a_json_line_cut_short_is_named_at_its_own_column(kind, tmp_path):
    # parsed with its newline, the cut line was "column 1" (of the line after it) in every loader
    loader, name, lines = FILES[kind]
    cut = lines[1][: len(lines[1]) // 2]
    path = _write(tmp_path / name, [lines[0], cut, *lines[2:]])
    try:
        json.loads(cut)
    except json.JSONDecodeError as e:
        column = e.colno
    assert column > 1
    with pytest.raises(SparseAdaptError, match=rf"{path.name}:2: invalid JSON \(.* at column {column}\)"):
        loader(path)


@pytest.mark.parametrize("kind", sorted(FILES))
def test_a_non_utf8_byte_names_file_and_line(kind, tmp_path):
    loader, name, lines = FILES[kind]
    path = _write(tmp_path / name, lines)
    raw = path.read_bytes().split(b"\n")
    raw[1] = raw[1][:4] + b"\xe9" + raw[1][4:]  # a Latin-1 e-acute on line 2
    path.write_bytes(b"\n".join(raw))
    with pytest.raises(SparseAdaptError, match=rf"{path.name}:2: not valid UTF-8 \(byte 0xe9 at column 5\)"):
        loader(path)


@pytest.mark.parametrize("kind", sorted(FILES))
def test_bom_and_crlf_load_the_same_records(kind, tmp_path):
    loader, name, lines = FILES[kind]
    plain = loader(_write(tmp_path / f"plain-{name}", lines))
    assert loader(_write(tmp_path / f"bom-{name}", lines, bom=True)) == plain
    assert loader(_write(tmp_path / f"crlf-{name}", lines, newline="\r\n")) == plain
    assert loader(_write(tmp_path / f"both-{name}", lines, newline="\r\n", bom=True)) == plain


def test_qrels_with_a_bom_give_the_same_metrics(tiny_model_dir, tmp_path, capsys):
    bom = tmp_path / "qrels_bom.tsv"
    bom.write_bytes(codecs.BOM_UTF8 + GATROCRAPTIC.qrels.read_bytes())
    common = ["evaluate", "--model", tiny_model_dir, "--docs", GATROCRAPTIC.docs, "--queries", GATROCRAPTIC.queries, "--json"]
    plain = cli(capsys, common + ["--qrels", GATROCRAPTIC.qrels])
    with_bom = cli(capsys, common + ["--qrels", bom])
    assert plain.code == with_bom.code == 0
    assert json.loads(with_bom.out) == json.loads(plain.out)


def _latin1_copy(source: Path, target: Path) -> Path:
    target.write_bytes(source.read_text(encoding="utf-8").replace("e", "\u00e9", 1).encode("latin-1"))
    return target


def test_non_utf8_queries_in_evaluate_are_one_line(tiny_model_dir, tmp_path, capsys):
    queries = _latin1_copy(GATROCRAPTIC.queries, tmp_path / "queries.jsonl")
    result = cli(capsys, ["evaluate", "--model", tiny_model_dir, "--docs", GATROCRAPTIC.docs, "--queries", queries,
                          "--qrels", GATROCRAPTIC.qrels])
    assert_one_line_error(result, f"{queries}:1: not valid UTF-8 (byte 0xe9")


def test_non_utf8_documents_in_export_are_one_line_and_write_nothing(tiny_model_dir, tmp_path, capsys):
    docs = _latin1_copy(GATROCRAPTIC.docs, tmp_path / "docs.jsonl")
    result = cli(capsys, ["export", "--model", tiny_model_dir, "--docs", docs, "--out", tmp_path / "vectors"])
    assert_one_line_error(result, f"{docs}:1: not valid UTF-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl"]


@pytest.mark.parametrize("which", ["corpus", "train", "config"])
def test_non_utf8_training_inputs_are_one_line(which, tiny_model_dir, train_inputs, tmp_path, capsys):
    path = train_inputs[which]
    path.write_bytes(path.read_bytes().replace(b"e", b"\xe9", 1))
    result = cli(capsys, train_argv(tiny_model_dir, train_inputs, tmp_path / "run"))
    assert_one_line_error(result, str(path), "not valid UTF-8")


def test_a_text_argument_that_is_not_utf8_is_one_line(capsys):
    # bytes that are not UTF-8 on a command line reach Python as lone surrogates
    result = cli(capsys, ["encode", "caf\udce9", "--model", "offline-minilm"])
    assert_one_line_error(result, "the text is not valid UTF-8")


def test_an_escaped_lone_surrogate_in_json_is_refused(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text('{"doc_id": "d1", "text": "broken \\ud800 text"}\n')
    with pytest.raises(SparseAdaptError, match=r"docs\.jsonl:1: field 'text': contains an unpaired surrogate"):
        data.load_documents(path)


def test_a_local_beir_folder_with_boms_gives_the_same_metrics(tiny_model_dir, tmp_path, capsys):
    from tests.retrieval.test_evaluate_cli import write_beir

    plain, bom = write_beir(tmp_path / "plain"), write_beir(tmp_path / "bom")
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        (bom / name).write_bytes(codecs.BOM_UTF8 + (bom / name).read_bytes())
    results = [cli(capsys, ["evaluate", "--model", tiny_model_dir, "--dataset", folder, "--json"]) for folder in (plain, bom)]
    assert [r.code for r in results] == [0, 0], results[1].err
    assert json.loads(results[1].out) == json.loads(results[0].out)
    (bom / "qrels/test.tsv").write_text("q1\td1\t1\n")  # no header line: ir_datasets asserts on it
    assert_one_line_error(cli(capsys, ["evaluate", "--model", tiny_model_dir, "--dataset", bom]), "header line")


def test_a_trec_docid_record_is_named_in_the_error(tmp_path, capsys):
    docs = _write(tmp_path / "corpus.jsonl", [json.dumps({"docid": "d1", "text": "A relief valve opens."})])
    with pytest.raises(data.DataError) as caught:
        data.load_documents(docs)
    assert str(caught.value) == f"{docs}:1: field 'doc_id': missing; this looks like {documents._FOREIGN_DOCUMENTS['docid']}"
    out = tmp_path / "adapted"
    result = cli(capsys, ["adapt", "--corpus", docs, "--out", out, "--base", "offline-splade-tiny"])
    assert_one_line_error(result, f"{docs}:1: field 'doc_id'", "'docid'")
    assert not out.exists()


@pytest.mark.parametrize("record, field", [
    ({"_id": "d1", "title": "", "text": " "}, "text"),  # BEIR: title or text must hold words
    ({"_id": "d1", "title": 7, "text": "A relief valve opens."}, "title"),
    ({"id": "d1", "text": "A relief valve opens."}, "contents"),  # 'id' is Pyserini's: 'contents' is its text
    ({"id": "", "contents": "A relief valve opens."}, "id"),
])
def test_a_broken_beir_or_pyserini_record_names_its_field(record, field, tmp_path):
    docs = _write(tmp_path / "corpus.jsonl", [json.dumps(record)])
    with pytest.raises(data.DataError) as caught:
        data.load_documents(docs)
    assert (caught.value.line, caught.value.field) == (1, field)


def test_an_id_record_without_contents_says_it_is_read_as_pyserini(tmp_path):
    """An 'id' record with a 'text' field: the error says which format 'id' selects, not just 'missing'."""
    docs = _write(tmp_path / "corpus.jsonl", [json.dumps({"id": "d1", "text": "A relief valve opens."})])
    with pytest.raises(data.DataError, match=r"corpus\.jsonl:1: field 'contents': missing; a record keyed by 'id' "
                                             r"is read as a Pyserini JsonCollection"):
        data.load_documents(docs)


def test_a_gzip_file_is_refused_in_one_line(tmp_path, capsys):
    import gzip

    docs = tmp_path / "docs.jsonl.gz"
    docs.write_bytes(gzip.compress(GATROCRAPTIC.docs.read_bytes()))
    with pytest.raises(data.DataError, match=r"docs.jsonl.gz: is gzip-compressed; decompress it first"):
        data.load_documents(docs)
    assert_one_line_error(cli(capsys, ["mine-terms", "--corpus", docs, "--out", tmp_path / "t.json"]), "gzip-compressed")


def test_a_record_of_no_known_format_names_its_fields_and_the_id_fields_read(tmp_path):
    docs = _write(tmp_path / "docs.jsonl", [json.dumps({"key": "d1", "text": "A relief valve opens."})])
    with pytest.raises(data.DataError) as caught:
        data.load_documents(docs)
    assert str(caught.value) == (f"{docs}:1: field 'doc_id': missing (there: 'key', 'text'); a document's id is one of "
                                 + ", ".join(repr(k) for k in documents.DOCUMENT_FORMATS))


def test_a_directory_given_as_a_file_is_one_line(tmp_path, capsys):
    collection = tmp_path / "collection"
    collection.mkdir()
    (collection / "docs00.json").write_text(json.dumps({"id": "d1", "contents": "A relief valve opens."}) + "\n")
    with pytest.raises(data.DataError, match=r"collection: is a directory; give the file itself"):
        data.load_documents(collection)
    assert_one_line_error(cli(capsys, ["mine-terms", "--corpus", collection, "--out", tmp_path / "t.json"]), "is a directory")
