"""Export to Pyserini's JsonVectorCollection (sparse_adapt.retrieval.export), with tiny models."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from corpora import GATROCRAPTIC
from sparse_adapt.data import DataError, load_documents, load_domain_terms
from sparse_adapt.errors import ConfigError
from sparse_adapt.retrieval.export import (
    EXPORT_META, VECTORS_FILE, ExportConfig, export_vectors, iter_documents, lucene_token, quantise,
)
from sparse_adapt.retrieval.searcher import QuantisedQueryEncoder
from sparse_adapt.modeling.vocabulary import extend_vocabulary


@pytest.fixture
def tiny_bert(tiny_bert):
    """The shared tiny model made sparse: a random MLM head fires ~28k of 30k terms per text, which
    makes export slow and meaningless; a decoder bias of -0.3 leaves a few dozen (still random)."""
    with torch.no_grad():
        tiny_bert.mlm.get_output_embeddings().bias -= 0.3
    return tiny_bert


def read_lines(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / VECTORS_FILE).read_text(encoding="utf-8").splitlines()]


def test_quantise_rounds_scales_and_drops_zeros():
    # row 0: weights 1.234, 0.004 (rounds to 0), 2.5051 ; row 1: empty
    m = sp.csr_matrix(np.array([[1.234, 0.0, 0.004, 2.5051], [0, 0, 0, 0]], dtype=np.float32))
    vocab = ["a", "##b", "c", "gatrocraptic"]
    got = quantise(m, vocab, 100)
    assert got == [{"gatrocraptic": 251, "a": 123}, {}]
    assert list(got[0]) == ["gatrocraptic", "a"]  # largest impact first
    assert quantise(m, vocab, 1000)[0] == {"gatrocraptic": 2505, "a": 1234, "c": 4}


def test_export_counts_every_empty_document_and_names_the_first_three(tiny_bert, tmp_path):
    # A decoder bias of -100 leaves every logit below 0: all 5 documents have no term. The
    # count is all of them; the ids shown are only the first EMPTY_SHOWN = 3 (a warning line,
    # not a list of a corpus's worth of ids).
    with torch.no_grad():
        tiny_bert.mlm.get_output_embeddings().bias -= 100.0
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"doc_id": f"d{i}", "text": "install the agent"}) + "\n" for i in range(5)))
    stats = export_vectors(tiny_bert, docs, tmp_path / "vectors", ExportConfig(batch_size=2))
    assert (stats.documents, stats.empty, stats.postings) == (5, 5, 0)
    assert stats.empty_ids == ["d0", "d1", "d2"]


def test_lucene_token_only_touches_whitespace():
    assert lucene_token("##ing") == "##ing"
    assert lucene_token("max_connections") == "max_connections"
    assert lucene_token("agent-package") == "agent-package"
    assert lucene_token("new york") == "new\u2581york"
    # any whitespace, runs of it too: Lucene splits on each, and a query names the same one term
    assert lucene_token(" new\t york") == "new\u2581york"


@pytest.mark.parametrize("scale", [0, -3, 2.5, True])
def test_bad_scale_is_a_config_error(scale):
    with pytest.raises(ConfigError, match="scale"):
        ExportConfig(scale=scale)


@pytest.mark.parametrize("size", [0, -1, 2.5, True])
def test_bad_batch_size_is_a_config_error(size):
    # refused with the settings, not as a ValueError from inside encode once the export started
    with pytest.raises(ConfigError, match="batch_size"):
        ExportConfig(batch_size=size)


def test_the_scale_bound_of_1000_is_allowed_and_one_more_is_not():
    # MAX_SCALE = 1000 is the largest scale, not the first refused one (the CLI's message says "at most 1000")
    assert ExportConfig(scale=1000).scale == 1000
    with pytest.raises(ConfigError, match="at most 1000"):
        ExportConfig(scale=1001)


def test_export_matches_independent_quantisation(tiny_bert, tmp_path):
    out = tmp_path / "vectors"
    stats = export_vectors(tiny_bert, GATROCRAPTIC.docs, out, ExportConfig(scale=100, batch_size=4))
    docs = load_documents(GATROCRAPTIC.docs)
    lines = read_lines(out)
    assert [l["id"] for l in lines] == [d.doc_id for d in docs]
    assert [l["contents"] for l in lines] == [d.text for d in docs]
    expected = tiny_bert.encode_to_dicts([d.text for d in docs], "document")
    for line, weights in zip(lines, expected):
        want = {t: int(round(w * 100)) for t, w in weights.items() if round(w * 100) > 0}
        assert line["vector"] == want
        assert all(isinstance(v, int) and v > 0 for v in line["vector"].values())
    meta = json.loads((out / EXPORT_META).read_text())
    assert meta["scale"] == 100 and meta["documents"] == len(docs) == stats.documents
    assert stats.postings == sum(len(l["vector"]) for l in lines)


def test_domain_tokens_and_pieces_match_between_documents_and_queries(tiny_bert, tmp_path):
    extend_vocabulary(tiny_bert, load_domain_terms(GATROCRAPTIC.terms))
    tok = tiny_bert.tokenizer
    forced = ["gatrocraptic", "max_connections", "agent-package"]
    with torch.no_grad():  # make the added tokens fire in every text, whatever the random weights say
        for term in forced:
            tiny_bert.mlm.get_output_embeddings().bias[tok.convert_tokens_to_ids(term)] = 20.0
    out = tmp_path / "v"
    export_vectors(tiny_bert, GATROCRAPTIC.docs, out)
    lines = read_lines(out)
    query = QuantisedQueryEncoder(tiny_bert, scale=100).encode("what is gatrocraptic")
    for term in forced:
        assert term in lines[0]["vector"] and term in query
    keys = {k for l in lines for k in l["vector"]} | set(query)
    assert any(k.startswith("##") for k in keys)
    # every term is a whole vocabulary entry: tokenizer strings, not decoded text
    assert all(tok.convert_tokens_to_ids(k) != tok.unk_token_id for k in keys)
    assert not any(c.isspace() for k in keys for c in k)


def test_export_streams_in_batches(tiny_bert, tmp_path, monkeypatch):
    sizes: list[int] = []
    original = tiny_bert.encode

    def spy(texts, kind="document", batch_size=32, **options):
        sizes.append(len(texts))
        return original(texts, kind, batch_size, **options)

    monkeypatch.setattr(tiny_bert, "encode", spy)
    monkeypatch.setattr("sparse_adapt.retrieval.export.SORT_WINDOW_BATCHES", 2)
    export_vectors(tiny_bert, GATROCRAPTIC.docs, tmp_path / "v", ExportConfig(batch_size=5))
    # windows of 2 batches (encode sorts each window by length), never the whole corpus at once
    assert sizes == [10, 10, 6]
    # a bad last line is found by the checking pass, before anything is encoded
    bad = tmp_path / "bad.jsonl"
    bad.write_text(GATROCRAPTIC.docs.read_text(encoding="utf-8") + '{"doc_id": "z"}\n', encoding="utf-8")
    sizes.clear()
    with pytest.raises(DataError, match="bad.jsonl"):
        export_vectors(tiny_bert, bad, tmp_path / "w", ExportConfig(batch_size=5))
    assert sizes == []


def test_iter_documents_is_lazy_and_names_the_bad_line(tmp_path):
    p = tmp_path / "docs.jsonl"
    p.write_text('{"doc_id": "a", "text": "x"}\n\n{"doc_id": "b", "text": "y"}\n{"doc_id": "c"}\n')
    it = iter_documents(p)
    assert next(it).doc_id == "a" and next(it).doc_id == "b"
    with pytest.raises(DataError) as e:
        next(it)
    assert (e.value.line, e.value.field) == (4, "text")


def test_failed_export_leaves_previous_output_untouched(tiny_bert, tmp_path):
    bad = tmp_path / "docs.jsonl"
    good_lines = GATROCRAPTIC.docs.read_text().splitlines()[:3]
    bad.write_text("\n".join(good_lines + ["not json"]) + "\n")
    out = tmp_path / "v"
    out.mkdir()
    (out / "keep.txt").write_text("user file")
    with pytest.raises(DataError) as e:  # allowed to replace it, but it fails: the folder stays as it was
        export_vectors(tiny_bert, bad, out, ExportConfig(batch_size=2), overwrite=True)
    assert e.value.line == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl", "v"]  # no temp dir left behind
    assert (out / "keep.txt").read_text() == "user file"


@pytest.mark.parametrize("k", [0, -3, 2.5])
def test_bad_max_active_dims_is_a_config_error(k):
    with pytest.raises(ConfigError, match="max_active_dims"):
        ExportConfig(max_active_dims=k)


def test_export_max_active_dims_keeps_each_documents_largest_impacts(tiny_bert, tmp_path):
    full, cut = tmp_path / "full", tmp_path / "cut"
    export_vectors(tiny_bert, GATROCRAPTIC.docs, full, ExportConfig(batch_size=4))
    stats = export_vectors(tiny_bert, GATROCRAPTIC.docs, cut, ExportConfig(batch_size=4, max_active_dims=6))
    assert max(len(l["vector"]) for l in read_lines(full)) > 6
    for whole, kept in zip(read_lines(full), read_lines(cut)):
        assert len(kept["vector"]) <= 6
        assert all(whole["vector"][t] == v for t, v in kept["vector"].items())
        dropped = [v for t, v in whole["vector"].items() if t not in kept["vector"]]
        assert not dropped or max(dropped) <= min(kept["vector"].values())
    assert json.loads((cut / EXPORT_META).read_text())["max_active_dims"] == 6 == stats.max_active_dims


def test_export_cli(tiny_bert, tmp_path, capsys, monkeypatch):
    from sparse_adapt.cli import main

    model = tiny_bert.save_pretrained(tmp_path / "model")
    out = tmp_path / "vectors"
    args = ["export", "--model", str(model), "--docs", str(GATROCRAPTIC.docs), "--out", str(out), "--scale", "50"]
    assert main(args) == 0
    assert len(read_lines(out)) == 26
    assert json.loads((out / EXPORT_META).read_text())["scale"] == 50
    relative = tmp_path / "relative"
    monkeypatch.chdir(tmp_path)  # a model folder given relative is recorded absolute, as `onnx` records it
    assert main(["export", "--model", "model", "--docs", str(GATROCRAPTIC.docs), "--out", str(relative)]) == 0
    assert json.loads((relative / EXPORT_META).read_text())["model"] == str(model.resolve())
    cut = tmp_path / "cut"
    assert main(["export", "--model", str(model), "--docs", str(GATROCRAPTIC.docs), "--out", str(cut),
                 "--max-active-dims", "3"]) == 0
    assert max(len(l["vector"]) for l in read_lines(cut)) <= 3
    assert "at most 3 terms per document" in capsys.readouterr().out
    assert main(["export", "--model", str(model), "--docs", str(GATROCRAPTIC.docs), "--out", str(tmp_path / "x"),
                 "--max-active-dims", "0"]) == 2
    assert main(["export", "--model", str(model), "--docs", str(tmp_path / "missing.jsonl"), "--out", str(out)]) == 2
    assert "missing.jsonl" in capsys.readouterr().err


def test_export_cli_encodes_in_batches_of_its_batch_size_and_says_what_it_wrote(tiny_bert, tmp_path, capsys,
                                                                                 monkeypatch):
    # --batch-size is how a user keeps a large model within memory: it must reach the encoder
    from sparse_adapt.cli import main
    from sparse_adapt.modeling.encoder import SpladeEncoder

    sizes: list[int] = []
    original = SpladeEncoder.encode

    def spy(self, texts, kind="document", batch_size=32, **options):
        sizes.append(batch_size)
        return original(self, texts, kind, batch_size, **options)

    model = tiny_bert.save_pretrained(tmp_path / "model")
    monkeypatch.setattr(SpladeEncoder, "encode", spy)
    out = tmp_path / "vectors"
    assert main(["export", "--model", str(model), "--docs", str(GATROCRAPTIC.docs), "--out", str(out),
                 "--scale", "50", "--batch-size", "5"]) == 0
    assert sizes and set(sizes) == {5}
    said = " ".join(capsys.readouterr().out.split())
    postings = sum(len(line["vector"]) for line in read_lines(out))
    assert f"(26 documents, {postings} postings, " in said and said.endswith("docs/s, scale 50)")
    assert "at most" not in said  # no --max-active-dims: every active term kept, no cut named


def test_export_cli_refuses_an_out_holding_its_documents_even_with_overwrite(tiny_bert, tmp_path, capsys):
    # replacing the folder whole would delete the corpus being exported (the model kept elsewhere)
    from sparse_adapt.cli import main

    model = tiny_bert.save_pretrained(tmp_path / "model")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    docs = corpus / "docs.jsonl"
    docs.write_text(json.dumps({"doc_id": "d1", "text": "install the agent"}) + "\n")
    assert main(["export", "--model", str(model), "--docs", str(docs), "--out", str(corpus), "--overwrite"]) == 2
    assert "holds an input" in " ".join(capsys.readouterr().err.split())
    assert sorted(p.name for p in corpus.iterdir()) == ["docs.jsonl"] and "install the agent" in docs.read_text()


def test_export_cli_says_how_many_documents_have_no_term_and_names_the_first(tiny_bert, tmp_path, capsys):
    from sparse_adapt.cli import main

    with torch.no_grad():  # every logit below 0: no document has a term
        tiny_bert.mlm.get_output_embeddings().bias -= 100.0
    model = tiny_bert.save_pretrained(tmp_path / "model")
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"doc_id": f"d{i}", "text": "install the agent"}) + "\n" for i in range(4)))
    out = tmp_path / "vectors"
    assert main(["export", "--model", str(model), "--docs", str(docs), "--out", str(out), "--scale", "50"]) == 0
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert "4 of 4 documents have no term at scale 50 (e.g. d0, d1, d2): no query can score them" in err
    assert "(4 documents, 0 postings, " in " ".join(captured.out.split())


def test_the_index_check_names_the_first_empty_documents_in_file_order(tmp_path):
    # index reads the export, not the model: it names what export named, the first three
    from sparse_adapt.retrieval.export import validate_vectors

    vectors = tmp_path / "v"
    vectors.mkdir()
    ids = ["e4", "full", "e1", "e3", "e2"]
    lines = [{"id": d, "contents": "x", "vector": {"pool": 3} if d == "full" else {}} for d in ids]
    (vectors / VECTORS_FILE).write_text("".join(json.dumps(r) + "\n" for r in lines))
    check = validate_vectors(vectors, 5)
    assert (check.empty, check.empty_ids) == (4, ["e4", "e1", "e3"])


def test_index_warns_when_scores_can_pass_what_float32_sums_keep_exact(tmp_path):
    from sparse_adapt.retrieval.export import EXACT_SCORES, inexact_sentence, validate_vectors

    vectors = tmp_path / "v"
    vectors.mkdir()
    lines = [{"id": "a", "contents": "x", "vector": {"pool": 3000, "size": 2000}},  # 9e6 + 4e6 = 1.3e7
             {"id": "b", "contents": "y", "vector": {}}]
    (vectors / VECTORS_FILE).write_text("".join(json.dumps(r) + "\n" for r in lines))
    check = validate_vectors(vectors, 2)
    assert (check.empty, check.self_score) == (1, 3000**2 + 2000**2) and check.self_score < EXACT_SCORES
    assert inexact_sentence(check, 1000) is None
    lines[0]["vector"]["timeout"] = 2000  # + 4e6 = 1.7e7 > 2^24 = 16,777,216
    (vectors / VECTORS_FILE).write_text("".join(json.dumps(r) + "\n" for r in lines))
    said = inexact_sentence(validate_vectors(vectors, 2), 1000)
    assert said.startswith("at scale 1000 a query like its document scores up to 17,000,000, above 2^24")
    # The bound itself is exact: float32 holds every integer up to 2^24 = 4096^2; one more is not.
    lines[0]["vector"] = {"pool": 4096}
    (vectors / VECTORS_FILE).write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert inexact_sentence(validate_vectors(vectors, 2), 1000) is None
    lines[0]["vector"]["size"] = 1  # 2^24 + 1
    (vectors / VECTORS_FILE).write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert inexact_sentence(validate_vectors(vectors, 2), 1000) is not None


def test_export_records_the_documents_file_as_an_absolute_path(tiny_bert, tmp_path, monkeypatch):
    # a relative path in the record says nothing once read from another folder
    (tmp_path / "docs.jsonl").write_text(json.dumps({"doc_id": "d1", "text": "install the agent"}) + "\n")
    monkeypatch.chdir(tmp_path)
    export_vectors(tiny_bert, "docs.jsonl", "vectors")
    recorded = json.loads((tmp_path / "vectors" / EXPORT_META).read_text())["docs"]
    assert recorded == str(tmp_path.resolve() / "docs.jsonl")


def test_an_export_edited_to_hold_an_id_with_whitespace_is_refused_before_lucene(tmp_path):
    from sparse_adapt.retrieval.export import validate_vectors

    vectors = tmp_path / "v"
    vectors.mkdir()
    lines = [{"id": "a", "contents": "x", "vector": {"pool": 3}}, {"id": "b c", "contents": "y", "vector": {"size": 2}}]
    (vectors / VECTORS_FILE).write_text("".join(json.dumps(r) + "\n" for r in lines))
    with pytest.raises(DataError, match="holds whitespace") as e:  # run files would read it as two columns
        validate_vectors(vectors, 2)
    assert (e.value.line, e.value.field) == (2, "id")


def test_export_records_the_models_own_name_when_none_is_given(tiny_bert, tmp_path):
    # `search` compares this name with its query model's: an empty one names nothing
    (tmp_path / "docs.jsonl").write_text(json.dumps({"doc_id": "d1", "text": "install the agent"}) + "\n")
    stats = export_vectors(tiny_bert, tmp_path / "docs.jsonl", tmp_path / "vectors")
    assert stats.model == "tiny-bert"
    assert json.loads((tmp_path / "vectors" / EXPORT_META).read_text())["model"] == "tiny-bert"


def test_export_counts_truncated_documents_over_every_window(tiny_bert, tmp_path, monkeypatch):
    # 3 documents past doc_max_length = 48 pieces, then 2 short: windows of 2 x 1 documents
    # are [long, long], [long, short], [short]; every window's truncated ones count
    monkeypatch.setattr("sparse_adapt.retrieval.export.SORT_WINDOW_BATCHES", 2)
    texts = ["install the agent " * 30] * 3 + ["install the agent"] * 2
    lines = (json.dumps({"doc_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts))
    (tmp_path / "docs.jsonl").write_text("".join(lines))
    stats = export_vectors(tiny_bert, tmp_path / "docs.jsonl", tmp_path / "vectors", ExportConfig(batch_size=1))
    assert (stats.documents, stats.truncated) == (5, 3)
    assert json.loads((tmp_path / "vectors" / EXPORT_META).read_text())["truncated"] == 3


def _write_vectors(vectors: Path, text: str) -> None:
    vectors.mkdir(exist_ok=True)
    (vectors / VECTORS_FILE).write_text(text)


def test_validate_vectors_skips_blank_lines_and_refuses_a_true_impact_or_an_empty_id(tmp_path):
    from sparse_adapt.retrieval.export import validate_vectors

    vectors = tmp_path / "v"
    a, b = json.dumps({"id": "a", "vector": {"pool": 3}}), json.dumps({"id": "b", "vector": {"size": 2}})
    # a blank line (an edited file's last one, say) is no document, as Anserini reads it
    _write_vectors(vectors, f"{a}\n\n{b}\n  \n")
    assert validate_vectors(vectors, 2).self_score == 9
    # JSON's true is an int to Python: Lucene would get no 32-bit impact from it
    _write_vectors(vectors, f'{a}\n{{"id": "b", "vector": {{"size": true}}}}\n')
    with pytest.raises(DataError, match="positive integer impact") as e:
        validate_vectors(vectors, 2)
    assert (e.value.line, e.value.field) == (2, "vector")
    _write_vectors(vectors, f'{a}\n{{"id": "", "vector": {{"size": 2}}}}\n')  # Lucene would index it under no id
    with pytest.raises(DataError, match="missing or not a non-empty string") as e:
        validate_vectors(vectors, 2)
    assert (e.value.line, e.value.field) == (2, "id")


def test_read_export_meta_accepts_the_least_scale_and_no_documents(tmp_path):
    from sparse_adapt.retrieval.export import read_export_meta

    # ExportConfig(scale=1) is a valid export; the bound refused is below it, not at it
    (tmp_path / EXPORT_META).write_text(json.dumps({"scale": 1, "model": "m", "documents": 0}))
    assert read_export_meta(tmp_path)["scale"] == 1


@pytest.mark.parametrize("text, field", [
    ("[1, 2]", "scale"),  # JSON, but no object: each field is missing, not an AttributeError
    ("[" * 100_000 + "]" * 100_000, None),  # nesting past Python's recursion limit: no traceback
])
def test_read_export_meta_refuses_json_that_is_no_object_in_one_line(tmp_path, text, field):
    from sparse_adapt.retrieval.export import read_export_meta

    (tmp_path / EXPORT_META).write_text(text)
    with pytest.raises(DataError, match="export the documents again") as e:
        read_export_meta(tmp_path)
    assert e.value.field == field


@pytest.mark.parametrize("line, field", [
    ('{"id": "b", "vector": {"size": 2.5}}', "vector"),  # Lucene stores an integer impact, not 2.5
    ('["b", {"size": 2}]', "id"),  # a JSON line that is no object is refused, not a traceback
])
def test_validate_vectors_refuses_a_fractional_impact_and_a_line_that_is_no_object(tmp_path, line, field):
    from sparse_adapt.retrieval.export import validate_vectors

    vectors = tmp_path / "v"
    _write_vectors(vectors, json.dumps({"id": "a", "vector": {"pool": 3}}) + "\n" + line + "\n")
    with pytest.raises(DataError) as e:
        validate_vectors(vectors, 2)
    assert (e.value.line, e.value.field) == (2, field)


def test_a_repeated_id_names_both_lines_past_blank_ones(tmp_path):
    from sparse_adapt.retrieval.export import validate_vectors

    vectors = tmp_path / "v"
    a, b = json.dumps({"id": "a", "vector": {"pool": 3}}), json.dumps({"id": "b", "vector": {"size": 2}})
    # blank lines count in the numbering but are no record; the second pass skips them as the first does
    _write_vectors(vectors, f"{a}\n\n{b}\n\n{a}\n")
    with pytest.raises(DataError, match=r"duplicate id 'a' \(first on line 1\)") as e:
        validate_vectors(vectors, 3)
    assert e.value.line == 5


def test_export_advances_its_progress_by_every_document(tiny_bert, tmp_path):
    from sparse_adapt.progress import Hooks

    advanced: dict[str, list] = {}

    class Recorder:
        def __init__(self, description, total):
            self.steps = advanced.setdefault(description, [total])

        def advance(self, steps=1, description=None):
            self.steps.append(steps)

    texts = ["install the agent"] * 5
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"doc_id": f"d{i}", "text": t}) + "\n"
                                                 for i, t in enumerate(texts)))
    export_vectors(tiny_bert, tmp_path / "docs.jsonl", tmp_path / "vectors", ExportConfig(batch_size=2),
                   progress=Hooks(task=Recorder))
    [(total, *steps)] = advanced.values()
    assert total == 5 and sum(steps) == 5  # the bar ends full, whatever the windows


def test_export_records_the_models_hash_with_and_without_its_document_window(tiny_bert, tmp_path):
    # `search` tells the index's model from another by these; swapped, the very same model reads as changed
    from sparse_adapt.modeling.fingerprint import model_sha256

    (tmp_path / "docs.jsonl").write_text(json.dumps({"doc_id": "d1", "text": "install the agent"}) + "\n")
    stats = export_vectors(tiny_bert, tmp_path / "docs.jsonl", tmp_path / "vectors")
    meta = json.loads((tmp_path / "vectors" / EXPORT_META).read_text())
    assert (meta["model_sha256"], meta["weights_sha256"]) == (model_sha256(tiny_bert), model_sha256(tiny_bert, False))
    assert meta["model_sha256"] != meta["weights_sha256"] and stats.model_sha256 == meta["model_sha256"]


def test_a_document_cut_to_one_term_is_not_counted_empty(tiny_bert, tmp_path):
    # one impact is a term Lucene indexes: only a vector without any is "no term"
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"doc_id": f"d{i}", "text": "install the agent"}) + "\n"
                                                 for i in range(3)))
    stats = export_vectors(tiny_bert, tmp_path / "docs.jsonl", tmp_path / "vectors", ExportConfig(max_active_dims=1))
    assert [len(l["vector"]) for l in read_lines(tmp_path / "vectors")] == [1, 1, 1]
    assert (stats.postings, stats.empty, stats.empty_ids) == (3, 0, [])


def test_the_no_term_sentence_gives_examples_only_when_it_has_some():
    # `index` reads no ids back from the metadata: its note names none, and no empty "(e.g. )"
    from sparse_adapt.retrieval.export import empty_sentence

    assert empty_sentence(1, 3, 100).startswith("1 of 3 documents has no term at scale 100: no query")
    assert empty_sentence(2, 3, 50, ["a", "b"]).startswith("2 of 3 documents have no term at scale 50 (e.g. a, b): ")


def test_the_rounding_bound_in_export_configs_comment_holds_at_its_default_scale():
    """ExportConfig's comment bounds how far rounding at the default scale s moves a score, on the exact
    scale: each impact is off by at most 1/2, so a shared term moves by at most (q + d) / 2s + 1/4s^2.
    The first half alone, what the comment once said, is beaten by one small shared term."""
    import inspect

    s = ExportConfig().scale
    assert f"(|q|_1 + |d|_1) / {2 * s} + n / {4 * s * s}" in inspect.getsource(ExportConfig)

    def moved(q: np.ndarray, d: np.ndarray) -> float:
        vocab = [str(i) for i in range(q.size)]
        (qi, di) = quantise(sp.csr_matrix(np.vstack([q, d])), vocab, s)
        return abs(sum(v * di.get(t, 0) for t, v in qi.items()) / s**2 - float(q @ d))

    def bound(q: np.ndarray, d: np.ndarray) -> float:
        return (q.sum() + d.sum()) / (2 * s) + np.count_nonzero(q * d) / (4 * s * s)

    one = np.array([0.501 / s])  # both impacts round up from 0.501 to 1
    assert (one.sum() * 2) / (2 * s) < moved(one, one) <= bound(one, one)
    rng = np.random.default_rng(0)
    for _ in range(200):
        q, d = (rng.random(30) * 3 * (rng.random(30) < 0.5) for _ in range(2))
        assert moved(q, d) <= bound(q, d) + 1e-12


def test_export_from_python_refuses_a_folder_of_other_files_and_one_holding_the_corpus(tiny_bert, tmp_path):
    """export_vectors replaces ``out`` whole: from Python, as from the command, a folder of the
    user's files is refused unless overwrite=True, and one holding the documents always (it
    deleted the corpus beside a notes file before)."""
    from sparse_adapt.errors import OutputError

    mine = tmp_path / "mydata"
    mine.mkdir()
    docs = mine / "docs.jsonl"
    docs.write_text(json.dumps({"doc_id": "d1", "text": "install the agent"}) + "\n")
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match=r"^out .*mydata holds an input .*docs\.jsonl"):
        export_vectors(tiny_bert, docs, mine, overwrite=True)
    assert sorted(p.name for p in mine.iterdir()) == ["docs.jsonl", "notes.txt"]
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match=r"not empty \(1 entry\); pass overwrite=True to replace it"):
        export_vectors(tiny_bert, docs, other)
    assert [p.name for p in other.iterdir()] == ["notes.txt"]
    export_vectors(tiny_bert, docs, other, overwrite=True)
    assert sorted(p.name for p in other.iterdir()) == [EXPORT_META, VECTORS_FILE]
