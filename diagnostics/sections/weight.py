"""Section 3, SPLADE weight: ``log(1 + relu(max_i logit_i))`` by hand against ``encode``."""

from __future__ import annotations

import math
from dataclasses import dataclass

from diagnostics.sections.logits import LogitAnalysis
from sparse_adapt.modeling.encoder import SpladeEncoder

# Two fp32 forward passes of the same text differ by ~1e-6; a real pooling difference
# (another activation, a missing mask) is orders of magnitude larger.
WEIGHT_TOLERANCE = 1e-4

@dataclass
class WeightCheck:
    max_logit: float  # over all positions, [CLS]/[SEP] included (the model's pooling)
    max_position: int
    after_relu: float
    after_log1p: float
    special_token: bool  # zeroed in every vector by the model's output mask
    expected: float  # after_log1p, or 0 for a special token
    actual: float  # from splade.encode of the document
    abs_diff: float
    tolerance: float
    matches: bool


def weight_check(splade: SpladeEncoder, token_id: int, logits: LogitAnalysis, actual: float) -> WeightCheck:
    # The model's pooling: max over every non-padding position, [CLS]/[SEP] included,
    # then the output mask zeroes special tokens (a single document has no padding).
    m = logits.max_logit
    relu = max(m, 0.0)
    log1p = math.log1p(relu)
    special = bool(splade.output_mask[token_id] == 0)
    expected = 0.0 if special else log1p
    diff = abs(expected - actual)
    return WeightCheck(
        max_logit=m,
        max_position=logits.max_position,
        after_relu=relu,
        after_log1p=log1p,
        special_token=special,
        expected=expected,
        actual=actual,
        abs_diff=diff,
        tolerance=WEIGHT_TOLERANCE,
        matches=diff <= WEIGHT_TOLERANCE,
    )
