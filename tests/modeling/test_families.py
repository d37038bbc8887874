"""Bases whose tokenizer folds the space before a word into its first piece.

Byte-level BPE (RoBERTa: ``Ġword``) and SentencePiece (XLM-R: ``▁word``), against the
WordPiece of BERT. Their tokenizers are trained in the fixtures on the bundled documents.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer, RobertaConfig, RobertaModel

from corpora import GATROCRAPTIC
from diagnostics.tokens import base_pieces
from sparse_adapt.corpus.mining import score_candidates
from sparse_adapt.data import load_documents
from sparse_adapt.modeling.base import build_mlm_from_encoder
from sparse_adapt.modeling.encoder import PositionLimitWarning, SpladeEncoder, SpladeSettings
from sparse_adapt.modeling.heads import head_support, max_pieces
from sparse_adapt.modeling.onnx import OnnxSpladeEncoder, export_onnx
from sparse_adapt.modeling.tokenization import keeps_case, marks_word_starts, running_text_ids
from sparse_adapt.modeling.vocabulary import extend_vocabulary
from sparse_adapt.training.config_files import config_from_dict
from sparse_adapt.training.pipeline import run_pipeline
from sparse_adapt.training.stages import EXPERIMENTS
from tests.conftest import make_tiny_bert, make_tiny_roberta, row_pieces

TERMS = {"jargon": ["Gatrocraptic", "restore-tool"], "codes": ["XR-7200"]}
def test_the_word_start_marker_is_detected(tiny_bpe):
    assert marks_word_starts(tiny_bpe.tokenizer)
    assert not marks_word_starts(make_tiny_bert().tokenizer)


def test_a_tokenizer_without_a_pre_tokenizer_marks_no_word_starts():
    # A tokenizer.json with "pre_tokenizer": null (a plain word-level vocabulary) is read as
    # WordPiece-like, not an AttributeError from the missing step.
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(WordLevel({"[UNK]": 0, "a": 1, "b": 2}, unk_token="[UNK]"))
    assert backend.pre_tokenizer is None
    assert not marks_word_starts(PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]"))


def test_byte_level_bpe_splits_a_texts_first_word_otherwise():
    # Why the pieces of a term are taken after a space: the premise of the tests below.
    tok = make_tiny_roberta().tokenizer
    alone = tok("Gatrocraptic", add_special_tokens=False)["input_ids"]
    assert running_text_ids(tok, "Gatrocraptic") != alone
    assert tok.convert_ids_to_tokens(running_text_ids(tok, "Gatrocraptic"))[0].startswith("Ġ")


def _ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def test_an_added_term_takes_the_space_before_it(tiny_bpe, tmp_path):
    report = extend_vocabulary(tiny_bpe, TERMS)
    tok = tiny_bpe.tokenizer
    assert {t.term for t in report.added} == {"Gatrocraptic", "restore-tool", "XR-7200"}
    reloaded = AutoTokenizer.from_pretrained(tiny_bpe.save_pretrained(tmp_path / "ext"))
    for t in report.added:
        for tokenizer in (tok, reloaded):
            # Without the space taken, "see " ends in a piece of its own ("Ġ" or "▁").
            assert _ids(tokenizer, f"see {t.term} now") == _ids(tokenizer, "see") + [t.token_id] + _ids(tokenizer, " now")
            assert _ids(tokenizer, t.term) == [t.token_id]  # at a text's start too
    # "restore-tool" must not match inside a longer word (single_word)
    assert report.added[1].token_id not in _ids(tok, "see restore-tools")


def test_new_rows_start_from_the_pieces_of_running_text(tiny_bpe):
    tok = tiny_bpe.tokenizer
    pieces = running_text_ids(tok, "Gatrocraptic")
    old_emb = tiny_bpe.mlm.get_input_embeddings().weight.detach().clone()
    old_bias = tiny_bpe.mlm.get_output_embeddings().bias.detach().clone()
    report = extend_vocabulary(tiny_bpe, {"jargon": ["Gatrocraptic"]})
    (added,) = report.added
    assert added.pieces == tok.convert_ids_to_tokens(pieces)
    rows = row_pieces(tok, pieces)
    torch.testing.assert_close(tiny_bpe.mlm.get_input_embeddings().weight[added.token_id], old_emb[rows].mean(0))
    torch.testing.assert_close(tiny_bpe.mlm.get_output_embeddings().bias[added.token_id], old_bias[rows].mean())


def test_a_word_whole_only_at_a_texts_start_is_bound_not_added():
    splade = make_tiny_roberta()
    tok = splade.tokenizer
    vocab = tok.get_vocab()
    rows = splade.mlm.get_input_embeddings().weight.shape[0]
    word = next(
        w for w in sorted(vocab) if w.isalpha() and len(w) >= 4 and len(running_text_ids(tok, w)) > 1
    )  # a vocabulary entry byte-level BPE only uses for the first word of a text
    report = extend_vocabulary(splade, {"jargon": [word]})
    tok = splade.tokenizer  # with the term's case rule: a copy of the generic class
    (t,) = report.terms
    assert t.bound and not t.added and t.token_id == vocab[word]
    assert running_text_ids(tok, word) == [t.token_id] == splade.domain_token_ids
    assert splade.mlm.get_input_embeddings().weight.shape[0] == rows and len(tok) == len(vocab)


def _variants(term: str) -> list[str]:
    return [term.lower(), term.upper(), f"see {term.lower()} now", f"({term.upper()})"]


def test_an_added_term_matches_in_any_case_on_a_cased_tokenizer(tiny_bpe, tmp_path):
    """A user types "gatrocraptic"; the corpus says "Gatrocraptic": one token for both, in this
    process, after saving, and in sentence-transformers (which reads tokenizer.json)."""
    from sentence_transformers import SparseEncoder

    assert keeps_case(tiny_bpe.tokenizer)
    report = extend_vocabulary(tiny_bpe, {"jargon": ["Gatrocraptic", "gatrocraptic"], "codes": ["XR-7200"]})
    assert [t.term for t in report.terms] == ["Gatrocraptic", "XR-7200"]  # a case variant is the same term
    out = tiny_bpe.save_pretrained(tmp_path / "ext")
    loaded = SpladeEncoder.from_pretrained(out)
    for t in report.terms:
        for tok in (tiny_bpe.tokenizer, loaded.tokenizer, AutoTokenizer.from_pretrained(out)):
            for text in _variants(t.term):
                assert t.token_id in _ids(tok, text), (type(tok).__name__, text)
            assert t.token_id not in _ids(tok, f"see {t.term.lower()}s now")  # not inside a longer word
    lower, written = "a gatrocraptic fault on xr-7200", "a Gatrocraptic fault on XR-7200"
    assert _ids(loaded.tokenizer, lower) == _ids(loaded.tokenizer, written)
    st = SparseEncoder(str(out), device="cpu")
    np.testing.assert_allclose(st.encode_query([lower]).to_dense().numpy(), loaded.encode([written], "query").toarray(), atol=1e-5)


def test_a_case_rule_rewrites_the_term_only_as_a_whole_word():
    # The term's letters inside a longer word ("preZORBLATT", "ZORBLATTS") are another word: a
    # rule matching there would splice the term's token into it.
    from sparse_adapt.modeling.tokenization import fold_case, normalize_term

    tok = fold_case(make_tiny_roberta().tokenizer, ["Zorblatt"])
    assert normalize_term(tok, "see ZORBLATT, zorblatt.") == "see Zorblatt, Zorblatt."
    assert normalize_term(tok, "preZORBLATT ZORBLATTS") == "preZORBLATT ZORBLATTS"


def test_words_of_the_base_vocabulary_keep_their_case(tiny_bpe):
    tok = tiny_bpe.tokenizer
    word = next(  # a word the base keeps whole in running text
        w for w in (v[1:] for v in sorted(tok.get_vocab()) if v[:1] in "Ġ▁")
        if len(w) >= 4 and w.isalpha() and len(running_text_ids(tok, w)) == 1
    )
    before = {text: _ids(tok, text) for text in (f"see {word.upper()}", f"see {word.title()}", f"see {word.lower()}")}
    report = extend_vocabulary(tiny_bpe, {"jargon": [word, "Gatrocraptic"]})
    assert not report.terms[0].added
    assert {text: _ids(tiny_bpe.tokenizer, text) for text in before} == before


def test_a_term_in_capitals_leaves_the_everyday_word_of_its_letters_alone(tiny_bpe, tmp_path):
    """A term ``POOL`` whose lower case is a word of the base once rewrote every "pool" of every
    text to the domain token; ``WHO``-like terms (common English in several pieces) likewise."""
    tok = tiny_bpe.tokenizer
    word = next(  # a word the base keeps whole in running text, absent in capitals
        w for w in (v[1:] for v in sorted(tok.get_vocab()) if v[:1] in "Ġ▁")
        if len(w) >= 4 and w.isalpha() and w.islower() and len(running_text_ids(tok, w)) == 1
        and len(running_text_ids(tok, w.upper())) > 1
    )
    common = next(w for w in ("government", "between", "through", "because", "people") if len(running_text_ids(tok, w)) > 1)
    texts = [f"see the {word} now", f"{word.title()} is here", f"{common} them", f"{common.title()} them"]
    before = {text: _ids(tok, text) for text in texts}
    report = extend_vocabulary(tiny_bpe, {"acronyms": [word.upper(), common.upper()]})
    assert all(t.added for t in report.terms)
    saved = SpladeEncoder.from_pretrained(tiny_bpe.save_pretrained(tmp_path / "ext")).tokenizer
    for t in (tiny_bpe.tokenizer, saved):
        assert {text: _ids(t, text) for text in texts} == before
        for x in report.terms:  # the term itself, and spellings no word uses, are still the term
            for spelling in (x.term, x.term[0].lower() + x.term[1:]):
                assert x.token_id in _ids(t, f"see {spelling} now"), spelling


def test_an_everyday_spelling_the_terms_file_lists_is_the_term(tiny_bpe):
    """Listed beside ``WORD``, ``word`` is the user's own spelling of the term, not a word to spare."""
    tok = tiny_bpe.tokenizer
    word = next(
        w for w in (v[1:] for v in sorted(tok.get_vocab()) if v[:1] in "Ġ▁")
        if len(w) >= 4 and w.isalpha() and w.islower() and len(running_text_ids(tok, w)) == 1
        and len(running_text_ids(tok, w.upper())) > 1
    )
    report = extend_vocabulary(tiny_bpe, {"acronyms": [word.upper(), word]})
    (term,) = report.terms
    assert term.token_id in _ids(tiny_bpe.tokenizer, f"see {word} now")
    assert report.two_categories == []


def test_an_uncased_tokenizer_is_left_as_it_was():
    splade = make_tiny_bert()
    tok, normalizer = splade.tokenizer, splade.tokenizer.backend_tokenizer.normalizer.__getstate__()
    assert not keeps_case(tok)
    extend_vocabulary(splade, TERMS)
    assert splade.tokenizer is tok and tok.backend_tokenizer.normalizer.__getstate__() == normalizer


def test_mining_counts_the_pieces_of_running_text():
    tok = make_tiny_roberta().tokenizer
    docs = load_documents(GATROCRAPTIC.docs)
    (cand,) = [c for c in score_candidates(docs, tok) if c.term == "Gatrocraptic"]
    assert cand.pieces == tok.convert_ids_to_tokens(running_text_ids(tok, "Gatrocraptic"))


def test_diagnose_shows_the_split_of_the_base(tiny_bpe):
    before = tiny_bpe.tokenizer.convert_ids_to_tokens(running_text_ids(tiny_bpe.tokenizer, "Gatrocraptic"))
    extend_vocabulary(tiny_bpe, TERMS)
    assert base_pieces(tiny_bpe, "Gatrocraptic") == before


def test_lengths_past_the_position_embeddings_are_lowered_with_a_warning():
    splade = make_tiny_roberta()  # 130 positions, numbered from pad + 1 = 2: 128 pieces
    assert max_pieces(splade.mlm) == 128
    with pytest.warns(PositionLimitWarning, match="doc_max_length 300 .* 128 pieces"):
        lowered = SpladeEncoder(splade.mlm, splade.tokenizer, SpladeSettings(doc_max_length=300))
    assert lowered.settings.doc_max_length == 128 and lowered.settings.query_max_length == 64
    vec = lowered.encode(["relay " * 400])  # past the limit before: an IndexError inside the model
    assert vec.nnz > 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", PositionLimitWarning)
        default = SpladeEncoder(splade.mlm, splade.tokenizer, SpladeSettings())  # 256 was no one's choice
        assert default.settings.doc_max_length == 128


def test_a_headless_roberta_gets_an_exact_identity_head():
    torch.manual_seed(0)
    enc = RobertaModel(RobertaConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=34, pad_token_id=1)).eval()
    with torch.no_grad():
        for p in enc.parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.3)
    ids = torch.randint(3, 50, (2, 7))
    mask = torch.ones_like(ids)
    with torch.no_grad():
        h = enc(input_ids=ids, attention_mask=mask).last_hidden_state  # (2, 7, 16)
        expected = h @ enc.get_input_embeddings().weight.T - 2.0
        mlm = build_mlm_from_encoder(enc, bias=-2.0)
        got = mlm(input_ids=ids, attention_mask=mask).logits
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert head_support(mlm).parts is not None


def test_extended_model_loads_in_plain_transformers_and_onnx_runtime(tiny_bpe, tmp_path):
    extend_vocabulary(tiny_bpe, TERMS)
    out = tiny_bpe.save_pretrained(tmp_path / "ext")
    plain = AutoModelForMaskedLM.from_pretrained(out)
    assert plain.get_output_embeddings().weight.shape[0] == len(tiny_bpe.tokenizer)
    texts = ["the Gatrocraptic relay", "XR-7200 firmware and restore-tool"]
    meta = export_onnx(tiny_bpe, tmp_path / "onnx")  # verifies the graph against PyTorch itself
    onnx = OnnxSpladeEncoder(tmp_path / "onnx")
    assert meta.vocab_size == len(tiny_bpe.tokenizer)
    np.testing.assert_allclose(onnx.encode(texts, "document").toarray(), tiny_bpe.encode(texts).toarray(), atol=1e-4)


def test_the_staged_pipeline_runs_on_a_byte_level_bpe_base(tmp_path):
    base = make_tiny_roberta().save_pretrained(tmp_path / "base")
    docs = [
        {"doc_id": "d1", "text": "Zorblatt metrics track spending across departments."},
        {"doc_id": "d2", "text": "Install the agent with apt-get and check the API."},
        {"doc_id": "d3", "text": "A Zorblatt review of budgets each fiscal quarter."},
    ]
    train = [{"qid": "q1", "query": "monitoring company spending", "doc_ids": ["d1", "d2"],
              "doc_texts": [docs[0]["text"], docs[1]["text"]], "teacher_scores": [10.0, -8.0]}]
    dictionary = [{"term": "Zorblatt", "definition": "the tracking of corporate spending", "examples": ["a Zorblatt review"]}]

    def jsonl(name, rows):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        return tmp_path / name

    (tmp_path / "terms.json").write_text(json.dumps({"jargon": ["Zorblatt"]}), encoding="utf-8")
    small = {s: {"epochs": 1, "batch_size": 2, "lr": 1e-3} for s in ("warmup", "dictionary", "distill")}
    final = run_pipeline(
        base=str(base), out=tmp_path / "run", stages=EXPERIMENTS["H4"], config=config_from_dict(small), seed=0,
        corpus=jsonl("docs.jsonl", docs), terms=tmp_path / "terms.json", dictionary=jsonl("dict.jsonl", dictionary),
        train=jsonl("train.jsonl", train),
    )
    model = SpladeEncoder.from_pretrained(final)
    zid = model.tokenizer.convert_tokens_to_ids("Zorblatt")
    assert running_text_ids(model.tokenizer, "Zorblatt") == [zid] and model.domain_token_ids == [zid]
    tok = model.tokenizer
    assert _ids(tok, "A Zorblatt review") == _ids(tok, "A") + [zid] + _ids(tok, " review")
    assert np.isfinite(model.encode(["A Zorblatt review"]).toarray()).all()


def test_a_cased_wordpiece_tokenizer_gets_the_case_rules_too(tmp_path):
    from transformers import BertTokenizer

    splade = make_tiny_bert()
    splade.tokenizer = BertTokenizer(vocab=splade.tokenizer.get_vocab(), do_lower_case=False)
    assert keeps_case(splade.tokenizer)
    (t,) = extend_vocabulary(splade, {"codes": ["XR-7200"]}).terms
    out = splade.save_pretrained(tmp_path / "cased")
    for tok in (splade.tokenizer, SpladeEncoder.from_pretrained(out).tokenizer):
        assert _ids(tok, "see xr-7200 now") == _ids(tok, "see") + [t.token_id] + _ids(tok, "now")


def test_an_extended_untied_head_saves_and_reloads_as_it_was(tiny_mlm, tmp_path):
    """Untied (tie_word_embeddings false), BERT's extended decoder bias once reloaded as zeros
    and RoBERTa's saved model would not load at all."""
    cfg = tiny_mlm.mlm.config.to_dict()
    cfg["tie_word_embeddings"] = False
    torch.manual_seed(1)
    mlm = type(tiny_mlm.mlm)(type(tiny_mlm.mlm.config).from_dict(cfg)).eval()
    with torch.no_grad():
        mlm.get_output_embeddings().bias.copy_(torch.randn(mlm.get_output_embeddings().bias.shape))
    base = SpladeEncoder(mlm, tiny_mlm.tokenizer, tiny_mlm.settings).save_pretrained(tmp_path / "base")
    splade = SpladeEncoder.from_pretrained(base)
    assert splade.mlm.get_output_embeddings().weight.data_ptr() != splade.mlm.get_input_embeddings().weight.data_ptr()
    extend_vocabulary(splade, {"jargon": ["Gatrocraptic"]})
    saved = splade.save_pretrained(tmp_path / "ext")
    texts = ["a gatrocraptic fault", "Gatrocraptic metrics rise in the pool"]
    for loaded in (SpladeEncoder.from_pretrained(saved), AutoModelForMaskedLM.from_pretrained(saved)):
        mlm_loaded = loaded.mlm if isinstance(loaded, SpladeEncoder) else loaded
        for name, value in splade.mlm.state_dict().items():
            torch.testing.assert_close(mlm_loaded.state_dict()[name], value, msg=name)
    np.testing.assert_allclose(SpladeEncoder.from_pretrained(saved).encode(texts).toarray(), splade.encode(texts).toarray(), atol=1e-6)


def test_a_head_padded_past_its_tokenizer_takes_new_terms_in_its_free_rows(tiny_mlm, tmp_path):
    """Rows rounded up to a multiple of 64 (ModernBERT's 50368 for ~50280 tokens): extension
    once stopped with "collides with an existing row"."""
    tok = tiny_mlm.tokenizer
    cfg = tiny_mlm.mlm.config.to_dict()
    rows = cfg["vocab_size"] = (len(tok) // 64 + 1) * 64
    torch.manual_seed(0)
    mlm = type(tiny_mlm.mlm)(type(tiny_mlm.mlm.config).from_dict(cfg)).eval()
    splade = SpladeEncoder(mlm, tok, tiny_mlm.settings)
    old_emb = mlm.get_input_embeddings().weight.detach().clone()
    pieces = running_text_ids(tok, "Gatrocraptic")
    report = extend_vocabulary(splade, {"jargon": ["Gatrocraptic"]})
    (term,) = report.added
    assert report.old_vocab_size <= term.token_id < rows  # a free row, no resize
    emb = splade.mlm.get_input_embeddings().weight
    assert emb.shape[0] == rows == splade.mlm.config.vocab_size
    torch.testing.assert_close(emb[term.token_id], old_emb[row_pieces(tok, pieces)].mean(0))
    torch.testing.assert_close(emb[: report.old_vocab_size], old_emb[: report.old_vocab_size])
    loaded = SpladeEncoder.from_pretrained(splade.save_pretrained(tmp_path / "ext"))
    assert term.token_id in _ids(loaded.tokenizer, "see Gatrocraptic now")
    text = ["a Gatrocraptic fault"]
    np.testing.assert_allclose(loaded.encode(text).toarray(), splade.encode(text).toarray(), atol=1e-6)
    assert splade.encode(text).shape[1] == len(splade.tokenizer)  # the term's id inside vectors, padding outside
    # More terms than free rows: the head grows past them.
    many = {"jargon": [f"Zorblat{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(rows - len(loaded.tokenizer) + 3)]}
    more = extend_vocabulary(loaded, many)
    assert loaded.mlm.get_input_embeddings().weight.shape[0] == len(loaded.tokenizer) > rows
    assert max(t.token_id for t in more.added) == len(loaded.tokenizer) - 1


def test_warmup_windows_keep_every_term_whole_and_re_tokenise_to_their_length(tiny_mlm):
    """Windows started at a piece's reported start: after a case rule's Replace, tokenizers
    report "Gatrocraptic" at a text's start or after "(" as starting at its last letter, so the
    window began with "c" and the term was lost; a byte-level first word also re-tokenised
    as a text-initial word, longer than the window it was cut for."""
    from sparse_adapt.training.mlm_data import ListTexts, WindowedTexts

    extend_vocabulary(tiny_mlm, {"jargon": ["Gatrocraptic"]})
    tok = tiny_mlm.tokenizer
    (term,) = tiny_mlm.settings.domain_token_ids
    text = " ".join(f"Gatrocraptic metrics rise in quarter {i} and budgets (Gatrocraptic) follow them" for i in range(6))
    windows = WindowedTexts(ListTexts([text]), tok, max_length=12)
    assert len(windows) > 3
    pieces = [tok(windows.text(w), add_special_tokens=False)["input_ids"] for w in range(len(windows))]
    assert sum(p.count(term) for p in pieces) == _ids(tok, text).count(term) == 12
    assert [len(p) + tok.num_special_tokens_to_add() for p in pieces] == windows.lengths.tolist()
    assert all(len(p) + tok.num_special_tokens_to_add() <= 12 for p in pieces)


def test_a_bound_entry_that_other_words_use_inside_them_is_said():
    from tests.conftest import make_tiny_xlmr

    splade = make_tiny_xlmr()
    report = extend_vocabulary(splade, {"jargon": ["each"]})
    (t,) = report.terms
    assert t.bound and report.shared == [t]
    assert t.token_id in _ids(splade.tokenizer, "the beach")  # why: the id fires inside "beach"
    [line] = report.warnings("terms.json")
    assert line.startswith("terms.json: 'each' is bound to the existing entry 'each'") and "inside other words" in line
    wordpiece = extend_vocabulary(make_tiny_bert(), {"jargon": ["..."]})
    assert wordpiece.terms[0].bound and wordpiece.shared == [] and wordpiece.warnings("terms.json") == []


def test_no_stray_word_start_piece_follows_an_added_term_on_sentencepiece(tmp_path):
    """Metaspace prepended "▁" to every part of a text after an added token: "(Gatrocraptic)"
    was ▁ ( Gatrocraptic ▁ ), a lone "▁" after every term not followed by a space."""
    import copy

    from tests.conftest import make_tiny_xlmr

    splade = make_tiny_xlmr()
    base = copy.deepcopy(splade.tokenizer)
    extend_vocabulary(splade, {"jargon": ["Gatrocraptic"], "codes": ["7200-42"]})
    out = splade.save_pretrained(tmp_path / "ext")
    plain = [d.text for d in load_documents(GATROCRAPTIC.docs) if "gatrocraptic" not in d.text.casefold()]
    plain += ["", "x", "  lead and trail  ", "tabs\tand\nnewlines  double", "(parens), then."]
    for tok in (splade.tokenizer, SpladeEncoder.from_pretrained(out).tokenizer, AutoTokenizer.from_pretrained(out)):
        assert tok.convert_ids_to_tokens(_ids(tok, "(Gatrocraptic)")) == ["▁", "(", "Gatrocraptic", ")"]
        assert tok.convert_ids_to_tokens(_ids(tok, "7200-42, then"))[:2] == ["7200-42", ","]
        assert [_ids(tok, t) for t in plain] == [_ids(base, t) for t in plain]  # text without terms as before


def test_a_new_row_leaves_out_unknown_and_bare_word_start_pieces():
    from tests.conftest import make_tiny_xlmr

    splade = make_tiny_xlmr()
    tok = splade.tokenizer
    pieces = running_text_ids(tok, "Ärztekammer")
    names = tok.convert_ids_to_tokens(pieces)
    assert names[:2] == ["▁", tok.unk_token]  # the premise: "Ä" is not in the tiny vocabulary
    old_emb = splade.mlm.get_input_embeddings().weight.detach().clone()
    (t,) = extend_vocabulary(splade, {"jargon": ["Ärztekammer"]}).added
    torch.testing.assert_close(splade.mlm.get_input_embeddings().weight[t.token_id], old_emb[pieces[2:]].mean(0))


def test_a_spelling_exactly_as_common_as_the_everyday_bound_is_an_everyday_word(monkeypatch):
    import wordfreq

    from sparse_adapt.modeling.tokenization import EVERYDAY_ZIPF, everyday_spellings

    # Not whole in the tiny WordPiece vocabulary, so only the word frequency decides.
    tok = make_tiny_bert().tokenizer
    assert len(running_text_ids(tok, "zorblatt")) > 1
    monkeypatch.setattr(wordfreq, "zipf_frequency", lambda word, lang: EVERYDAY_ZIPF)
    assert everyday_spellings(tok, "Zorblatt") == ["zorblatt", "ZORBLATT"]
    monkeypatch.setattr(wordfreq, "zipf_frequency", lambda word, lang: EVERYDAY_ZIPF - 0.01)
    assert everyday_spellings(tok, "Zorblatt") == []


def test_a_subclass_of_a_registered_masked_lm_uses_its_entry_and_a_non_linear_decoder_is_refused():
    from torch import nn

    from sparse_adapt.modeling.heads import HEADS, family_of

    class CustomBert(type(make_tiny_bert().mlm)):  # a user's own subclass, not registered itself
        pass

    mlm = make_tiny_bert().mlm
    custom = CustomBert(mlm.config)
    assert family_of(custom) is HEADS[type(mlm)]
    assert head_support(custom).parts is not None and head_support(custom).reason == ""

    class Projection(nn.Module):  # the vocabulary projection, but no nn.Linear to run on selected rows
        def __init__(self, linear):
            super().__init__()
            self.linear = linear

        def forward(self, h):
            return self.linear(h)

    custom.cls.predictions.decoder = Projection(custom.cls.predictions.decoder)
    support = head_support(custom)
    assert support.parts is None
    assert support.reason == "CustomBert's output embeddings are not an nn.Linear"


@pytest.mark.parametrize("module", ["heads", "hub", "interop", "onnx", "tokenization", "vectors", "vocabulary"])
def test_the_names_and_files_these_modules_docstrings_point_to_exist(module):
    # A renamed function, constant or file leaves a cross-reference behind that no import checks:
    # Sphinx roles (:func:`x`), another module's ``encoder.NAME`` and ``pooling.py``-style paths.
    import importlib
    import inspect
    import pkgutil
    import re
    from pathlib import Path

    import sparse_adapt
    import sparse_adapt.modeling as modeling

    mod = importlib.import_module(f"sparse_adapt.modeling.{module}")
    source = inspect.getsource(mod)
    siblings = {m.name for m in pkgutil.iter_modules(modeling.__path__)} - {module}
    missing = []
    for ref in re.findall(r":(?:func|data|class|meth|attr):`~?([\w.]+)`", source):
        parts = ref.split(".")
        obj, rest = mod, parts
        if parts[0] == "sparse_adapt":  # the longest prefix that imports, then attributes
            for cut in range(len(parts), 0, -1):
                try:
                    obj, rest = importlib.import_module(".".join(parts[:cut])), parts[cut:]
                    break
                except ImportError:
                    continue
        for part in rest:
            obj = getattr(obj, part, None)
        if obj is None:
            missing.append(ref)
    for owner, name in re.findall(r"``([a-z_]+)\.([A-Za-z_]\w*)``", source):
        if owner in siblings and name != "py":  # ``encoder.EXCLUDED_BIAS``, not ``pooling.py``
            if not hasattr(importlib.import_module(f"sparse_adapt.modeling.{owner}"), name):
                missing.append(f"{owner}.{name}")
    roots = (Path(modeling.__file__).parent, Path(sparse_adapt.__file__).parent)
    for path in re.findall(r"``([\w/]+\.py)``", source):
        if not any((root / path).is_file() for root in roots):
            missing.append(path)
    assert not missing, f"{module}.py points to {missing}"
