"""Student scores (dot products of SPLADE vectors) in fp32, also under bf16 autocast.

CUDA trains under bf16 autocast (``sparse_adapt.device.autocast``), which runs ``einsum`` and
``@`` in bf16: a score of 16-32 then moves in steps of 0.125, coarser than the teacher
margins KD and the margin contrastive term fit. The vectors themselves come out of
``log1p`` in fp32; only the products need keeping there. On CPU (no autocast) this is the
plain product.
"""

from __future__ import annotations

import torch


def dot_scores(equation: str, queries: torch.Tensor, documents: torch.Tensor) -> torch.Tensor:
    """``torch.einsum(equation, queries, documents)`` in fp32 with autocast off."""
    with torch.autocast(queries.device.type, enabled=False):
        return torch.einsum(equation, queries.float(), documents.float())


def pair_scores(queries: torch.Tensor, documents: torch.Tensor) -> torch.Tensor:
    """(B, V) x (B', V) -> (B, B') ``queries @ documents.T`` in fp32 with autocast off."""
    with torch.autocast(queries.device.type, enabled=False):
        return queries.float() @ documents.float().T
