"""The distillation objective: the spec's six terms plus knowledge preservation, each
term returned by name for logging."""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from sparse_adapt.losses.contrastive import ContrastiveLoss
from sparse_adapt.losses.domain_hinge import DomainHingeLoss, presence
from sparse_adapt.losses.flops import FlopsLoss
from sparse_adapt.losses.kd import KDLoss
from sparse_adapt.losses.preservation import PreservationLoss
from sparse_adapt.losses.query_expansion import QueryExpansionLoss
from sparse_adapt.losses.ranking import RankingLoss
from sparse_adapt.losses.scores import dot_scores

TERMS = ("kd", "ret", "sp", "dom", "ctr", "qexp", "pres")


def sparsity_ramp(step: int, warmup_steps: int) -> float:
    """SPLADE's quadratic warm-up of the FLOPS weight: ``min(1, step / warmup_steps) ** 2``.

    ``step`` counts from 1. Early in training the vectors must first become useful; a full
    sparsity penalty from step 1 collapses them to zero before the ranking terms act.
    """
    if warmup_steps <= 0:
        return 1.0
    return min(1.0, step / warmup_steps) ** 2


class DistillationLoss(nn.Module):
    """Weighted sum of the seven terms:

    .. math::

        \\mathcal{L} = \\lambda_{kd} L_{kd} + \\lambda_{ret} L_{ret} + r(step)\\,\\lambda_{sp} L_{sp}
                     + \\lambda_{dom} L_{dom} + \\lambda_{ctr} L_{ctr} + \\lambda_{qexp} L_{qexp}
                     + \\lambda_{pres} L_{pres}

    with ``r`` the quadratic sparsity ramp (:func:`sparsity_ramp`). Terms:
    :class:`KDLoss`, :class:`RankingLoss` (temperature ``tau``), :class:`FlopsLoss`
    (over ``V \\ D``), :class:`DomainHingeLoss` (``tau_min``, over queries and documents),
    :class:`ContrastiveLoss` (``margin``), :class:`QueryExpansionLoss` and
    :class:`PreservationLoss` (``pres_form``; needs the reference vectors, else it is 0).

    ``forward`` returns ``{"kd", "ret", "sp", "dom", "ctr", "qexp", "pres", "total"}``: the
    seven unweighted terms (detached, for logging) and the weighted ``total`` to backpropagate.

    Args (forward):
        query_weights: (B, V); query_input_ids: (B, Lq).
        doc_weights: (U, V) vectors of the batch's *unique* documents; doc_input_ids: (U, Ld).
        doc_index: (B, N) long, row of ``doc_weights`` for candidate n of query b.
        teacher: (B, N) teacher scores; mask: (B, N) bool, False on padding (whose index may be
            -1 or any row: it is read, then masked out).
        domain_ids: ``D``; step: 1-based optimiser step for the sparsity ramp.
        ref_query_weights: (B, V_ref), ref_doc_weights: (U, V_ref): the frozen reference
            model's vectors of the same texts, or None (then ``pres`` is 0).
        free_ids: ids the ``"all-texts"`` preservation never anchors in domain texts (``D``
            and the reference's pieces of the domain terms).
    """

    # Unit weights (pres 0: off unless asked) and tau_min 2 make hand-worked tests readable; training takes every value
    # from DistillConfig (training/config.py), whose defaults are the measured ones.
    def __init__(
        self, *, kd: float = 1.0, ret: float = 1.0, sp: float = 1.0, dom: float = 1.0, ctr: float = 1.0,
        qexp: float = 1.0, temperature: float = 1.0, tau_min: float = 2.0, margin: float = 5.0,
        sp_warmup_steps: int = 0, pres: float = 0.0, pres_form: str = "vectors",
    ):
        super().__init__()
        self.weights = {"kd": kd, "ret": ret, "sp": sp, "dom": dom, "ctr": ctr, "qexp": qexp, "pres": pres}
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
        self.pres = PreservationLoss(pres_form)

    def forward(
        self, *, query_weights: torch.Tensor, query_input_ids: torch.Tensor, doc_weights: torch.Tensor,
        doc_input_ids: torch.Tensor, doc_index: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor,
        domain_ids: Sequence[int], step: int, ref_query_weights: torch.Tensor | None = None,
        ref_doc_weights: torch.Tensor | None = None, free_ids: Sequence[int] = (),
    ) -> dict[str, torch.Tensor]:
        # index_select, not advanced indexing: the backward of ``x[idx]`` on CPU is a
        # thread-parallel index_put_ whose sums change order run to run, so a seeded run
        # would not reproduce; index_select's backward (index_add_) does.
        rows = doc_index.clamp(min=0)  # (B, N): padding (-1) reads row 0, masked out below
        docs = doc_weights.index_select(0, rows.reshape(-1)).view(*rows.shape, -1)  # (B, N, V)
        student = dot_scores("bv,bnv->bn", query_weights, docs)  # (B, N) dot products
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
            in_doc = presence(doc_input_ids, domain_ids)[rows]  # (B, N, |D|)
            positive = (mask & (teacher > 0)).unsqueeze(-1).float()  # (B, N, 1)
            targets = (in_doc * positive).amax(dim=1)  # (B, |D|)
        else:
            targets = query_weights.new_zeros((query_weights.shape[0], 0))
        terms["qexp"] = self.qexp(query_weights, targets, domain_ids)
        if ref_query_weights is None or ref_doc_weights is None:
            terms["pres"] = query_weights.new_zeros(())
        else:
            # Texts the domain does not concern: documents without a domain token, queries
            # without one and without one in their positives (so not domain-semantic ones).
            general_docs = doc_weights.new_ones(nd, dtype=torch.bool)
            general_queries = targets.sum(1) == 0
            if len(domain_ids):
                general_docs &= presence(doc_input_ids, domain_ids).sum(1) == 0
                general_queries &= presence(query_input_ids, domain_ids).sum(1) == 0
            ref_docs = ref_doc_weights[rows]  # (B, N, V_ref)
            terms["pres"] = self.pres(
                query_weights=query_weights, doc_weights=doc_weights, ref_query_weights=ref_query_weights,
                ref_doc_weights=ref_doc_weights, general_queries=general_queries, general_docs=general_docs,
                student=student, mask=mask, free_ids=free_ids,
                ref_scores=dot_scores("bv,bnv->bn", ref_query_weights, ref_docs),
            )
        scale = {"sp": sparsity_ramp(step, self.sp_warmup_steps)}
        total = sum(self.weights[k] * scale.get(k, 1.0) * terms[k] for k in TERMS)
        out = {k: terms[k].detach() for k in TERMS}
        out["total"] = total
        return out
