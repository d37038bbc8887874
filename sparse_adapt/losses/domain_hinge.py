"""Domain hinge: a domain token present in a text must weigh at least tau_min in its vector."""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn


def presence(input_ids: torch.Tensor, domain_ids: Sequence[int]) -> torch.Tensor:
    """(X, |D|) float 0/1: does domain token j occur in input x? input_ids: (X, L)."""
    d = torch.as_tensor(list(domain_ids), device=input_ids.device, dtype=input_ids.dtype)  # (|D|,)
    return (input_ids.unsqueeze(-1) == d).any(dim=1).float()  # (X, L, |D|) -> (X, |D|)


class DomainHingeLoss(nn.Module):
    """Hinge keeping domain tokens visible where they occur ("vocabulary amnesia" guard).

    .. math::

        \\mathcal{L}_{domain} = \\frac{1}{|D|} \\sum_{t \\in D} \\mathbb{1}[t \\in x] \\cdot \\max(0, \\tau_{min} - w_x^t)

    averaged over the inputs ``x`` (queries and documents) of the batch. Zero when every
    present domain token already weighs ``>= tau_min``; zero when ``D`` is empty. From the
    spec (primary seed, the domain term); no published counterpart. Each present token's push
    is ``dom / (|D| * texts)``, so a longer term list weakens it per token (the default weight
    is sized for that: ``training/config.py``).

    Args:
        tau_min: minimum SPLADE weight of a present domain token. Note ``w = log(1+relu(logit))``,
            so a token whose logit is negative everywhere has zero gradient here: this loss
            sharpens tokens the MLM stages made positive, it cannot revive dead ones.

    Args (forward):
        weights: (X, V) SPLADE vectors; input_ids: (X, L) their token ids; domain_ids: ``D``.
    """

    def __init__(self, tau_min: float = 2.0):
        super().__init__()
        if tau_min < 0:
            raise ValueError(f"tau_min must be >= 0, got {tau_min}")
        self.tau_min = tau_min

    def forward(self, weights: torch.Tensor, input_ids: torch.Tensor, domain_ids: Sequence[int]) -> torch.Tensor:
        if not len(domain_ids):
            return weights.new_zeros(())
        present = presence(input_ids, domain_ids)  # (X, |D|)
        w = weights[:, list(domain_ids)]  # (X, |D|)
        hinge = torch.relu(self.tau_min - w) * present  # (X, |D|)
        return (hinge.sum(1) / len(domain_ids)).mean()
