"""Issue rows: model identity and a corrupt vectors folder. ``index`` checks every exported
line before Lucene reads it (Anserini would skip a bad one), and ``search`` compares a
content hash of the model's weights with the one that built the index, not its path."""

from __future__ import annotations

import json

import pytest
import torch

from sparse_adapt.modeling.encoder import SpladeEncoder
from tests.conftest import make_tiny_bert
from tests.faults.conftest import assert_one_line_error, cli

DOCS = [{"doc_id": f"d{i}", "text": t} for i, t in enumerate(
    ["budget spending review", "install the agent", "quarterly budget meeting", "agent metrics dashboard"])]


@pytest.fixture
def exported(tiny_model_dir, tmp_path, capsys):
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    vectors = tmp_path / "vectors"
    assert cli(capsys, ["export", "--model", tiny_model_dir, "--docs", docs, "--out", vectors]).code == 0
    return vectors


@pytest.mark.parametrize("damage, where", [
    (lambda lines: lines[:1] + ['{"id": "d1", "vector": {"agent": 12'] + lines[2:], ":2: not valid JSON"),
    (lambda lines: lines[:2] + [lines[2].replace('"vector"', '"vectr"')] + lines[3:], ":3: field 'vector'"),
    (lambda lines: lines[:1] + lines[2:], "holds 3 documents but the export wrote 4"),
    # a line added after export (a document the metadata never counted) is refused as a missing one is
    (lambda lines: lines + ['{"id": "d9", "vector": {"agent": 3}}'], "holds 5 documents but the export wrote 4"),
    # Lucene would index two documents under one id, keep one impact of a token written twice,
    # and overflow its 32-bit impact
    (lambda lines: lines[:2] + [lines[1]] + lines[3:], ":3: field 'id': duplicate id"),
    (lambda lines: lines[:1] + ['{"id": "d1", "vector": {"agent": 3, "agent": 5}}'] + lines[2:], ":2: field 'agent': appears twice"),
    (lambda lines: lines[:1] + ['{"id": "d1", "vector": {"agent": 2147483648}}'] + lines[2:], ":2: field 'vector'"),
    # export drops an impact that rounds to 0 (Lucene cannot store one): a 0 is an edit
    (lambda lines: lines[:1] + ['{"id": "d1", "vector": {"agent": 0}}'] + lines[2:], ":2: field 'vector'"),
    (lambda lines: lines[:1] + ['{"id": "d1", "vector": {" ": 3}}'] + lines[2:], ":2: field 'vector'"),
], ids=["torn line", "renamed field", "missing line", "extra line", "duplicate id", "token twice", "impact beyond int32",
     "zero impact", "blank token"])
def test_a_damaged_export_is_refused_before_lucene(damage, where, exported, tmp_path, capsys):
    path = exported / "vectors.jsonl"
    path.write_text("\n".join(damage(path.read_text().splitlines())) + "\n")
    index = tmp_path / "index"
    result = cli(capsys, ["index", "--vectors", exported, "--index", index])
    assert_one_line_error(result, f"{path}", where)
    assert not index.exists()


@pytest.mark.slow
def test_search_warns_when_the_model_behind_the_path_changed(tiny_model_dir, tmp_path, capsys):
    model = tmp_path / "model"
    SpladeEncoder.from_pretrained(tiny_model_dir).save_pretrained(model)
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    vectors, index = tmp_path / "vectors", tmp_path / "index"
    assert cli(capsys, ["export", "--model", model, "--docs", docs, "--out", vectors]).code == 0
    assert cli(capsys, ["index", "--vectors", vectors, "--index", index]).code == 0
    same = cli(capsys, ["search", "budget", "--index", index, "--model", model, "--json"])
    assert same.code == 0 and "warning" not in same.err, same.err
    copy = cli(capsys, ["search", "budget", "--index", index, "--model", tiny_model_dir, "--json"])
    assert copy.code == 0 and "warning" not in copy.err, copy.err  # the same weights elsewhere: the same model
    # an index exported before the hash counted the document window: its own model is not "different"
    from sparse_adapt.modeling.fingerprint import model_sha256

    meta_file = index / "sparse_adapt_index.json"
    meta = json.loads(meta_file.read_text())
    current = meta["model_sha256"]
    weights_only = model_sha256(SpladeEncoder.from_pretrained(model), False)
    older_meta = {k: v for k, v in meta.items() if k != "weights_sha256"}  # an older index has no such key
    meta_file.write_text(json.dumps({**older_meta, "model_sha256": weights_only}))
    older = cli(capsys, ["search", "budget", "--index", index, "--model", model, "--json"])
    assert older.code == 0 and "warning" not in older.err, older.err
    meta_file.write_text(json.dumps({**meta, "model_sha256": current}))
    # retrained "in place": another model saved at the very same path
    other = make_tiny_bert(seed=1)
    with torch.no_grad():
        other.mlm.get_output_embeddings().bias -= 0.3
    other.save_pretrained(model)
    changed = cli(capsys, ["search", "budget", "--index", index, "--model", model, "--json"])
    assert changed.code == 0
    assert f"{index} was built from a different model than {str(model)!r}" in changed.err_line, changed.err
    json.loads(changed.out)  # stdout stays the JSON result
    # the same check through an ONNX export of the retrained model: its metadata carries the hash
    onnx = tmp_path / "onnx"
    assert cli(capsys, ["onnx", "--model", model, "--out", onnx]).code == 0
    through_onnx = cli(capsys, ["search", "budget", "--index", index, "--onnx", onnx, "--json"])
    assert through_onnx.code == 0 and "was built from a different model" in through_onnx.err_line, through_onnx.err
    long = cli(capsys, ["search", "budget " * 80, "--index", index, "--onnx", onnx, "--json"])
    assert "the query is longer than" in long.err_line, long.err
    # an ONNX export of the index's own model made before the hash counted the document window
    # (its one hash: weights and vocabulary) is that model, not "different"
    from sparse_adapt.modeling.onnx import META_FILE

    old_onnx = tmp_path / "onnx-older"
    assert cli(capsys, ["onnx", "--model", tiny_model_dir, "--out", old_onnx]).code == 0
    onnx_meta = json.loads((old_onnx / META_FILE).read_text())
    assert onnx_meta["weights_sha256"] == weights_only
    onnx_meta = {**{k: v for k, v in onnx_meta.items() if k != "weights_sha256"}, "model_sha256": weights_only}
    (old_onnx / META_FILE).write_text(json.dumps(onnx_meta))
    older_onnx = cli(capsys, ["search", "budget", "--index", index, "--onnx", old_onnx, "--json"])
    assert older_onnx.code == 0 and "warning" not in older_onnx.err, older_onnx.err
