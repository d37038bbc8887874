"""Token-level helpers shared by the diagnostics: how a text or term becomes token ids.

Occurrences are found on token ids, not characters, so "where the term occurs" means
exactly the positions the model sees (after truncation to the document window).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Sequence

from sparse_adapt.errors import ConfigError
from sparse_adapt.modeling.encoder import Kind, SpladeEncoder
from sparse_adapt.modeling.vocabulary import LEAD_WORD, running_text_ids


@contextmanager
def eval_mode(splade: SpladeEncoder):
    """Dropout off for the diagnosis (logits must be the model's deterministic ones);
    the caller's train/eval mode is restored afterwards."""
    was_training = splade.training
    splade.eval()
    try:
        yield splade
    finally:
        splade.train(was_training)


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


def input_ids(splade: SpladeEncoder, text: str, kind: Kind) -> list[int]:
    """Token ids of one text exactly as the model encodes it (special tokens, truncation)."""
    return splade.tokenize([text], kind)["input_ids"][0].tolist()


def find_spans(ids: Sequence[int], pattern: Sequence[int]) -> list[tuple[int, int]]:
    """Half-open ``(start, end)`` spans where ``pattern`` occurs in ``ids`` (non-overlapping)."""
    k = len(pattern)
    spans, i = [], 0
    pattern = list(pattern)
    while k and i + k <= len(ids):
        if list(ids[i : i + k]) == pattern:
            spans.append((i, i + k))
            i += k
        else:
            i += 1
    return spans


def in_text_ids(splade: SpladeEncoder, texts: Sequence[str], kind: Kind) -> list[set[int]]:
    """Per text, the set of token ids that literally occur in it (as the model sees it)."""
    out = []
    for start in range(0, len(texts), 64):
        batch = splade.tokenize(list(texts[start : start + 64]), kind)
        for ids, mask in zip(batch["input_ids"].tolist(), batch["attention_mask"].tolist()):
            out.append({i for i, m in zip(ids, mask) if m})
    return out
