"""Calibrating the decoder bias of a converted base to a target sparsity.

A base built by ``base.py`` has one shared decoder bias ``b``; it alone decides how many
terms fire. :func:`calibrate_bias` finds it in closed form for a target number of active
terms; :func:`encoder_to_splade` builds the SPLADE encoder it is calibrated on.
"""

from __future__ import annotations

from typing import Sequence

import torch

from sparse_adapt.device import resolve_device
from sparse_adapt.modeling.base import build_mlm_from_encoder, load_encoder
from sparse_adapt.modeling.encoder import SpladeEncoder, SpladeSettings


def encoder_to_splade(
    name_or_path: str, bias: float, *, trust_remote_code: bool = False, device: str | torch.device | None = None,
) -> SpladeEncoder:
    """Build a SPLADE base from a headless encoder with the shared decoder bias ``bias`` (the
    ``base`` command builds with 0 and then calibrates with :func:`calibrate_bias`).

    ``device``: where the model is built (None: the process default)."""
    encoder, tokenizer = load_encoder(name_or_path, trust_remote_code)
    mlm = build_mlm_from_encoder(encoder, bias=bias)
    splade = SpladeEncoder(mlm, tokenizer, SpladeSettings(base=str(name_or_path))).to(resolve_device(device))
    splade.exclude_special_tokens()  # the bias filled the special-token rows too
    return splade


@torch.inference_mode()
def calibrate_bias(splade: SpladeEncoder, texts: Sequence[str], target_active: int, batch_size: int = 16) -> float:
    """The shared bias b giving a median of ``target_active`` active terms per text.

    With one shared bias, term t is active in a text iff ``max_i (logit_{i,t} - b0) > -b``
    where b0 is the current bias; so b = -(target-th largest bias-free max logit), per text,
    and the median over texts is exact, no search needed. The max logits come from the
    model's own pooling (``SpladeEncoder.max_logits``).
    """
    if target_active < 1:
        raise ValueError("target_active must be >= 1")
    # The shared bias, read from a row that is not excluded (special rows hold EXCLUDED_BIAS).
    allowed = int(splade.output_mask.nonzero()[0, 0])
    current = float(splade.mlm.get_output_embeddings().bias[allowed])
    thresholds = []
    for start in range(0, len(texts), batch_size):
        batch = splade.tokenize(texts[start : start + batch_size], "document")
        best = splade.max_logits(batch["input_ids"], batch["attention_mask"]) - current  # (B, V)
        best = best.masked_fill(splade.output_mask == 0, float("-inf"))
        top = best.topk(target_active + 1, dim=1).values  # (B, k + 1)
        # Midway between the target-th and the next value, so ties at the edge don't flip it.
        thresholds.extend(((top[:, -2] + top[:, -1]) / 2).tolist())
    thresholds.sort()
    return -float(thresholds[len(thresholds) // 2])
