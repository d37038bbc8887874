"""Issue rows: a CJK term, special tokens as terms, 5,000 terms. A term the tokenizer cannot
keep whole, or a special token, is one error line naming the terms file and the term
before anything is written; thousands of terms give a summary, not thousands of rows."""

from __future__ import annotations

import json

import pytest

from sparse_adapt.modeling.encoder import SpladeEncoder
from tests.faults.conftest import assert_one_line_error, cli, train_argv


def _terms(tmp_path, obj) -> str:
    path = tmp_path / "terms.json"
    path.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    return str(path)


def test_a_term_the_tokenizer_cannot_keep_whole_is_one_line(tiny_model_dir, tmp_path, capsys):
    terms = _terms(tmp_path, {"jargon": ["Zorblatt", "\u65e5\u672c\u8a9e"]})
    out = tmp_path / "extended"
    result = cli(capsys, ["extend-vocab", "--base", tiny_model_dir, "--terms", terms, "--out", out])
    assert_one_line_error(result, f"{terms}: field 'jargon[1]'", "\u65e5\u672c\u8a9e", "cannot be one token")
    assert not out.exists()


@pytest.mark.parametrize("special", ["[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]"])
def test_special_tokens_are_not_domain_terms(special, tiny_model_dir, tmp_path, capsys):
    terms = _terms(tmp_path, {"acronyms": ["API", special]})
    out = tmp_path / "extended"
    result = cli(capsys, ["extend-vocab", "--base", tiny_model_dir, "--terms", terms, "--out", out])
    assert_one_line_error(result, f"{terms}: field 'acronyms[1]'", f"{special!r} is a special token")
    assert not out.exists()


def test_a_term_that_tokenizes_to_nothing_is_one_line(tiny_model_dir, tmp_path, capsys):
    terms = _terms(tmp_path, {"jargon": ["\ufffd"]})  # a replacement character: BERT's cleaning drops it
    result = cli(capsys, ["extend-vocab", "--base", tiny_model_dir, "--terms", terms, "--out", tmp_path / "x"])
    assert_one_line_error(result, "field 'jargon[0]'", "tokenizes to nothing")
    terms = _terms(tmp_path, {"jargon": ["\u200b"]})  # a zero-width space is no text at all: refused when read
    result = cli(capsys, ["extend-vocab", "--base", tiny_model_dir, "--terms", terms, "--out", tmp_path / "x"])
    assert_one_line_error(result, "field 'jargon[0]'", "expected a non-empty string")


@pytest.mark.parametrize("stages, term", [("extend,distill", "\u65e5\u672c\u8a9e"), ("distill", "[SEP]")])
def test_train_refuses_such_terms_before_writing_a_run(stages, term, tiny_model_dir, train_inputs, tmp_path, capsys):
    train_inputs["terms"].write_text(json.dumps({"jargon": ["Zorblatt", term]}, ensure_ascii=False), encoding="utf-8")
    out = tmp_path / "run"
    result = cli(capsys, train_argv(tiny_model_dir, train_inputs, out, stages=stages))
    assert_one_line_error(result, "field 'jargon[1]'")
    assert not out.exists()


def test_thousands_of_terms_print_a_summary_not_every_row(tiny_model_dir, tmp_path, capsys):
    n = 1000
    words = [f"zq{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}{chr(97 + i // 676)}xv" for i in range(n)]
    out = tmp_path / "extended"
    result = cli(capsys, ["extend-vocab", "--base", tiny_model_dir, "--terms", _terms(tmp_path, {"jargon": words}),
                          "--out", out])
    assert result.code == 0, result.err
    shown = [w for w in words if w in result.out]
    assert 0 < len(shown) <= 50 and len(result.out.splitlines()) < 80
    assert f"{n} terms: {n} added, 0 existing tokens" in " ".join(result.out.split())
    model = SpladeEncoder.from_pretrained(out)
    assert len(model.settings.domain_terms) == n and len(model.tokenizer) == 30522 + n
