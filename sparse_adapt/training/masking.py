"""Masked-LM input corruption: BERT's random masking plus "always mask" positions.

Random masking picks each ordinary (non-special, non-padding) position with probability
``rate``; a picked position becomes ``[MASK]`` 80% of the time, a random token 10% and
stays 10% (BERT's recipe, so the model also learns from positions it can see).

Domain-focused masking (MOSAIC-style) adds every occurrence of a domain token to the
picked positions and always replaces it by ``[MASK]``: with random masking alone a term
that appears twice in a 30-piece text is a prediction target in ~30% of its passes, and
when unmasked the model learns to copy it rather than to predict it from context. Always
masking it turns every pass into "which word fits *here*?", which is what moves the
context's hidden states towards the term's (tied) embedding and so makes the SPLADE
head expand to the term in texts that only describe it.
"""

from __future__ import annotations

from typing import Sequence

import torch

IGNORE = -100  # label of positions that are not prediction targets (HF / torch convention)


def occurrences(input_ids: torch.Tensor, token_ids: Sequence[int]) -> torch.Tensor:
    """(B, L) bool: positions holding any of ``token_ids``."""
    if not len(token_ids):
        return torch.zeros_like(input_ids, dtype=torch.bool)
    ids = torch.as_tensor(list(token_ids), dtype=input_ids.dtype, device=input_ids.device)
    return (input_ids.unsqueeze(-1) == ids).any(-1)


def span_occurrences(input_ids: torch.Tensor, span: Sequence[int]) -> torch.Tensor:
    """(B, L) bool: positions inside any occurrence of the id sequence ``span``."""
    out = torch.zeros_like(input_ids, dtype=torch.bool)
    k = len(span)
    if k == 0 or k > input_ids.shape[1]:
        return out
    target = torch.as_tensor(list(span), dtype=input_ids.dtype, device=input_ids.device)
    windows = input_ids.unfold(1, k, 1)  # (B, L - k + 1, k)
    starts = (windows == target).all(-1)  # (B, L - k + 1)
    for j in range(k):
        out[:, j : j + starts.shape[1]] |= starts
    return out


def mask_tokens(
    input_ids: torch.Tensor,
    maskable: torch.Tensor,
    *,
    rate: float,
    mask_token_id: int,
    vocab_size: int,
    generator: torch.Generator,
    always: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Corrupt ``input_ids`` (B, L) for MLM; returns ``(inputs, labels)``, both (B, L).

    ``maskable`` (B, L) bool marks ordinary tokens; ``always`` (B, L) bool marks positions
    that are targets and become ``[MASK]`` regardless of ``rate`` (domain-focused masking,
    the dictionary term).
    """
    picked = (torch.rand(input_ids.shape, generator=generator) < rate) & maskable  # (B, L)
    forced = torch.zeros_like(picked) if always is None else (always & maskable)
    targets = picked | forced
    labels = torch.where(targets, input_ids, torch.full_like(input_ids, IGNORE))
    roll = torch.rand(input_ids.shape, generator=generator)  # 80/10/10 split of random picks
    to_mask = forced | (picked & (roll < 0.8))
    to_random = picked & ~forced & (roll >= 0.8) & (roll < 0.9)
    inputs = input_ids.clone()
    inputs[to_mask] = mask_token_id
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator)
    inputs[to_random] = random_ids[to_random]
    return inputs, labels
