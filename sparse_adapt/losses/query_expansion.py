"""Query expansion: queries should activate the domain tokens of their relevant documents."""

from __future__ import annotations

import torch
from torch import nn


class QueryExpansionLoss(nn.Module):
    """Push a query's weight up on every domain token found in its positive documents.

    .. math::

        \\mathcal{L}_{q\\_expand} = -\\frac{1}{|D_{d^+}|} \\sum_{t \\in D_{d^+}} \\log \\sigma(w_q^t)

    where ``D_{d+}`` is the set of domain tokens occurring in the query's positive documents
    (teacher > 0). Averaged over the queries whose ``D_{d+}`` is non-empty; zero if none.
    ``-log sigma(0) = log 2``: an inactive token costs 0.693 and the loss decays smoothly as
    the weight grows, so it never forces an unbounded weight.

    ``w = log(1 + relu(max logit)) >= 0``, so the loss is at most ``log 2``, and a token whose
    logit is <= 0 at every position of the query gets no gradient (the relu's dead zone, as
    in :class:`~sparse_adapt.losses.domain_hinge.DomainHingeLoss`) from this pair. The token's
    decoder row and bias, moved by the queries where it fires, still reach such a pair: in one
    reading (software, ``offline-minilm`` from the corpus, ``--no-pretrain``, seed 0) 23 of 60
    target pairs were dead when distill started and 1 of 60 when it ended
    (``bench/RESULTS.md``, "Thirty-first session"). The spec's example log
    prints QExp 1.29, above ``log 2``, which fits its ``w_q^t`` read as a raw logit; this
    implementation follows the formula as written on the SPLADE weight. From the spec
    (primary seed, "query expansion" term).

    Args (forward):
        query_weights: (B, V) query SPLADE vectors.
        targets: (B, |D|) 0/1 float, 1 where domain token j occurs in a positive document of query b.
        domain_ids: the ids of ``D`` (column j of ``targets`` is ``domain_ids[j]``).
    """

    def forward(self, query_weights: torch.Tensor, targets: torch.Tensor, domain_ids) -> torch.Tensor:
        if not len(domain_ids):
            return query_weights.new_zeros(())
        w = query_weights[:, list(domain_ids)]  # (B, |D|)
        nll = -nn.functional.logsigmoid(w) * targets  # (B, |D|)
        count = targets.sum(1)  # (B,)
        has = count > 0
        if not has.any():
            return query_weights.new_zeros(())
        return (nll.sum(1)[has] / count[has]).mean()
