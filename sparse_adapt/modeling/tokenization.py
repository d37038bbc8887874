"""How a tokenizer sees a term, and the rules extension adds to it.

Running-text pieces (after a space: byte-level BPE splits a text's first word otherwise),
whether a tokenizer keeps case or folds a word's space into its first piece, and the changes
:func:`~sparse_adapt.modeling.vocabulary.extend_vocabulary` makes to a tokenizer so added
terms match as typed: case rules in the normaliser (:func:`fold_case`) and SentencePiece's
word-start marker before the text only (:func:`prepend_once`), saved under the generic class
(:func:`as_generic`) so a reload keeps them.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Collection

from tokenizers import Regex, decoders, normalizers, pre_tokenizers


# A neutral word put before a term to see it as running text does: byte-level BPE gives a
# word after a space other pieces ("ĠGat", "ro") than at the start of a text ("G", "atro").
LEAD_WORD = "a"


def marks_word_starts(tokenizer) -> bool:
    """Whether the space before a word is part of its first piece (``Ġword``, ``▁word``).

    WordPiece drops spaces (and marks continuations, ``##ing``); byte-level BPE (RoBERTa)
    and SentencePiece (XLM-R) fold the space into the next piece, so a space left before an
    added token would become a piece of its own unless the token absorbs it.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or backend.pre_tokenizer is None:
        return False
    return [w for w, _ in backend.pre_tokenizer.pre_tokenize_str(f"{LEAD_WORD} b")][-1] != "b"


def running_text_ids(tokenizer, term: str) -> list[int]:
    """The ids of ``term`` where it usually stands: after a space, inside a sentence.

    The same as ``tokenizer(term)`` for WordPiece and SentencePiece; for byte-level BPE the
    pieces of `` term``, which are the ones the base has learnt for the word.
    """
    lead = tokenizer(LEAD_WORD, add_special_tokens=False)["input_ids"]
    ids = tokenizer(f"{LEAD_WORD} {term}", add_special_tokens=False)["input_ids"]
    if ids[: len(lead)] != lead:  # the lead merged into the term: no cleaner split to take
        return tokenizer(term, add_special_tokens=False)["input_ids"]
    return ids[len(lead):]


def normalize_term(tokenizer, term: str) -> str:
    """The form of ``term`` after the tokenizer's normaliser (lowercasing, accents)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    normalizer = getattr(backend, "normalizer", None) if backend is not None else None
    return normalizer.normalize_str(term) if normalizer is not None else term


def keeps_case(tokenizer) -> bool:
    """Whether the tokenizer tells ``Word`` from ``word`` (no lowercasing normaliser)."""
    return normalize_term(tokenizer, "A") == "A"


# A spelling general English uses this often (wordfreq Zipf 4, ten per million words, as
# corpus/mining.py's COMMON_ZIPF) is a word, not the term in other letters: "who" (6.3) or
# "pool" (4.6) beside a term "WHO" or "POOL"; "api" (3.7) still meets a term "API".
EVERYDAY_ZIPF = 4.0


def everyday_spellings(tokenizer, term: str) -> list[str]:
    """The other-case spellings of ``term`` (lower, Title, UPPER) that are everyday words: one
    token of the tokenizer in running text, or common English. A case rule must leave them
    alone, or the term's token would replace the word in every text ("pool" -> ``POOL``)."""
    from wordfreq import zipf_frequency

    variants = dict.fromkeys(v for v in (term.lower(), term.capitalize(), term.upper()) if v != term)
    # Letters only for wordfreq: it scores "restore-tool" as the phrase "restore tool".
    return [v for v in variants if single_token_id(tokenizer, v) is not None
            or (v.isalpha() and zipf_frequency(v.casefold(), "en") >= EVERYDAY_ZIPF)]


def _case_rule(term: str, keep: list[str] = ()) -> normalizers.Normalizer:
    # The boundaries of AddedToken(single_word=True): no word character on either side. The
    # spellings in ``keep`` are matched case-sensitively and left as they are.
    spare = "".join(rf"(?!{re.escape(k)}(?!\w))" for k in keep)
    return normalizers.Replace(Regex(rf"(?<!\w){spare}(?i:{re.escape(term)})(?!\w)"), term)


# transformers 5 rebuilds a model-specific tokenizer (RobertaTokenizer, BertTokenizer) from
# its vocabulary on loading, dropping a normaliser it did not make; the generic class loads
# tokenizer.json as written (and is the name transformers 4 gives the same thing).
GENERIC_TOKENIZER_CLASS = "PreTrainedTokenizerFast"


def fold_case(tokenizer, terms: list[str], listed: Collection[str] = ()):
    """``tokenizer`` with every other-case spelling of ``terms`` rewritten to the term before
    tokenization (its normaliser gains one rule per term that has case), except spellings that
    are everyday words (:func:`everyday_spellings`) and not ``listed`` (the terms file's own
    spellings: ``about`` listed beside ``ABOUT`` is the term); reloaded as the
    generic class when rules were added, so that a saved copy keeps them."""
    listed = set(listed)
    rules = [_case_rule(t, [v for v in everyday_spellings(tokenizer, t) if v not in listed])
             for t in terms if t.lower() != t.upper()]
    if not rules:
        return tokenizer
    _append_normalizers(tokenizer.backend_tokenizer, rules)
    return as_generic(tokenizer)


def prepend_once(tokenizer):
    """``tokenizer`` whose SentencePiece word-start marker goes before the text, not before
    every part of it that follows an added token: with ``Metaspace(prepend_scheme="always")``
    (XLM-R, ALBERT, DeBERTa-v2) "(Gatrocraptic)" became ``▁ ( Gatrocraptic ▁ )``, a stray
    ``▁`` the model saw after every added term not followed by a space. Text without added
    tokens tokenizes as before. transformers 5's XLM-R splits on whitespace before its
    Metaspace; a normaliser collapsing whitespace runs and stripping the end does that part.
    Unchanged (same object) for any other pre-tokenizer."""
    backend = tokenizer.backend_tokenizer
    if backend.pre_tokenizer is None:
        return tokenizer
    state = json.loads(backend.pre_tokenizer.__getstate__())
    steps = state["pretokenizers"] if state.get("type") == "Sequence" else [state]
    kinds = [step.get("type") for step in steps]
    if kinds not in (["Metaspace"], ["WhitespaceSplit", "Metaspace"]) or steps[-1].get("prepend_scheme") != "always":
        return tokenizer
    meta = {"replacement": steps[-1]["replacement"], "prepend_scheme": "first", "split": steps[-1].get("split", True)}
    backend.pre_tokenizer = pre_tokenizers.Metaspace(**meta)
    backend.decoder = decoders.Metaspace(**meta)
    if kinds[0] == "WhitespaceSplit":
        _append_normalizers(backend, [normalizers.Replace(Regex(r"\s+"), " "), normalizers.Strip(left=False, right=True)])
    return as_generic(tokenizer)


def _append_normalizers(backend, extra: list) -> None:
    """Run ``extra`` after the backend's own normaliser (if any)."""
    before = [backend.normalizer] if backend.normalizer is not None else []
    backend.normalizer = normalizers.Sequence([*before, *extra])


def as_generic(tokenizer):
    """``tokenizer`` as the generic class, so a saved copy keeps a changed normaliser or
    pre-tokenizer (see :data:`GENERIC_TOKENIZER_CLASS`)."""
    if type(tokenizer).__name__ in ("TokenizersBackend", GENERIC_TOKENIZER_CLASS):
        return tokenizer
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory() as tmp:
        tokenizer.save_pretrained(tmp)
        config = Path(tmp) / "tokenizer_config.json"
        settings = json.loads(config.read_text(encoding="utf-8"))
        config.write_text(json.dumps({**settings, "tokenizer_class": GENERIC_TOKENIZER_CLASS}), encoding="utf-8")
        return AutoTokenizer.from_pretrained(tmp)


def single_token_id(tokenizer, term: str) -> int | None:
    """The id of ``term`` when the tokenizer already keeps it whole (``api``), else None.

    Whole in running text: byte-level BPE may keep ``XR`` whole at a text's start and still
    split `` XR``, and the model mostly sees the second.
    """
    ids = running_text_ids(tokenizer, term)
    return ids[0] if len(ids) == 1 and ids[0] != tokenizer.unk_token_id else None


# Heads wider than their tokenizer by design: ModernBERT pads its rows to a multiple of 64,
# DeBERTa-v3 and T5 keep spare rows, bert-base-italian-xxl has 1,000 more than its 31,102
# tokens (97% used). A tokenizer covering under half the head is another model's.
MIN_ROWS_USED = 0.5


def check_head_fits(rows: int, tokenizer, name: str) -> None:
    """The MLM head's ``rows`` fit ``tokenizer`` of the model ``name``: fewer rows than tokens
    indexes past the head; a tokenizer covering under half of them is not the model's own (a
    30,522-row BERT head with an 800-token tokenizer encoded plausible vectors of the wrong words)."""
    from sparse_adapt.errors import ModelLoadError

    if rows < len(tokenizer) or len(tokenizer) < MIN_ROWS_USED * rows:
        raise ModelLoadError(f"{name}: the MLM head has {rows} rows but the tokenizer has {len(tokenizer)} tokens: "
                             "the tokenizer is not this model's own")
