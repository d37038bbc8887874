"""Issue rows: a model directory that is damaged or edited by hand. Every command that loads
a model refuses it in one line naming the directory (or the settings file and its field),
before any work; a model holding NaN or infinite weights is never encoded, exported or
extended into a new model."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.faults.conftest import assert_one_line_error, cli


def _copy(model: Path, tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(model, target)
    return target


def _poison(model: Path, key_part: str) -> None:
    """One weight tensor (the first whose name contains ``key_part``) gets a NaN."""
    weights = load_file(model / "model.safetensors")
    key = next(k for k in weights if key_part in k)
    weights[key] = weights[key].clone()
    weights[key].view(-1)[0] = float("nan")
    save_file(weights, model / "model.safetensors", metadata={"format": "pt"})


def _settings(model: Path, text: str) -> None:
    (model / "sparse_adapt.json").write_text(text, encoding="utf-8")


# (directory name, how to damage it, fragments of the one-line error)
DAMAGES = {
    "truncated-weights": (lambda m: (m / "model.safetensors").write_bytes((m / "model.safetensors").read_bytes()[:40]),
                          ["damaged", "SafetensorError"]),
    "config-not-an-object": (lambda m: (m / "config.json").write_text("[1]"), ["damaged", "config"]),
    # transformers wraps these in an OSError, which read as "an encoder without an MLM head" before
    "config-not-json": (lambda m: (m / "config.json").write_text('{"architectures": ["Bert'),
                        ["damaged or edited by hand", "config.json", "valid JSON file)"]),
    "config-not-utf8": (lambda m: (m / "config.json").write_bytes(b"\xff\xfe{"),
                        ["damaged or edited by hand", "config.json", "valid JSON file)"]),
    "tokenizer-json-edited": (lambda m: (m / "tokenizer.json").write_text("{}"), ["damaged"]),
    "settings-not-json": (lambda m: _settings(m, "{oops"), ["sparse_adapt.json", "not valid JSON"]),
    "settings-a-list": (lambda m: _settings(m, "[1, 2]"), ["sparse_adapt.json", "JSON object"]),
    "settings-length-text": (lambda m: _settings(m, json.dumps({"doc_max_length": "long"})),
                             ["sparse_adapt.json", "'doc_max_length'", "positive integer", "'long'"]),
    "settings-length-negative": (lambda m: _settings(m, json.dumps({"query_max_length": -5})),
                                 ["sparse_adapt.json", "'query_max_length'", "-5"]),
    # the lowest excluded bound: a length of 0 encodes nothing at all
    "settings-length-zero": (lambda m: _settings(m, json.dumps({"doc_max_length": 0})),
                             ["sparse_adapt.json", "'doc_max_length'", "positive integer", "got 0"]),
    "settings-ids-text": (lambda m: _settings(m, json.dumps({"domain_token_ids": ["a"]})),
                          ["sparse_adapt.json", "'domain_token_ids'"]),
    # a negative id passes the vocabulary bound and names a token counted from the end
    "settings-ids-negative": (lambda m: _settings(m, json.dumps({"domain_token_ids": [-1]})),
                              ["sparse_adapt.json", "'domain_token_ids'", "integers >= 0"]),
    # a ValueError / RecursionError traceback from json before
    "settings-5000-digits": (lambda m: _settings(m, '{"doc_max_length": 1' + "0" * 5000 + "}"),
                             ["sparse_adapt.json", "not valid JSON"]),
    "settings-deep": (lambda m: _settings(m, "[" * 100000 + "]" * 100000), ["sparse_adapt.json", "not valid JSON"]),
    # loaded, then a TypeError deep in distill (a token id without a string)
    "settings-ids-beyond": (lambda m: _settings(m, json.dumps({"domain_token_ids": [999999999]})),
                            ["sparse_adapt.json", "'domain_token_ids'", "999999999 is beyond the tokenizer's"]),
    "settings-ids-twice": (lambda m: _settings(m, json.dumps({"domain_token_ids": [5, 5]})),
                           ["sparse_adapt.json", "'domain_token_ids'", "twice"]),
    "nan-encoder-weight": (lambda m: _poison(m, "attention.self.query.weight"), ["NaN or infinite", "query.weight"]),
    "nan-decoder-bias": (lambda m: _poison(m, "predictions.bias"), ["NaN or infinite", "bias"]),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_model_directory_is_one_line(damage, tiny_model_dir, tmp_path, capsys):
    model = _copy(tiny_model_dir, tmp_path, damage)
    make, fragments = DAMAGES[damage]
    make(model)
    result = cli(capsys, ["encode", "--model", model, "--query", "hello world"])
    assert_one_line_error(result, str(model), *fragments)
    assert "--from-encoder" not in result.err and ".." not in result.err.replace(str(model), "")


@pytest.mark.parametrize("command", ["extend-vocab", "export", "onnx"])
def test_a_nan_model_becomes_no_new_output(command, tiny_model_dir, tmp_path, capsys):
    model = _copy(tiny_model_dir, tmp_path, "nan")
    _poison(model, "predictions.bias")
    terms, docs = tmp_path / "terms.json", tmp_path / "docs.jsonl"
    terms.write_text(json.dumps({"jargon": ["Zorblatt"]}))
    docs.write_text(json.dumps({"doc_id": "d1", "text": "Zorblatt metrics."}) + "\n")
    argv = {
        "extend-vocab": ["extend-vocab", "--base", model, "--terms", terms],
        "export": ["export", "--model", model, "--docs", docs],
        "onnx": ["onnx", "--model", model],
    }[command]
    out = tmp_path / "out"
    assert_one_line_error(cli(capsys, [*argv, "--out", out]), "NaN or infinite")
    assert not out.exists()


def test_the_intact_copy_still_loads(tiny_model_dir, tmp_path, capsys):
    """The damages above are what fails: an untouched copy encodes."""
    model = _copy(tiny_model_dir, tmp_path, "intact")
    result = cli(capsys, ["encode", "--model", model, "--query", "hello world"])
    assert result.code == 0, result.err
    assert torch.isfinite(load_file(model / "model.safetensors")["cls.predictions.bias"]).all()


def test_a_nan_encoder_becomes_no_splade_base(tmp_path, capsys):
    """`base --from-encoder` reads a headless encoder: a NaN in it is refused like a SPLADE model's."""
    from transformers import BertConfig, BertModel

    from tests.conftest import make_tiny_bert

    encoder = tmp_path / "encoder"
    model = BertModel(BertConfig(vocab_size=len(make_tiny_bert().tokenizer), hidden_size=32, num_hidden_layers=1,
                                 num_attention_heads=2, intermediate_size=64, max_position_embeddings=64))
    with torch.no_grad():
        model.embeddings.word_embeddings.weight[3, 0] = float("inf")
    model.save_pretrained(encoder)
    make_tiny_bert().tokenizer.save_pretrained(encoder)
    out = tmp_path / "base"
    result = cli(capsys, ["base", "--from-encoder", encoder, "--bias", "-1.0", "--out", out])
    assert_one_line_error(result, str(encoder), "NaN or infinite", "word_embeddings")
    assert not out.exists()



def _tokenizer_of_tiny_roberta(tmp_path: Path, into: Path) -> None:
    from tests.conftest import make_tiny_roberta

    other = tmp_path / "roberta"
    make_tiny_roberta().save_pretrained(other)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(other / name, into / name)


def test_a_tokenizer_that_is_not_the_models_own_is_one_line_naming_the_model(tiny_model_dir, tmp_path, capsys):
    """A BERT head with RoBERTa's (smaller) tokenizer loaded and encoded plausible vectors of
    the wrong words; the error for the opposite case did not name the model."""
    model = _copy(tiny_model_dir, tmp_path, "mixed")
    _tokenizer_of_tiny_roberta(tmp_path, model)
    result = cli(capsys, ["encode", "--model", model, "--query", "hello world"])
    assert_one_line_error(result, str(model), "the MLM head has", "the tokenizer is not this model's own")


def test_an_onnx_export_with_another_models_tokenizer_is_refused_on_loading(tiny_model_dir, tmp_path, capsys):
    """It failed at the first query: a TypeError for a smaller tokenizer, ONNX Runtime's Gather
    error for a larger one."""
    from sparse_adapt.errors import ModelLoadError
    from sparse_adapt.modeling.onnx import OnnxSpladeEncoder

    onnx = tmp_path / "onnx"
    assert cli(capsys, ["onnx", "--model", tiny_model_dir, "--out", onnx]).code == 0
    _tokenizer_of_tiny_roberta(tmp_path, onnx)
    with pytest.raises(ModelLoadError, match="its tokenizer has .* tokens but the graph scores .*export again"):
        OnnxSpladeEncoder(onnx)
    with pytest.raises(ModelLoadError, match=re.escape(f"model.onnx is a file; give the folder `sparse-adapt onnx --out` "
                                                       f"wrote ({onnx})")):
        OnnxSpladeEncoder(onnx / "model.onnx")


def test_a_head_wider_than_its_tokenizer_by_design_is_no_other_models_tokenizer():
    from sparse_adapt.errors import ModelLoadError
    from sparse_adapt.modeling.tokenization import check_head_fits

    # dbmdz/bert-base-italian-xxl: 32,102 rows, 31,102 tokens; mDeBERTa-v3: 251,000 and ~250,000
    for rows, tokens in ((32102, 31102), (251000, 250002), (30528, 30522)):
        check_head_fits(rows, range(tokens), "m")
    check_head_fits(30522, range(30522), "m")  # bert-base: one row per token, the usual case
    with pytest.raises(ModelLoadError, match="m: the MLM head has 30522 rows but the tokenizer has 800 tokens"):
        check_head_fits(30522, range(800), "m")
    with pytest.raises(ModelLoadError, match="has 800 rows but the tokenizer has 801"):
        check_head_fits(800, range(801), "m")


def test_a_tokenizer_covering_exactly_half_the_head_is_still_the_models_own():
    from sparse_adapt.errors import ModelLoadError
    from sparse_adapt.modeling.tokenization import MIN_ROWS_USED, check_head_fits

    # The bound is "under half": 500 tokens of a 1,000-row head pass, 499 do not.
    assert MIN_ROWS_USED == 0.5
    check_head_fits(1000, range(500), "m")
    with pytest.raises(ModelLoadError, match="has 1000 rows but the tokenizer has 499 tokens"):
        check_head_fits(1000, range(499), "m")
