"""SPLADE pooling, memory-bounded: the (batch, length, vocabulary) logits never exist.

A SPLADE weight is

    w_{b,t} = max_{i in text b} log(1 + relu(h_{b,i} . W_t + c_t))

with ``h`` the MLM head's transformed hidden states, ``W`` the decoder matrix and ``c`` its
bias. ``log1p``, ``relu`` and ``+ c_t`` are monotone non-decreasing (also after float
rounding) and ``c_t`` does not depend on the position, so exactly

    w_{b,t} = log(1 + relu(max_i (h_{b,i} . W_t) + c_t)).

Only the max of raw dot products is needed, so the head runs over the *packed* non-padding
positions of a batch in chunks of rows: one (rows, V) block lives at a time and is folded
into a running (B, V) max. ``log1p``/``relu`` then run once on (B, V) instead of on every
position.

Training uses the same forward. Its backward needs no recomputation: the gradient of a max
reaches only the arg-max position, and ``relu`` zeroes it for every inactive term, so the
head's gradient is a sparse scatter over the few (text, term) pairs that fire -- saved as
one (B, V) index tensor -- instead of a dense (B, L, V) matrix product.

Head families are split by the registry in ``heads.py``; any other masked-LM is pooled
from its full logits (:func:`masked_max`, then :func:`activate`: what :func:`pool_logits`
computes; ``HeadSupport.reason`` says why) with a ``FullLogitsWarning``.
"""

from __future__ import annotations

import warnings

import torch

from sparse_adapt.errors import SparseAdaptWarning
from sparse_adapt.modeling.heads import HeadParts

# Bytes of one (rows, V) logits block. 64 MiB is 549 rows at V = 30,522: the GEMM is at its
# plateau from ~256 rows (measured on 2 CPU cores, H = 384: 64 rows 20 GFLOP/s, 256-512 rows
# 36-40 GFLOP/s), and the block stays small next to the backbone's per-layer activations at
# batch 32 x 256 tokens (the full logits would be 0.93 GiB).
CHUNK_BYTES = 64 * 2**20

# Bytes of one (pairs, H) block of gathered rows in the sparse backward.
BACKWARD_CHUNK_BYTES = 32 * 2**20


class FullLogitsWarning(SparseAdaptWarning):
    """A masked-LM family without a registered head split: pooling materialises (B, L, V)."""


def warn_full_logits(reason: str) -> None:
    warnings.warn(reason, FullLogitsWarning, stacklevel=3)


def pool_logits(logits: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Reference SPLADE pooling from full logits: (B, L, V) and (B, L) 0/1 -> (B, V).

    ``log1p`` and ``relu`` are monotone, so they run once on the (B, V) max instead of on
    every position. The reference in tests and ``bench/train_step.py``; the encoder pools a family
    without a head split the same way (:func:`masked_max`, then :func:`activate`).
    """
    return activate(masked_max(logits, attention_mask))


def masked_max(logits: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """(B, L, V) logits -> (B, V) max over non-padding positions (-inf for padding only)."""
    padding = attention_mask.unsqueeze(-1) == 0  # (B, L, 1)
    return logits.masked_fill(padding, float("-inf")).amax(dim=1)  # (B, V)


def activate(max_logits: torch.Tensor) -> torch.Tensor:
    """SPLADE's saturation ``log(1 + relu(x))`` of pooled max logits; -inf -> 0."""
    return torch.log1p(torch.relu(max_logits))


def rows_per_chunk(vocab: int, itemsize: int = 4) -> int:
    return max(1, CHUNK_BYTES // (vocab * itemsize))


def _segments(offsets: list[int], r0: int, r1: int, first: int):
    """(text index, start, end) of every text's rows inside rows [r0, r1), texts from ``first``."""
    for b in range(first, len(offsets) - 1):
        if offsets[b] >= r1:
            break
        start, end = max(offsets[b], r0), min(offsets[b + 1], r1)
        if start < end:
            yield b, start, end


def max_dot(
    rows: torch.Tensor, weight: torch.Tensor, offsets: list[int], chunk: int, with_argmax: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per text, the max over its rows of ``rows @ weight.T``, one row chunk at a time.

    rows: (N, H) packed positions, text b owning rows offsets[b]:offsets[b+1];
    weight: (V, H) -> (B, V) maxima (-inf for a text without rows) and, if asked, the
    (B, V) packed row index of each max (-1 for a text without rows).
    """
    n_texts, vocab = len(offsets) - 1, weight.shape[0]
    best = rows.new_full((n_texts, vocab), float("-inf"))  # (B, V)
    where = torch.full((n_texts, vocab), -1, dtype=torch.long, device=rows.device) if with_argmax else None
    wt = weight.t()  # (H, V), a view: the GEMM reads the transpose in place
    first = 0
    for r0 in range(0, rows.shape[0], chunk):
        r1 = min(rows.shape[0], r0 + chunk)
        logits = rows[r0:r1] @ wt  # (R, V): the only vocabulary-wide block alive
        for b, start, end in _segments(offsets, r0, r1, first):
            block = logits[start - r0 : end - r0]  # (n_b, V), this text's rows in the chunk
            if where is None:
                torch.maximum(best[b], block.amax(dim=0), out=best[b])
            else:
                value, index = block.max(dim=0)  # (V,), (V,)
                better = value > best[b]
                best[b] = torch.where(better, value, best[b])
                where[b] = torch.where(better, index + start, where[b])
            first = b
    return best, where


class _MaxDot(torch.autograd.Function):
    """``max_dot`` with a sparse backward: only (text, term) pairs with a gradient cost work."""

    @staticmethod
    def forward(ctx, rows, weight, offsets, chunk):
        best, where = max_dot(rows, weight, offsets, chunk, with_argmax=True)
        ctx.save_for_backward(rows, weight, where)
        ctx.mark_non_differentiable(where)
        return best

    @staticmethod
    def backward(ctx, grad):  # grad: (B, V)
        rows, weight, where = ctx.saved_tensors
        # Inactive terms get an exact 0 from relu's backward, so this is the active set.
        b_idx, t_idx = grad.nonzero(as_tuple=True)  # (P,), (P,)
        g = grad[b_idx, t_idx]  # (P,)
        r_idx = where[b_idx, t_idx]  # (P,) packed row of each max
        need_rows, need_weight = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_rows = torch.zeros_like(rows) if need_rows else None  # (N, H)
        grad_weight = torch.zeros_like(weight) if need_weight else None  # (V, H)
        step = max(1, BACKWARD_CHUNK_BYTES // (rows.shape[1] * rows.element_size()))
        for s in range(0, g.shape[0], step):
            gs, rs, ts = g[s : s + step, None], r_idx[s : s + step], t_idx[s : s + step]
            if need_rows:
                grad_rows.index_add_(0, rs, gs * weight[ts])  # d(h_r . W_t)/dh_r = W_t
            if need_weight:
                grad_weight.index_add_(0, ts, gs * rows[rs])  # d(h_r . W_t)/dW_t = h_r
        return grad_rows, grad_weight, None, None


def pooled_max_logits(rows: torch.Tensor, weight: torch.Tensor, offsets: list[int], chunk: int) -> torch.Tensor:
    """(B, V) per-text max of ``rows @ weight.T``; differentiable when its inputs need grad."""
    if torch.is_grad_enabled() and (rows.requires_grad or weight.requires_grad):
        return _MaxDot.apply(rows, weight, offsets, chunk)
    return max_dot(rows, weight, offsets, chunk)[0]


def chunked_max_logits(parts: HeadParts, input_ids: torch.Tensor, attention_mask: torch.Tensor, vocab: int) -> torch.Tensor:
    """(B, V) max over non-padding positions of the logits of the first ``vocab`` decoder rows.

    Equal to ``masked_max`` of the full logits, without the (B, L, V) tensor ever existing.
    """
    hidden = parts.backbone(input_ids=input_ids, attention_mask=attention_mask)[0]  # (B, L, H)
    keep = attention_mask.bool()  # (B, L)
    rows = parts.transform(hidden[keep])  # (N, H): the head runs on real positions only, texts in order
    lengths = keep.sum(dim=1).tolist()
    offsets = [0]
    for n in lengths:
        offsets.append(offsets[-1] + n)
    weight, bias = parts.decoder.weight, parts.decoder.bias  # (V', H), (V',): V' >= V with padded rows
    if weight.shape[0] != vocab:  # a whole-tensor slice still costs a (V, H) zeros + copy in its backward (6% of a step)
        weight, bias = weight[:vocab], (bias[:vocab] if bias is not None else None)
    best = pooled_max_logits(rows, weight, offsets, rows_per_chunk(vocab, rows.element_size()))  # (B, V)
    if bias is not None:
        best = best + bias
    return best  # (B, V); -inf for a text without rows
