"""Pairwise margin between the teacher's positives and negatives."""

from __future__ import annotations

import torch
from torch import nn


class ContrastiveLoss(nn.Module):
    """Pairwise margin ranking over positives (teacher > 0) vs negatives (teacher <= 0).

    .. math::

        \\mathcal{L}_{contrast} = \\frac{1}{|P||N|} \\sum_{i \\in P} \\sum_{j \\in N} \\max(0, m - (s_{student}^{(i)} - s_{student}^{(j)}))

    per query, averaged over the queries that have at least one positive and one negative
    (zero if none has). From the spec (primary seed, the margin contrastive term): the
    pairwise hinge of large-margin ranking (Herbrich et al., "Large Margin Rank Boundaries for
    Ordinal Regression", 2000; Joachims, "Optimizing Search Engines using Clickthrough Data",
    KDD 2002) over the teacher's positives and negatives.

    Args:
        margin: ``m``; the spec suggests ~5 for teacher scores in [-8, 10].

    Args (forward):
        student: (B, N) student scores; teacher: (B, N); mask: optional (B, N) bool.
    """

    def __init__(self, margin: float = 5.0):
        super().__init__()
        if margin < 0:
            raise ValueError(f"margin must be >= 0, got {margin}")
        self.margin = margin

    def forward(self, student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        valid = torch.ones_like(teacher, dtype=torch.bool) if mask is None else mask
        pos = (teacher > 0) & valid  # (B, N)
        neg = (teacher <= 0) & valid  # (B, N)
        gap = student.unsqueeze(2) - student.unsqueeze(1)  # (B, N_i, N_j): s_i - s_j
        pair = (pos.unsqueeze(2) & neg.unsqueeze(1)).float()  # (B, N_i, N_j)
        hinge = torch.relu(self.margin - gap) * pair
        n_pairs = pair.sum(dim=(1, 2))  # (B,)
        has = n_pairs > 0
        if not has.any():
            return student.new_zeros(())
        per_query = hinge.sum(dim=(1, 2))[has] / n_pairs[has]
        return per_query.mean()
