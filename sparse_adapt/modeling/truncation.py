"""How many texts an encoder cuts: SPLADE reads at most ``query_max_length`` /
``doc_max_length`` pieces of a text and ignores the rest, which a user should be told
rather than find out from a missing match."""

from __future__ import annotations

from typing import Sequence

from sparse_adapt.modeling.encoder import PLURAL, Kind, SpladeEncoder


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


def truncation_note(splade: SpladeEncoder, texts: Sequence[str], kind: Kind, what: str | None = None) -> str | None:
    """``"3 of 120 documents are longer than 256 pieces and were truncated"``, or None."""
    cut = truncated(splade, texts, kind)
    if not cut:
        return None
    what = what or PLURAL[kind]
    return f"{len(cut)} of {len(texts)} {what} are longer than {splade.max_length(kind)} pieces and were truncated"


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
