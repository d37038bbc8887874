"""FLOPS sparsity regulariser over the general vocabulary (domain tokens exempt)."""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn


class FlopsLoss(nn.Module):
    """Expected dot-product cost of the batch, restricted to non-domain tokens (Paria et al., 2020).

    .. math::

        \\mathcal{L}_{sp} = \\sum_{t \\in V \\setminus D} \\bar{w}_q^t \\cdot \\bar{w}_d^t

    where ``w̄_q^t`` / ``w̄_d^t`` are the mean weights of token ``t`` over the batch's queries
    and documents and ``D`` the domain token ids. Excluding ``D`` keeps the regulariser from
    suppressing the newly learned terminology. This is the spec's form: the expected cost of
    a query-document dot product. Paria et al. regularise ``sum_t mean_t^2`` of one set of
    vectors (SPLADE v2 applies that to queries and documents separately); the product form
    puts no pressure on a document token no query of the batch fires. In distillation the
    documents are the batch's distinct candidates, each counted once however many of the
    batch's lists hold it.

    Args (forward):
        queries: (Q, V) query weights; documents: (M, V) document weights;
        domain_ids: ids in ``D`` (may be empty: then the sum is over all of ``V``).
    """

    def forward(self, queries: torch.Tensor, documents: torch.Tensor, domain_ids: Sequence[int]) -> torch.Tensor:
        keep = torch.ones(queries.shape[1], device=queries.device, dtype=queries.dtype)  # (V,)
        if len(domain_ids):
            keep[torch.as_tensor(list(domain_ids), device=queries.device)] = 0.0
        return (queries.mean(0) * documents.mean(0) * keep).sum()
