"""How many texts an encoder cuts: SPLADE reads at most ``query_max_length`` /
``doc_max_length`` pieces of a text and ignores the rest, which a user should be told
rather than find out from a missing match."""

from __future__ import annotations

from typing import Sequence

from sparse_adapt.modeling.batching import PLURAL
from sparse_adapt.modeling.encoder import Kind, SpladeEncoder
from sparse_adapt.progress import counted


def truncated(splade: SpladeEncoder, texts: Sequence[str], kind: Kind) -> list[int]:
    """Indices of the ``texts`` longer than ``splade``'s maximum length for ``kind``."""
    if not texts:
        return []
    limit = splade.max_length(kind)
    batch = splade.tokenizer(list(texts), truncation=True, max_length=limit)
    if batch.encodings is not None:
        # Fast tokenizers keep what truncation cut off: no second pass over long texts.
        return [i for i, e in enumerate(batch.encodings) if e.overflowing]
    full = splade.tokenizer(list(texts), truncation=False, verbose=False)["input_ids"]
    return [i for i, ids in enumerate(full) if len(ids) > limit]


def longer_than(cut: int, total: int, limit: int, kind: Kind = "document") -> str:
    """``"1 of 3 documents is longer than 256 pieces"``: the count of cut texts, verb agreeing."""
    return f"{cut} of {counted(total, kind, PLURAL[kind])} {'is' if cut == 1 else 'are'} longer than {limit} pieces"


def truncation_note(splade: SpladeEncoder, texts: Sequence[str], kind: Kind) -> str | None:
    """``"3 of 120 documents are longer than 256 pieces and were truncated"``, or None."""
    cut = truncated(splade, texts, kind)
    if not cut:
        return None
    return truncation_sentence(len(cut), len(texts), splade.max_length(kind), kind)


def truncation_sentence(cut: int, total: int, limit: int, kind: Kind = "document") -> str:
    """:func:`truncation_note`'s sentence from counts already made (``export`` counts as it writes)."""
    return f"{longer_than(cut, total, limit, kind)} and {'was' if cut == 1 else 'were'} truncated"


def visible_texts(splade: SpladeEncoder, texts: Sequence[str], kind: Kind) -> list[str]:
    """Each text cut to the characters ``splade`` reads of it (its first ``max_length(kind)``
    pieces); a text within the limit is returned whole. A slow tokenizer gives no offsets:
    its texts are returned whole."""
    if not splade.tokenizer.is_fast:
        return list(texts)
    batch = splade.tokenizer(list(texts), truncation=True, max_length=splade.max_length(kind),
                             return_offsets_mapping=True)
    out = []
    for text, encoding, offsets in zip(texts, batch.encodings, batch["offset_mapping"]):
        if not encoding.overflowing:
            out.append(text)
            continue
        end = max(e for _, e in offsets)  # special tokens have (0, 0)
        out.append(text[:end])
    return out
