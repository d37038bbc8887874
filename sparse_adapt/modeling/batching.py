"""Encoding many texts in length-sorted batches, for both encoders.

The torch encoder (``encoder.py``) and the ONNX Runtime one (``onnx.py``) differ only in how one
padded batch becomes weights. Everything around that is here, once: the same checks in the same
order, batches of texts of about the same token length (a batch pads to its own longest, not to
the longest of the corpus), progress counted in texts, a NaN refused naming the text, and rows
returned in input order.
"""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

import numpy as np
import scipy.sparse as sp

from sparse_adapt.errors import NonFiniteError, require_positive_int, require_texts
from sparse_adapt.modeling.vectors import check_max_active_dims, keep_top
from sparse_adapt.progress import Hooks

# Texts are sorted by length within windows of this many batches: long enough that batches
# are nearly padding-free, short enough that a huge corpus is never tokenised all at once.
SORT_WINDOW_BATCHES = 64

# How messages name several texts of a kind (progress bars, truncation notes).
PLURAL: dict[str, str] = {"query": "queries", "document": "documents"}

# input_ids (B, L) int64, attention_mask (B, L) int64, right-padded -> weights (B, V) float32
Weigh = Callable[[np.ndarray, np.ndarray], np.ndarray]


def length_sorted_batches(
    tokenizer, texts: Sequence[str], max_length: int, batch_size: int,
) -> Iterator[tuple[list[int], np.ndarray, np.ndarray]]:
    """Yield (input positions, input_ids (B, L), attention_mask (B, L)), longest texts first
    within each window of ``SORT_WINDOW_BATCHES`` batches; padding on the right."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    window = batch_size * SORT_WINDOW_BATCHES
    for w0 in range(0, len(texts), window):
        ids = tokenizer(list(texts[w0 : w0 + window]), truncation=True, max_length=max_length)["input_ids"]
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))  # stable: ties keep input order
        for b0 in range(0, len(order), batch_size):
            chosen = order[b0 : b0 + batch_size]
            width = len(ids[chosen[0]])  # the longest in the batch, by the sort
            input_ids = np.full((len(chosen), width), pad, dtype=np.int64)  # (B, L)
            attention_mask = np.zeros((len(chosen), width), dtype=np.int64)  # (B, L)
            for row, i in enumerate(chosen):
                input_ids[row, : len(ids[i])] = ids[i]
                attention_mask[row, : len(ids[i])] = 1
            yield [w0 + i for i in chosen], input_ids, attention_mask


def encode_texts(
    texts: Sequence[str], *, kind: str, tokenizer, max_length: int, vocab_size: int, weigh: Weigh,
    batch_size: int, progress: Hooks | None, max_active_dims: int | None,
) -> sp.csr_matrix:
    """Texts -> (len(texts), V) float32 CSR weights in input order, each batch weighed by ``weigh``."""
    texts = require_texts(texts)
    require_positive_int(batch_size, "batch_size")
    check_max_active_dims(max_active_dims)  # before any encoding
    n = len(texts)
    # Counted in texts, as the label says ("encoding documents: 1/1" was one batch of nine).
    task = None if progress is None else progress.task(f"encoding {PLURAL[kind]}", n)
    rows: list[sp.csr_matrix] = []
    order: list[int] = []  # input index of each encoded row, in encoding order
    for positions, input_ids, attention_mask in length_sorted_batches(tokenizer, texts, max_length, batch_size):
        w = np.asarray(weigh(input_ids, attention_mask), dtype=np.float32)  # (B, V)
        finite = np.isfinite(w).all(axis=1)  # (B,): a NaN counted as an active term, exported as a cast warning
        if not finite.all():
            raise NonFiniteError(f"the model gives NaN or infinite weights for {kind} #{positions[int(np.argmin(finite))]} "
                                 "(its weights are far too large or damaged): not a usable model")
        rows.append(sp.csr_matrix(w))
        order.extend(positions)
        if task is not None:
            task.advance(len(positions))
    if not rows:
        return sp.csr_matrix((0, vocab_size), dtype=np.float32)
    inverse = np.empty(n, dtype=np.int64)
    inverse[np.asarray(order)] = np.arange(n)  # input index -> encoded row
    matrix = sp.vstack(rows, format="csr")[inverse]  # float32 already: each batch was made so above
    return matrix if max_active_dims is None else keep_top(matrix, max_active_dims)
