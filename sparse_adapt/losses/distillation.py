"""The spec's six-term distillation objective, each term returned by name for logging."""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from sparse_adapt.losses.contrastive import ContrastiveLoss
from sparse_adapt.losses.domain_hinge import DomainHingeLoss, presence
from sparse_adapt.losses.flops import FlopsLoss
from sparse_adapt.losses.kd import KDLoss
from sparse_adapt.losses.query_expansion import QueryExpansionLoss
from sparse_adapt.losses.ranking import RankingLoss

TERMS = ("kd", "ret", "sp", "dom", "ctr", "qexp")


def sparsity_ramp(step: int, warmup_steps: int) -> float:
    """SPLADE's quadratic warm-up of the FLOPS weight: ``min(1, step / warmup_steps) ** 2``.

    ``step`` counts from 1. Early in training the vectors must first become useful; a full
    sparsity penalty from step 1 collapses them to zero before the ranking terms act.
    """
    if warmup_steps <= 0:
        return 1.0
    return min(1.0, step / warmup_steps) ** 2


class DistillationLoss(nn.Module):
    """Weighted sum of the six terms:

    .. math::

        \\mathcal{L} = \\lambda_{kd} L_{kd} + \\lambda_{ret} L_{ret} + r(step)\\,\\lambda_{sp} L_{sp}
                     + \\lambda_{dom} L_{dom} + \\lambda_{ctr} L_{ctr} + \\lambda_{qexp} L_{qexp}

    with ``r`` the quadratic sparsity ramp (:func:`sparsity_ramp`). Terms:
    :class:`KDLoss`, :class:`RankingLoss` (temperature ``tau``), :class:`FlopsLoss`
    (over ``V \\ D``), :class:`DomainHingeLoss` (``tau_min``, over queries and documents),
    :class:`ContrastiveLoss` (``margin``) and :class:`QueryExpansionLoss`.

    ``forward`` returns ``{"kd", "ret", "sp", "dom", "ctr", "qexp", "total"}``: the six
    unweighted terms (detached, for logging) and the weighted ``total`` to backpropagate.

    Args (forward):
        query_weights: (B, V); query_input_ids: (B, Lq).
        doc_weights: (U, V) vectors of the batch's *unique* documents; doc_input_ids: (U, Ld).
        doc_index: (B, N) long, row of ``doc_weights`` for candidate n of query b.
        teacher: (B, N) teacher scores; mask: (B, N) bool, False on padding (then any index).
        domain_ids: ``D``; step: 1-based optimiser step for the sparsity ramp.
    """

    def __init__(
        self, *, kd: float = 1.0, ret: float = 1.0, sp: float = 1.0, dom: float = 1.0, ctr: float = 1.0,
        qexp: float = 1.0, temperature: float = 1.0, tau_min: float = 2.0, margin: float = 5.0,
        sp_warmup_steps: int = 0,
    ):
        super().__init__()
        self.weights = {"kd": kd, "ret": ret, "sp": sp, "dom": dom, "ctr": ctr, "qexp": qexp}
        for name, w in self.weights.items():
            if w < 0:
                raise ValueError(f"loss weight {name} must be >= 0, got {w}")
        self.sp_warmup_steps = sp_warmup_steps
        self.kd = KDLoss()
        self.ret = RankingLoss(temperature)
        self.sp = FlopsLoss()
        self.dom = DomainHingeLoss(tau_min)
        self.ctr = ContrastiveLoss(margin)
        self.qexp = QueryExpansionLoss()

    def forward(
        self, *, query_weights: torch.Tensor, query_input_ids: torch.Tensor, doc_weights: torch.Tensor,
        doc_input_ids: torch.Tensor, doc_index: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor,
        domain_ids: Sequence[int], step: int,
    ) -> dict[str, torch.Tensor]:
        docs = doc_weights[doc_index.clamp(min=0)]  # (B, N, V)
        student = torch.einsum("bv,bnv->bn", query_weights, docs)  # (B, N) dot products
        terms = {
            "kd": self.kd(student, teacher, mask),
            "ret": self.ret(student, teacher, mask),
            "sp": self.sp(query_weights, doc_weights, domain_ids),
            "ctr": self.ctr(student, teacher, mask),
        }
        # The hinge averages over every text of the batch, queries and documents alike.
        nq, nd = query_weights.shape[0], doc_weights.shape[0]
        terms["dom"] = (
            self.dom(query_weights, query_input_ids, domain_ids) * nq + self.dom(doc_weights, doc_input_ids, domain_ids) * nd
        ) / (nq + nd)
        if len(domain_ids):
            in_doc = presence(doc_input_ids, domain_ids)[doc_index.clamp(min=0)]  # (B, N, |D|)
            positive = (mask & (teacher > 0)).unsqueeze(-1).float()  # (B, N, 1)
            targets = (in_doc * positive).amax(dim=1)  # (B, |D|)
        else:
            targets = query_weights.new_zeros((query_weights.shape[0], 0))
        terms["qexp"] = self.qexp(query_weights, targets, domain_ids)
        scale = {"sp": sparsity_ramp(step, self.sp_warmup_steps)}
        total = sum(self.weights[k] * scale.get(k, 1.0) * terms[k] for k in TERMS)
        out = {k: terms[k].detach() for k in TERMS}
        out["total"] = total
        return out
