"""Section 2, MLM logit analysis: the logit of the term's token at every position."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

@dataclass
class PositionLogit:
    position: int
    token: str
    logit: float
    occurrence: bool  # this position is (part of) an occurrence of the term


@dataclass
class LogitAnalysis:
    positions: list[PositionLogit]
    occurrences: list[int]  # positions where this token occurs as part of the term
    min_logit: float  # over all positions
    max_logit: float
    max_position: int
    occurrence_min: float | None
    occurrence_max: float | None
    occurrence_mean: float | None
    verdict: str  # "positive" (all occurrence logits > 0), "mixed", "negative", "absent"


def logit_analysis(column: np.ndarray, tokens: list[str], occurrences: list[int]) -> LogitAnalysis:
    occ = set(occurrences)
    at = column[sorted(occ)] if occ else np.zeros(0)
    if not occ:
        verdict = "absent"
    elif (at > 0).all():
        verdict = "positive"
    elif (at > 0).any():
        verdict = "mixed"
    else:
        verdict = "negative"
    return LogitAnalysis(
        positions=[PositionLogit(i, tokens[i], float(column[i]), i in occ) for i in range(len(column))],
        occurrences=sorted(occ),
        min_logit=float(column.min()),
        max_logit=float(column.max()),
        max_position=int(column.argmax()),
        occurrence_min=float(at.min()) if occ else None,
        occurrence_max=float(at.max()) if occ else None,
        occurrence_mean=float(at.mean()) if occ else None,
        verdict=verdict,
    )
