"""Token-level helpers shared by the diagnostics: how a text or term becomes token ids.

An occurrence is the term as a whole word of the text (not the start of a longer word:
``Gatro`` is not in "Gatrocraptic"), in any case where the model ignores case, found in the
characters and mapped to the token positions the model sees (after truncation to its window).
Matching token ids instead missed byte-level BPE's other split of a word at a text's start or
after a bracket, and an ``[UNK]`` term matched any unknown character.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from sparse_adapt.errors import ConfigError
from sparse_adapt.modeling.encoder import Kind, SpladeEncoder
from sparse_adapt.modeling.tokenization import LEAD_WORD, keeps_case, normalize_term, running_text_ids


def term_ids(splade: SpladeEncoder, term: str) -> list[int]:
    """The ids the model's tokenizer gives ``term`` in running text (no special tokens).

    After a space, as in a sentence: byte-level BPE splits a text's first word otherwise.
    """
    if not term.strip():
        raise ConfigError("the term is empty")
    ids = running_text_ids(splade.tokenizer, term)
    if not ids:
        raise ConfigError(f"term {term!r} tokenizes to nothing")
    return list(ids)


def base_pieces(splade: SpladeEncoder, term: str) -> list[str] | None:
    """How the subword model alone splits ``term``, ignoring tokens added by extend-vocab.

    Added tokens live beside the WordPiece/BPE vocabulary, not in it, so running the
    tokenizer's own normaliser, pre-tokeniser and subword model reproduces the split of the
    base the model was extended from; the term follows a word, as in running text (see
    :func:`running_text_ids`). ``None`` for slow tokenizers (no backend to ask).
    """
    backend = getattr(splade.tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    if backend.pre_tokenizer is None:
        words = [backend.normalizer.normalize_str(term) if backend.normalizer is not None else term]
    else:
        text = f"{LEAD_WORD} {term}"
        text = backend.normalizer.normalize_str(text) if backend.normalizer is not None else text
        words = [w for w, _ in backend.pre_tokenizer.pre_tokenize_str(text)][1:]  # without the lead word
    return [t.value for w in words for t in backend.model.tokenize(w)]


def domain_pieces(splade: SpladeEncoder) -> dict[int, dict[int, str]]:
    """Each domain token's id -> the ids of the pieces the base tokenizer split its term into
    (special tokens, an unknown piece and a bare word-start marker such as "Ġ" left out)."""
    tok = splade.tokenizer
    domain, special = set(splade.settings.domain_token_ids), set(tok.all_special_ids)
    out: dict[int, dict[int, str]] = {}
    for term in splade.settings.domain_terms:
        token = tok.convert_tokens_to_ids(term)
        split = [p for p in base_pieces(splade, term) or [] if p.strip("Ġ▁")]
        if token in domain and token not in special and len(split) > 1:
            out[token] = {i: term for i in tok.convert_tokens_to_ids(split) if i != token and i not in special}
    return out


def pieces_in(text_ids: set[int], pieces: dict[int, dict[int, str]]) -> dict[int, str]:
    """Piece id -> its domain term, for the domain tokens in ``text_ids`` (from :func:`domain_pieces`):
    a weighted token not in the text that is such a piece is the weight the term's old spelling
    kept, not an expansion the model learnt (fz10: '##rella' beside 'krellamine')."""
    return {p: term for t in text_ids & pieces.keys() for p, term in pieces[t].items() if p not in text_ids}


def term_pattern(splade: SpladeEncoder, term: str) -> re.Pattern:
    """Whole-word occurrences of ``term`` in raw text; any case where the model sees none
    (an uncased model, or a term that extend-vocab folds to one token in every case)."""
    tok = splade.tokenizer
    folded = not keeps_case(tok) or normalize_term(tok, term).casefold() in {
        t.casefold() for t in splade.settings.domain_terms}
    return re.compile(rf"(?<!\w){re.escape(term)}(?!\w)", re.IGNORECASE if folded else 0)


@dataclass
class Occurrences:
    ids: list[int]  # the text's token ids as the model encodes it (special tokens, truncation)
    spans: list[tuple[int, int]]  # half-open token spans of each occurrence the model sees
    beyond: int  # occurrences past the model's window for this kind of text


def occurrences(splade: SpladeEncoder, text: str, pattern: re.Pattern, kind: Kind) -> Occurrences:
    """Where ``pattern`` (:func:`term_pattern`) occurs in ``text``, as token spans."""
    enc = splade.tokenizer(text, truncation=True, max_length=splade.max_length(kind), return_offsets_mapping=True)
    offsets = enc["offset_mapping"]  # (start, end) characters per token; (0, 0) for special tokens
    spans, beyond = [], 0
    for match in pattern.finditer(text):
        a, b = match.span()
        hit = [i for i, (s, e) in enumerate(offsets) if e > s and s < b and e > a]
        if hit:
            spans.append((hit[0], hit[-1] + 1))
        else:
            beyond += 1
    return Occurrences(list(enc["input_ids"]), spans, beyond)


def in_text_ids(splade: SpladeEncoder, texts: Sequence[str], kind: Kind) -> list[set[int]]:
    """Per text, the set of token ids that literally occur in it (as the model sees it)."""
    out = []
    for start in range(0, len(texts), 64):
        batch = splade.tokenize(list(texts[start : start + 64]), kind)
        for ids, mask in zip(batch["input_ids"].tolist(), batch["attention_mask"].tolist()):
            out.append({i for i, m in zip(ids, mask) if m})
    return out
