"""Sections 2-4 of one token id: the term's own token, or one of its pieces."""

from __future__ import annotations

from dataclasses import dataclass

from diagnostics.sections.expansion import QueryExpansion
from diagnostics.sections.logits import LogitAnalysis
from diagnostics.sections.ranking import Ranking
from diagnostics.sections.weight import WeightCheck


@dataclass
class TargetDiagnosis:
    """Sections 2-4 for one token id (the term, or one of its pieces)."""

    token_id: int
    token: str
    logits: LogitAnalysis
    weight: WeightCheck
    ranking: Ranking
    query_expansion: QueryExpansion | None
