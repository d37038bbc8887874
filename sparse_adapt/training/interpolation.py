"""Weight-space interpolation of the trained model towards its starting point (WiSE-FT).

    theta_final = (1 - alpha) * theta_trained + alpha * theta_anchor

for every floating-point parameter and buffer, where ``theta_anchor`` is the model the run's
training started from: the ``extend`` checkpoint (the base with the domain terms added, their
rows the mean of their old pieces, nothing trained yet) when the run extends the vocabulary,
else the base. alpha = 0 is the trained model, alpha = 1 the anchor. Integer buffers (position
ids) are the trained model's.

Wortsman et al., "Robust fine-tuning of zero-shot models", CVPR 2022
(https://arxiv.org/abs/2109.01903): averaging the fine-tuned and the zero-shot weights keeps
most of the fine-tuning gain while recovering robustness the fine-tuning lost. Here the
"robustness" is held-out paraphrases of a domain the training queries did not cover: rule L
and M of ``bench/RESULTS.md`` measure it (``DistillConfig.interpolate`` says what was chosen).
"""

from __future__ import annotations

import torch

from sparse_adapt.errors import SparseAdaptError
from sparse_adapt.modeling.encoder import SpladeEncoder


class InterpolationError(SparseAdaptError, ValueError):
    """The two models cannot be averaged (different parameters or shapes): one line on the CLI."""


def interpolate(trained: SpladeEncoder, anchor: SpladeEncoder, alpha: float) -> SpladeEncoder:
    """Set ``trained``'s weights to ``(1 - alpha) * trained + alpha * anchor`` in place; returns it."""
    if not 0.0 <= alpha <= 1.0:
        raise InterpolationError(f"alpha must be in [0, 1], got {alpha}")
    if trained.tokenizer.get_vocab() != anchor.tokenizer.get_vocab():
        # Rows of the same index would belong to different tokens.
        raise InterpolationError("the models have different vocabularies")
    mine, theirs = trained.mlm.state_dict(), anchor.mlm.state_dict()
    if mine.keys() != theirs.keys():
        missing = sorted(set(mine) ^ set(theirs))
        raise InterpolationError(f"the models hold different parameters (e.g. {missing[0]})")
    mixed = {}
    for key, value in mine.items():
        other = theirs[key]
        if value.shape != other.shape:
            # A vocabulary extended in one model only: averaging rows of different tokens is meaningless.
            raise InterpolationError(f"{key}: shape {tuple(value.shape)} vs the anchor's {tuple(other.shape)}")
        if not value.is_floating_point():
            mixed[key] = value
            continue
        # In fp32 whatever the storage dtype, so that alpha's rounding does not depend on it.
        blend = torch.lerp(value.float(), other.to(value.device).float(), alpha)
        mixed[key] = blend.to(value.dtype)
    trained.mlm.load_state_dict(mixed)
    trained.exclude_special_tokens()  # the blend of two excluded biases is excluded, but say it exactly
    return trained
