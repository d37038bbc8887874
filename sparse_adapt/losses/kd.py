"""Knowledge distillation: regress the student's dot products on the teacher's scores."""

from __future__ import annotations

import torch
from torch import nn


class KDLoss(nn.Module):
    """Mean squared error between teacher and student relevance scores.

    .. math::

        \\mathcal{L}_{kd} = \\frac{1}{N} \\sum_{i=1}^{N} (s_{teacher}^{(i)} - s_{student}^{(i)})^2

    over the ``N`` query-document pairs of the batch, where ``s_student`` is the dot product
    of the SPLADE query and document vectors. From the spec (primary seed, the KD term):
    pointwise score regression, the simplest form of the score distillation SPLADE++ trains
    with (Formal et al., "From Distillation to Hard Negative Sampling", SIGIR 2022, which uses
    the margin form of Hofstätter et al., "Improving Efficient Neural Ranking Models with
    Cross-Architecture Knowledge Distillation", 2020).

    Args (forward):
        student: (B, N) student scores, N candidates per query.
        teacher: (B, N) teacher scores.
        mask: optional (B, N) bool, False for padded candidates (lists of unequal length).
    """

    def forward(self, student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if student.shape != teacher.shape:
            raise ValueError(f"student scores {tuple(student.shape)} and teacher scores {tuple(teacher.shape)} differ")
        sq = (teacher - student) ** 2  # (B, N)
        if mask is None:
            return sq.mean()
        return (sq * mask).sum() / mask.sum().clamp(min=1)
