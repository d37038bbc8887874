"""Training losses, one per module (sentence-transformers ``sparse_encoder/losses`` style)."""

from sparse_adapt.losses.contrastive import ContrastiveLoss
from sparse_adapt.losses.distillation import TERMS, DistillationLoss, sparsity_ramp
from sparse_adapt.losses.domain_hinge import DomainHingeLoss
from sparse_adapt.losses.flops import FlopsLoss
from sparse_adapt.losses.kd import KDLoss
from sparse_adapt.losses.query_expansion import QueryExpansionLoss
from sparse_adapt.losses.ranking import RankingLoss

__all__ = [
    "TERMS", "ContrastiveLoss", "DistillationLoss", "DomainHingeLoss", "FlopsLoss", "KDLoss",
    "QueryExpansionLoss", "RankingLoss", "sparsity_ramp",
]
