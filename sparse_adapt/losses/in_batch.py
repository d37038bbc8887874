"""In-batch contrastive loss with distillation of a teacher's in-batch similarities."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from sparse_adapt.losses.scores import pair_scores


class InBatchLoss(nn.Module):
    """InfoNCE over in-batch negatives, both directions, plus KL to a teacher's distribution.

    For a batch of ``B`` pairs with student scores ``S = Q D^T`` (dot products of SPLADE
    vectors, ``S_ij`` = query ``i`` against document ``j``; pair ``i`` is ``(i, i)``):

    .. math::

        \\mathcal{L}_{nce} = -\\frac{1}{2B} \\sum_i \\Big[\\log \\mathrm{softmax}_j(S_{ij}/\\tau)_i
                              + \\log \\mathrm{softmax}_j(S_{ji}/\\tau)_i\\Big]

        \\mathcal{L}_{kd} = \\frac{1}{B} \\sum_i \\mathrm{KL}\\big(\\mathrm{softmax}_j(T_{ij}/\\tau_t)
                              \\,\\|\\, \\mathrm{softmax}_j(S_{ij}/\\tau)\\big)

    with ``T`` the teacher's (B, B) similarities (cosines of a dense bi-encoder). The first is
    SPLADE's in-batch negative training (Formal et al., "SPLADE v2", 2021); the second is
    in-batch distillation from a dense teacher (Lin et al., "In-Batch Negatives for Knowledge
    Distillation with Tightly-Coupled Teachers", 2021): other pairs of the batch that the
    teacher finds related ("rash" for a query about skin patches) are not pushed to zero.

    Args (forward):
        queries: (B, V) query weights; documents: (B, V) document weights (row i pairs with row i);
        teacher: optional (B, B) teacher similarities; None: the KD term is 0.
    Returns: ``{"nce": ..., "kd": ...}``.
    """

    def __init__(self, temperature: float = 1.0, teacher_temperature: float = 0.05):
        super().__init__()
        self.temperature = temperature
        self.teacher_temperature = teacher_temperature

    def forward(self, queries: torch.Tensor, documents: torch.Tensor, teacher: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        if queries.shape != documents.shape:
            raise ValueError(f"queries {tuple(queries.shape)} and documents {tuple(documents.shape)} must pair row by row")
        scores = pair_scores(queries, documents) / self.temperature  # (B, B)
        labels = torch.arange(scores.shape[0], device=scores.device)
        nce = 0.5 * (F.cross_entropy(scores, labels) + F.cross_entropy(scores.T, labels))
        if teacher is None:
            return {"nce": nce, "kd": torch.zeros((), device=scores.device)}
        if teacher.shape != scores.shape:
            raise ValueError(f"teacher similarities {tuple(teacher.shape)} do not match the batch {tuple(scores.shape)}")
        target = F.softmax(teacher.float() / self.teacher_temperature, dim=1)  # (B, B)
        kd = F.kl_div(F.log_softmax(scores, dim=1), target, reduction="batchmean")
        return {"nce": nce, "kd": kd}
