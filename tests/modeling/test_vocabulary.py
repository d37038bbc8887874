import json

import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer

from corpora import GATROCRAPTIC
from sparse_adapt.data import load_domain_terms
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.modeling.tokenization import normalize_term, running_text_ids
from sparse_adapt.modeling.vocabulary import extend_vocabulary
from tests.conftest import _TINY, make_tiny_bert, row_pieces

TERMS = {"jargon": ["Gatrocraptic", "gatrocraptic", "restore-tool"], "acronyms": ["API", "OAuth2", "OAuth"]}


def _pieces(tokenizer, term):
    return tokenizer(term, add_special_tokens=False)["input_ids"]


def test_each_term_becomes_one_token_and_rows_grow_together(tiny_mlm):
    tok = tiny_mlm.tokenizer
    words = [t for ts in TERMS.values() for t in ts]
    # In running text, where byte-level BPE splits a word otherwise than at a text's start.
    before = {t: running_text_ids(tok, t) for t in words if len(running_text_ids(tok, t)) > 1}
    assert {"Gatrocraptic", "restore-tool", "OAuth2", "OAuth"} <= set(before)  # "API" is whole for WordPiece
    with torch.no_grad():  # a fresh head's bias is all zeros: any row's mean would pass
        tiny_mlm.mlm.get_output_embeddings().bias.normal_()
    old_emb = tiny_mlm.mlm.get_input_embeddings().weight.detach().clone()
    old_bias = tiny_mlm.mlm.get_output_embeddings().bias.detach().clone()
    report = extend_vocabulary(tiny_mlm, TERMS)
    tok = tiny_mlm.tokenizer  # a cased one is replaced by a copy with case rules

    added = {t.normalized for t in report.added}
    # One token for a term's case variants: an uncased normaliser lowercases, a cased
    # tokenizer gains a case rule and keeps the first spelling.
    assert sorted(a.casefold() for a in added) == sorted({t.casefold() for t in before})
    assert added == {normalize_term(tok, t) for t in before if t != "gatrocraptic"}
    n = len(tok)
    assert n == report.old_vocab_size + len(added)
    assert tiny_mlm.mlm.get_input_embeddings().weight.shape[0] == n
    assert tiny_mlm.mlm.get_output_embeddings().weight.shape[0] == n
    assert tiny_mlm.mlm.get_output_embeddings().bias.shape[0] == n

    emb = tiny_mlm.mlm.get_input_embeddings().weight
    bias = tiny_mlm.mlm.get_output_embeddings().bias
    for term in (t.term for t in report.added):
        pieces = before[term]
        (tid,) = _pieces(tok, term)
        assert _pieces(tok, term.lower()) == _pieces(tok, term.upper()) == [tid]
        assert len(pieces) > 1
        rows = row_pieces(tok, pieces)
        torch.testing.assert_close(emb[tid], old_emb[rows].mean(0))
        torch.testing.assert_close(bias[tid], old_bias[rows].mean())
    # the old rows are untouched
    torch.testing.assert_close(emb[: report.old_vocab_size], old_emb)


def test_case_variants_share_one_token_and_existing_tokens_are_domain_ids(tiny_bert):
    report = extend_vocabulary(tiny_bert, TERMS)
    tok = tiny_bert.tokenizer
    assert _pieces(tok, "Gatrocraptic") == _pieces(tok, "gatrocraptic") == _pieces(tok, "GATROCRAPTIC")
    api = tok.convert_tokens_to_ids("api")
    assert api in tiny_bert.domain_token_ids
    assert set(tiny_bert.domain_token_ids) == {t.token_id for t in report.terms}
    assert tiny_bert.settings.domain_terms["gatrocraptic"] == "jargon"
    # OAuth must not match inside OAuth2 (single_word tokens, longest match)
    assert tok.convert_ids_to_tokens(_pieces(tok, "use OAuth2 or OAuth")) == ["use", "oauth2", "or", "oauth"]


def test_a_byte_level_word_whole_only_in_running_text_is_an_existing_token():
    # The tiny RoBERTa keeps " office" whole (Ġoffice) but splits "office" at a text's start:
    # the model mostly reads the first, so the term is that token, not refused as unsplittable.
    splade = _TINY["roberta"]()
    tok = splade.tokenizer
    assert len(_pieces(tok, "office")) > 1
    (office,) = running_text_ids(tok, "office")
    report = extend_vocabulary(splade, {"jargon": ["office", "Gatrocraptic"]})
    by_term = {t.term: t for t in report.terms}
    assert (by_term["office"].added, by_term["office"].token_id) == (False, office)
    assert office in splade.domain_token_ids


def test_a_second_extension_that_moves_a_term_to_another_category_says_so(tiny_bert):
    assert extend_vocabulary(tiny_bert, TERMS).recategorised == []
    again = extend_vocabulary(tiny_bert, {"codes": ["Gatrocraptic"], "acronyms": ["API"]})
    assert again.recategorised == [("gatrocraptic", "jargon", "codes")]  # API kept its category: not listed
    assert tiny_bert.settings.domain_terms["gatrocraptic"] == "codes"


def test_a_second_extension_keeps_the_first_ones_domain_tokens(tiny_bert):
    extend_vocabulary(tiny_bert, {"jargon": ["Gatrocraptic"]})
    (first,) = running_text_ids(tiny_bert.tokenizer, "Gatrocraptic")
    extend_vocabulary(tiny_bert, {"jargon": ["Zorblatt"]})
    (second,) = running_text_ids(tiny_bert.tokenizer, "Zorblatt")
    assert {first, second} <= set(tiny_bert.domain_token_ids) and first != second
    assert set(tiny_bert.settings.domain_terms) == {"gatrocraptic", "zorblatt"}


def test_a_term_of_unknown_pieces_starts_from_the_mean_bias_of_the_tokens_that_may_fire(tiny_bert):
    """Every piece is [UNK], which says nothing of the term: the new bias is the mean over the
    tokens the model may activate, not over the special rows a saved model pins at -10000."""
    from sparse_adapt.modeling.encoder import EXCLUDED_BIAS

    bias = tiny_bert.mlm.get_output_embeddings().bias
    with torch.no_grad():
        bias.normal_()
        bias[tiny_bert.excluded_ids()] = EXCLUDED_BIAS
    allowed = tiny_bert.output_mask.nonzero()[:, 0]
    want = bias.detach()[allowed].mean().item()
    assert running_text_ids(tiny_bert.tokenizer, "☃☃") == [tiny_bert.tokenizer.unk_token_id]
    extend_vocabulary(tiny_bert, {"jargon": ["☃☃"]})
    (tid,) = running_text_ids(tiny_bert.tokenizer, "☃☃")
    assert tiny_bert.mlm.get_output_embeddings().bias[tid].item() == pytest.approx(want, abs=1e-5)


def test_a_term_that_merges_with_the_lead_word_is_read_on_its_own(tiny_bert):
    # running_text_ids reads the term after the lead word "a". An added token "a priori" swallows
    # that lead: "a priori" is one id, and cutting the lead's one id off it would leave no piece
    # at all. Then the term's own pieces ("prior", "##i") are the answer.
    tok = tiny_bert.tokenizer
    tok.add_tokens(["a priori"])
    (merged,) = tok("a priori", add_special_tokens=False)["input_ids"]
    alone = tok("priori", add_special_tokens=False)["input_ids"]
    assert merged not in alone and len(alone) == 2
    assert running_text_ids(tok, "priori") == alone


def test_a_head_padded_past_its_tokenizer_extends_into_its_free_rows_and_reloads(tmp_path):
    splade = make_tiny_bert()
    rows = splade.vocab_size + 16  # ModernBERT rounds its rows up to a multiple of 64
    splade.mlm.resize_token_embeddings(rows, mean_resizing=False)
    splade = SpladeEncoder(splade.mlm, splade.tokenizer, splade.settings)
    extend_vocabulary(splade, {"jargon": ["Gatrocraptic"]})
    assert splade.mlm.get_input_embeddings().weight.shape[0] == rows  # a free row, no growth
    out = splade.save_pretrained(tmp_path / "ext")
    plain = AutoModelForMaskedLM.from_pretrained(out)
    assert plain.config.vocab_size == rows and plain.get_output_embeddings().weight.shape[0] == rows
    assert SpladeEncoder.from_pretrained(out).encode(["Gatrocraptic metrics"]).shape[1] == len(splade.tokenizer)


def test_extend_vocab_warns_when_a_term_changes_category(tiny_bert, tmp_path, capsys):
    import json

    from sparse_adapt.cli import main

    tiny_bert.save_pretrained(tmp_path / "base")
    for name, category in (("t1", "jargon"), ("t2", "codes")):
        (tmp_path / f"{name}.json").write_text(json.dumps({category: ["Gatrocraptic"]}))
    assert main(["extend-vocab", "--base", str(tmp_path / "base"), "--terms", str(tmp_path / "t1.json"),
                 "--out", str(tmp_path / "e1")]) == 0
    assert "category" not in capsys.readouterr().err
    assert main(["extend-vocab", "--base", str(tmp_path / "e1"), "--terms", str(tmp_path / "t2.json"),
                 "--out", str(tmp_path / "e2")]) == 0
    assert "warning: gatrocraptic: category jargon (recorded by an earlier extension" in capsys.readouterr().err
    assert SpladeEncoder.from_pretrained(tmp_path / "e2").settings.domain_terms == {"gatrocraptic": "codes"}


def test_an_extension_records_the_model_it_was_before_its_first_domain_token(tiny_bert, tmp_path):
    """`train --base EXTENDED` compared with the extended model itself, whose head already
    fires the new tokens; the first extension's source is what a later train compares with."""
    from sparse_adapt.modeling.hub import model_reference

    tiny_bert.save_pretrained(tmp_path / "base")
    loaded = SpladeEncoder.from_pretrained(tmp_path / "base")
    extend_vocabulary(loaded, {"jargon": ["Gatrocraptic"]})
    assert loaded.settings.extended_from == model_reference(tmp_path / "base") == str((tmp_path / "base").resolve())
    loaded.save_pretrained(tmp_path / "e1")
    again = SpladeEncoder.from_pretrained(tmp_path / "e1")
    extend_vocabulary(again, {"codes": ["XR-7200"]})  # a second extension: still the model before any
    assert again.settings.extended_from == str((tmp_path / "base").resolve())
    extend_vocabulary(tiny_bert, {"jargon": ["Gatrocraptic"]})
    assert tiny_bert.settings.extended_from == ""  # built in memory: no folder to name


def test_a_wordpiece_entry_text_never_reaches_is_bound_not_refused(tiny_bert):
    """'...' is one WordPiece entry, but BERT's pre-tokenizer splits punctuation apart: the
    term is bound to that entry (no new row) and text then reaches it; it once crashed."""
    rows = tiny_bert.mlm.get_input_embeddings().weight.shape[0]
    entry = tiny_bert.tokenizer.convert_tokens_to_ids("...")
    assert _pieces(tiny_bert.tokenizer, "wait ...") != [_pieces(tiny_bert.tokenizer, "wait")[0], entry]
    report = extend_vocabulary(tiny_bert, {"marks": ["..."]})
    (term,) = report.terms
    assert term.bound and not term.added and term.token_id == entry
    assert tiny_bert.mlm.get_input_embeddings().weight.shape[0] == rows
    assert _pieces(tiny_bert.tokenizer, "wait ... now")[1] == entry and entry in tiny_bert.domain_token_ids
    # WordPiece marks a word's inside (##), so no other word shares the entry: nothing to warn of
    assert report.shared == [] and report.warnings("terms.json") == []


def test_tied_decoder_stays_tied_through_save_and_load(tmp_path, tiny_mlm):
    extend_vocabulary(tiny_mlm, TERMS)
    out = tiny_mlm.save_pretrained(tmp_path / "ext")
    again = SpladeEncoder.from_pretrained(out)
    emb, dec = again.mlm.get_input_embeddings().weight, again.mlm.get_output_embeddings().weight
    assert emb.data_ptr() == dec.data_ptr()
    assert again.domain_token_ids == tiny_mlm.domain_token_ids
    # plain transformers loads the directory too, with the grown vocabulary
    plain = AutoModelForMaskedLM.from_pretrained(out)
    assert plain.get_output_embeddings().weight.shape[0] == len(AutoTokenizer.from_pretrained(out))
    assert again.encode(["Gatrocraptic metrics"]).shape[1] == len(again.tokenizer)


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_untied_decoder_rows_are_initialised_from_pieces(family, tmp_path):
    splade = _TINY[family]()
    out = splade.mlm.get_output_embeddings()
    out.weight = torch.nn.Parameter(out.weight.detach().clone() * 3)  # untie
    splade.mlm.config.tie_word_embeddings = False
    with torch.no_grad():
        out.bias.normal_()  # a fresh head's bias is zeros: a bias reloaded as zeros would pass
    pieces = row_pieces(splade.tokenizer, running_text_ids(splade.tokenizer, "Gatrocraptic"))
    old_dec, old_bias = out.weight.detach().clone(), out.bias.detach().clone()
    extend_vocabulary(splade, {"j": ["Gatrocraptic"]})
    (tid,) = running_text_ids(splade.tokenizer, "Gatrocraptic")
    dec = splade.mlm.get_output_embeddings().weight
    torch.testing.assert_close(dec[tid], old_dec[pieces].mean(0))
    # saved and loaded again (BERT kept the head's bias as one tensor with the decoder's and
    # reloaded it as zeros; RoBERTa's stayed at the old size and did not load)
    again = SpladeEncoder.from_pretrained(splade.save_pretrained(tmp_path / "ext"))
    bias = again.mlm.get_output_embeddings().bias
    kept = torch.ones(len(old_bias), dtype=torch.bool)
    kept[again.excluded_ids()] = False  # special tokens: the save pins them to the exclusion bias
    torch.testing.assert_close(bias[:len(old_bias)][kept], old_bias[kept])
    torch.testing.assert_close(bias[tid], old_bias[pieces].mean())


@pytest.mark.parametrize("terms, says", [
    ({"devices": "gatrocraptic"}, "field 'devices': expected a list of terms"),  # was: one token per letter
    (["gatrocraptic"], "expected an object of category -> list of terms"),
    ({"devices": [None]}, r"field 'devices\[0\]': expected a non-empty string, got None"),
    ({"devices": []}, "no terms: every category is empty"),
])
def test_terms_given_from_python_get_the_checks_of_a_terms_file(tiny_bert, terms, says):
    from sparse_adapt.data import DataError

    rows = tiny_bert.vocab_size
    with pytest.raises(DataError, match=says):
        extend_vocabulary(tiny_bert, terms)
    assert tiny_bert.vocab_size == rows and tiny_bert.settings.domain_token_ids == []


def test_bundled_terms_file_loads():
    terms = load_domain_terms(GATROCRAPTIC.terms)
    assert "Gatrocraptic" in terms["jargon"]


@pytest.mark.slow
def test_offline_base_gatrocraptic_single_token_initialised_as_mean_of_pieces():
    splade = SpladeEncoder.from_pretrained("offline-minilm")
    pieces = _pieces(splade.tokenizer, "Gatrocraptic")
    assert len(pieces) > 1
    old = splade.mlm.get_input_embeddings().weight[pieces].detach().clone()
    extend_vocabulary(splade, load_domain_terms(GATROCRAPTIC.terms))
    (tid,) = _pieces(splade.tokenizer, "Gatrocraptic")
    torch.testing.assert_close(splade.mlm.get_input_embeddings().weight[tid], old.mean(0))
    vec = splade.encode_to_dicts(["Understanding Gatrocraptic metrics is essential for financial analysis."])[0]
    assert vec, "d21-like text must have a non-empty vector"


def test_a_term_listed_under_two_categories_is_said(tiny_bert, tmp_path, capsys):
    from sparse_adapt.cli import main

    report = extend_vocabulary(tiny_bert, {"jargon": ["Gatrocraptic", "OAuth"], "products": ["gatrocraptic"],
                                           "acronyms": ["OAuth"]})
    assert report.two_categories == [("Gatrocraptic", "jargon", "products"), ("OAuth", "jargon", "acronyms")]
    assert tiny_bert.settings.domain_terms["gatrocraptic"] == "jargon"
    terms = tmp_path / "terms.json"
    terms.write_text(json.dumps({"jargon": ["Gatrocraptic"], "products": ["GATROCRAPTIC"]}))
    base = make_tiny_bert().save_pretrained(tmp_path / "base")
    assert main(["extend-vocab", "--base", str(base), "--terms", str(terms), "--out", str(tmp_path / "ext")]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "Gatrocraptic is listed under jargon and products; one token, recorded as jargon" in err


def test_extend_vocab_never_replaces_its_base_even_with_overwrite(tmp_path, capsys):
    from sparse_adapt.cli import main

    (tmp_path / "project").mkdir()
    terms = tmp_path / "project" / "terms.json"
    terms.write_text(json.dumps({"jargon": ["Gatrocraptic"]}))
    base = make_tiny_bert().save_pretrained(tmp_path / "base")
    before = {p.relative_to(base): p.read_bytes() for p in base.rglob("*") if p.is_file()}
    assert main(["extend-vocab", "--base", str(base), "--terms", str(terms), "--out", str(base), "--overwrite"]) == 2
    assert "is also an input" in capsys.readouterr().err
    assert {p.relative_to(base): p.read_bytes() for p in base.rglob("*") if p.is_file()} == before
    # nor the folder its terms file is in, which --overwrite would replace whole, terms included
    assert main(["extend-vocab", "--base", str(base), "--terms", str(terms), "--out", str(tmp_path / "project"),
                 "--overwrite"]) == 2
    assert "holds an input" in " ".join(capsys.readouterr().err.split())
    assert json.loads(terms.read_text()) == {"jargon": ["Gatrocraptic"]}


def test_extend_vocab_carries_the_bases_recommended_settings_and_pretraining_record(tmp_path):
    """Without them, `train --base EXTENDED` used the plain defaults the README measures undoing
    the pretraining, and said nothing."""
    from sparse_adapt.cli import main
    from sparse_adapt.modeling.builtin import RECOMMENDED_FILE, recommended_settings
    from sparse_adapt.training.general import RECORD

    terms = tmp_path / "terms.json"
    terms.write_text(json.dumps({"jargon": ["Gatrocraptic"]}))
    base = make_tiny_bert().save_pretrained(tmp_path / "base")
    (base / RECOMMENDED_FILE).write_text(json.dumps({"distill": {"pres_form": "all-texts"}}))
    (base / RECORD).write_text('{"steps": 3}\n')
    assert main(["extend-vocab", "--base", str(base), "--terms", str(terms), "--out", str(tmp_path / "ext")]) == 0
    assert recommended_settings(tmp_path / "ext") == {"distill": {"pres_form": "all-texts"}}
    assert (tmp_path / "ext" / RECORD).read_text() == '{"steps": 3}\n'
    # a built-in base's recommendations, which live in code, are written out
    assert main(["extend-vocab", "--base", "offline-splade-tiny", "--terms", str(terms), "--out", str(tmp_path / "t")]) == 0
    assert recommended_settings(tmp_path / "t") == recommended_settings("offline-splade-tiny") != {}
    # a base without any leaves no file
    (base / RECOMMENDED_FILE).unlink()
    assert main(["extend-vocab", "--base", str(base), "--terms", str(terms), "--out", str(tmp_path / "plain")]) == 0
    assert not (tmp_path / "plain" / RECOMMENDED_FILE).exists()


def test_a_decomposed_term_becomes_the_composed_token_running_text_uses(tmp_path):
    """A term pasted as NFD ("Zu" + U+0308 + "rich") became a byte-level BPE token that the
    usual composed text never produced: "Zürich office" still split into byte pieces."""
    import unicodedata

    from tests.conftest import make_tiny_roberta

    nfc = "Zürich"
    path = tmp_path / "terms.json"
    path.write_text(json.dumps({"places": [unicodedata.normalize("NFD", nfc)]}), encoding="utf-8")
    terms = load_domain_terms(path)
    assert terms == {"places": [nfc]}
    splade = make_tiny_roberta()
    extend_vocabulary(splade, terms)
    [term_id] = running_text_ids(splade.tokenizer, nfc)
    assert term_id in running_text_ids(splade.tokenizer, f"the {nfc} office")


def test_a_term_holding_a_special_token_is_refused_for_that_reason():
    from sparse_adapt.data import DataError

    with pytest.raises(DataError, match=r"'\[MASK\]y' cannot be one token: .* \(it holds the special token \[MASK\]\)"):
        extend_vocabulary(make_tiny_bert(), {"jargon": ["[MASK]y"]})


def _table_rows(out: str) -> list[list[str]]:
    """The body rows of a rich table, cell by cell (the header has its own border character)."""
    return [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines() if line.count("│") > 2]


def test_extend_vocab_says_for_each_term_whether_it_was_added_or_an_existing_token(tmp_path, capsys, monkeypatch):
    from sparse_adapt.cli import main
    from sparse_adapt.cli import output

    monkeypatch.setattr(output.console, "width", 400)  # one table row per line
    terms = tmp_path / "terms.json"
    # one new word, one whole WordPiece entry, one entry text never reached before ("..." is split to dots)
    terms.write_text(json.dumps({"jargon": ["Gatrocraptic", "database", "..."]}))
    base = make_tiny_bert().save_pretrained(tmp_path / "base")
    assert main(["extend-vocab", "--base", str(base), "--terms", str(terms), "--out", str(tmp_path / "ext")]) == 0
    out = capsys.readouterr().out
    actions = {row[0]: row[-1] for row in _table_rows(out)}
    assert actions == {"Gatrocraptic": "added", "database": "existing token",
                       "...": "existing token, now used in running text"}
    assert "3 terms: 1 added, 2 existing tokens" in out and "shown" not in out


def test_extend_vocab_shows_a_bracketed_category_as_written_and_the_token_id_added(tmp_path, capsys, monkeypatch):
    """A category is any JSON key: "[b]", read as rich markup, printed as an empty cell."""
    from sparse_adapt.cli import main
    from sparse_adapt.cli import output

    monkeypatch.setattr(output.console, "width", 400)
    terms = tmp_path / "terms.json"
    terms.write_text(json.dumps({"[b]": ["Gatrocraptic"]}))
    base = make_tiny_bert().save_pretrained(tmp_path / "base")
    assert main(["extend-vocab", "--base", str(base), "--terms", str(terms), "--out", str(tmp_path / "ext")]) == 0
    [added] = SpladeEncoder.from_pretrained(tmp_path / "ext").settings.domain_token_ids
    assert [row[:3] for row in _table_rows(capsys.readouterr().out)] == [["Gatrocraptic", "[b]", str(added)]]


def test_extend_vocab_lists_the_first_50_terms_and_says_where_the_rest_are(tmp_path, capsys, monkeypatch):
    from sparse_adapt.cli import main
    from sparse_adapt.cli import output

    monkeypatch.setattr(output.console, "width", 400)
    terms = tmp_path / "terms.json"
    terms.write_text(json.dumps({"jargon": [f"zorblatt{i}" for i in range(51)]}))
    base = make_tiny_bert().save_pretrained(tmp_path / "base")
    out_dir = tmp_path / "ext"
    assert main(["extend-vocab", "--base", str(base), "--terms", str(terms), "--out", str(out_dir)]) == 0
    out = capsys.readouterr().out
    assert [row[0] for row in _table_rows(out)] == [f"zorblatt{i}" for i in range(50)]
    assert (f"51 terms: 51 added, 0 existing tokens; the first 50 shown, every term and its category is in "
            f"{out_dir}/sparse_adapt.json") in " ".join(out.split())


def test_extend_vocab_warns_of_a_bound_entry_other_words_use_inside_them(tmp_path, capsys):
    from sparse_adapt.cli import main
    from tests.conftest import make_tiny_xlmr

    terms = tmp_path / "terms.json"
    terms.write_text(json.dumps({"jargon": ["each"]}))  # SentencePiece's "each" is also inside "beach"
    base = make_tiny_xlmr().save_pretrained(tmp_path / "base")
    assert main(["extend-vocab", "--base", str(base), "--terms", str(terms), "--out", str(tmp_path / "ext")]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert f"warning: {terms}: 'each' is bound to the existing entry 'each'" in err and "inside other words" in err


def test_a_special_token_in_the_terms_is_no_domain_token_of_a_plain_base(tiny_bert):
    # [SEP] fires in every text: as a domain id it would make every text "contain" the domain
    from sparse_adapt.modeling.vocabulary import domain_token_ids

    tok = tiny_bert.tokenizer
    terms = {"jargon": ["[SEP]", "password", "Gatrocraptic"], "acronyms": ["[CLS]", "database"]}
    got = domain_token_ids(tiny_bert, terms)  # in id order, as extend records them, whatever the file's
    assert got == sorted(tok.convert_tokens_to_ids(["database", "password"])) and tok.unk_token_id not in got


def test_an_uncased_tokenizer_keeps_terms_apart_that_only_casefolding_would_join(tiny_bert):
    # BERT lowercases but keeps "ß": "großglockner" and "grossglockner" are two words to it
    report = extend_vocabulary(tiny_bert, {"places": ["Großglockner", "grossglockner"]})
    ids = [t.token_id for t in report.terms]
    assert [t.normalized for t in report.terms] == ["großglockner", "grossglockner"] and len(set(ids)) == 2
    assert tiny_bert.tokenizer("grossglockner großglockner", add_special_tokens=False)["input_ids"] == ids[::-1]


def test_an_extended_models_domain_tokens_are_its_recorded_ones_even_without_a_terms_file(tiny_bert):
    # `train --base EXTENDED` without --terms (or with another file): the domain losses still
    # target the extension's tokens, "gatrocraptic" included, which the base split into pieces
    from sparse_adapt.modeling.vocabulary import domain_token_ids

    report = extend_vocabulary(tiny_bert, TERMS)
    recorded = sorted({t.token_id for t in report.terms})
    assert domain_token_ids(tiny_bert, None) == domain_token_ids(tiny_bert, {"jargon": ["database"]}) == recorded


def test_an_entry_bound_in_two_cases_is_one_term():
    # Cased byte-level BPE: a word whole only at a text's start is bound, not added; its capitals
    # listed beside it are the same term (the case rule maps them to the entry), not a new token
    from tests.conftest import make_tiny_roberta

    splade = make_tiny_roberta()
    vocab = splade.tokenizer.get_vocab()
    word = next(w for w in sorted(vocab)
                if w.isalpha() and len(w) >= 4 and len(running_text_ids(splade.tokenizer, w)) > 1)
    (t,) = extend_vocabulary(splade, {"jargon": [word, word.upper()]}).terms
    assert t.bound and running_text_ids(splade.tokenizer, word.upper()) == [vocab[word]] == [t.token_id]


def test_binding_an_entry_alone_leaves_no_stray_word_start_piece_on_sentencepiece():
    # No new row, but the tokenizer still gains an added token: XLM-R's Metaspace put a lone "▁"
    # after it, as after an added term
    from tests.conftest import make_tiny_xlmr

    splade = make_tiny_xlmr()
    report = extend_vocabulary(splade, {"jargon": ["each"]})
    assert report.terms[0].bound and report.added == []
    tok = splade.tokenizer
    assert tok.convert_ids_to_tokens(_pieces(tok, "(each), then")[:4]) == ["▁", "(", "each", ")"]


def test_a_term_listed_twice_under_another_category_is_said_once(tiny_bert):
    report = extend_vocabulary(tiny_bert, {"jargon": ["Gatrocraptic"], "products": ["gatrocraptic", "GATROCRAPTIC"]})
    assert report.two_categories == [("Gatrocraptic", "jargon", "products")]


def test_a_cjk_term_is_refused_naming_the_normaliser_that_splits_it():
    # BERT's normaliser puts spaces around every CJK character: the reason given is that step
    from sparse_adapt.data import DataError

    with pytest.raises(DataError, match=r"cannot be one token: .* \(its normaliser changes the term\)"):
        extend_vocabulary(make_tiny_bert(), {"jargon": ["日本語"]})


def test_a_decomposed_term_given_from_python_becomes_the_composed_token():
    # extend_vocabulary called from Python, not through a terms file: the same NFC composition
    import unicodedata

    from tests.conftest import make_tiny_roberta

    nfc = "Zürich"
    splade = make_tiny_roberta()
    (t,) = extend_vocabulary(splade, {"places": [unicodedata.normalize("NFD", nfc)]}).terms
    assert t.term == nfc and t.token_id in running_text_ids(splade.tokenizer, f"the {nfc} office")


def test_the_zipf_values_quoted_beside_words_in_tokenization_are_wordfreqs():
    # The comment on EVERYDAY_ZIPF argues from example words' Zipf values, which must be on the side
    # of the bound it puts them: each is wordfreq's to the one decimal written, the bound mining's.
    import inspect
    import re

    from wordfreq import zipf_frequency

    from sparse_adapt.corpus.mining import COMMON_ZIPF
    from sparse_adapt.modeling import tokenization

    quoted = re.findall(r'"(\w+)" \((\d+\.\d)\)', inspect.getsource(tokenization))
    assert quoted
    for word, value in quoted:
        assert abs(zipf_frequency(word, "en") - float(value)) < 0.1, (word, value, zipf_frequency(word, "en"))
    assert tokenization.EVERYDAY_ZIPF == COMMON_ZIPF


def test_an_uncased_sentencepiece_tokenizer_is_replaced_by_extension_too():
    # extend_vocabulary's docstring says to take the tokenizer from ``splade`` afterwards: not only
    # for a cased tokenizer (fold_case) but for SentencePiece's prepend-always marker without case
    # (an ALBERT-like tokenizer), which prepend_once swaps for its generic-class copy.
    from tokenizers import normalizers

    from sparse_adapt.modeling.tokenization import keeps_case
    from tests.conftest import make_tiny_xlmr

    splade = make_tiny_xlmr()
    backend = splade.tokenizer.backend_tokenizer
    backend.normalizer = normalizers.Sequence([*([backend.normalizer] if backend.normalizer else []),
                                               normalizers.Lowercase()])
    before = splade.tokenizer
    assert not keeps_case(before)
    (term,) = extend_vocabulary(splade, {"jargon": ["gatrocraptic"]}).terms
    assert term.added and splade.tokenizer is not before
    assert running_text_ids(splade.tokenizer, "Gatrocraptic") == [term.token_id]
    assert term.token_id not in running_text_ids(before, "Gatrocraptic")  # the old object never saw the term
