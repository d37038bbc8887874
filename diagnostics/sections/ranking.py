"""Section 4, ranking: the term's rank among the document's non-zero tokens."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Tokens listed in the ranking section, as in the spec.
TOP_TOKENS = 10

@dataclass
class RankedToken:
    rank: int
    token: str
    token_id: int
    weight: float
    in_text: bool  # occurs in the document text (else an expansion)
    target: bool  # the diagnosed token
    piece_of: str | None  # not in the text but a piece of a domain term's old split in it: no expansion


@dataclass
class Ranking:
    weight: float
    rank: int | None  # 1-based among non-zero tokens; None when the weight is 0
    nonzero: int
    top: list[RankedToken]


def ranking(token_id: int, ids: np.ndarray, weights: np.ndarray, vocab: list[str], text_ids: set[int],
            piece_of: dict[int, str]) -> Ranking:
    """``ids``/``weights``: the document's non-zero tokens by descending weight; ``piece_of``:
    piece id -> domain term, for the domain terms in the text (:func:`diagnostics.tokens.pieces_in`)."""
    where = np.nonzero(ids == token_id)[0]
    rank = int(where[0]) + 1 if len(where) else None
    top = [
        RankedToken(r + 1, vocab[int(i)], int(i), float(w), int(i) in text_ids, int(i) == token_id, piece_of.get(int(i)))
        for r, (i, w) in enumerate(zip(ids[:TOP_TOKENS], weights[:TOP_TOKENS]))
    ]
    return Ranking(
        weight=float(weights[where[0]]) if len(where) else 0.0, rank=rank, nonzero=int(len(ids)), top=top
    )
