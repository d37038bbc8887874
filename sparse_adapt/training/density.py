"""How dense distillation leaves the document vectors: counted on a sample of candidate
documents before and after the distill stage (and after ``distill.interpolate``), with a
warning when the index would grow several times over."""

from __future__ import annotations

from typing import Sequence

from sparse_adapt.data import TrainExample
from sparse_adapt.modeling.encoder import SpladeEncoder

# Candidate documents whose active terms are counted before and after distillation: enough for
# a stable mean, few enough to cost two encoding batches.
DENSITY_SAMPLE = 64
# A document vector this many times denser than before distillation makes a sparse index that
# much larger and slower; measured: the domain hinge at tau_min 3.5 drove offline-splade-tiny's
# documents naming a domain term from ~100 to 6,000-13,000 active terms (bench/RESULTS.md).
DENSITY_WARNING = 4.0


def density_sample(examples: Sequence[TrainExample]) -> list[str]:
    """The first :data:`DENSITY_SAMPLE` distinct candidate documents of ``examples``."""
    return list(dict.fromkeys(t for ex in examples for t in ex.doc_texts))[:DENSITY_SAMPLE]


def document_density(splade: SpladeEncoder, texts: Sequence[str]) -> float:
    """Mean number of active (non-zero) terms per document vector of ``texts``."""
    if not texts:
        return 0.0
    return float(splade.encode(list(texts), "document").getnnz(axis=1).mean())


def density_warning(before: float, after: float, tau_min: float, pres_form: str = "vectors") -> str | None:
    """The line that tells a user distillation made the documents much denser, or empty, or None.

    It names the setting that fixed this where it was measured: ``pres_form = "all-texts"``
    kept offline-splade-tiny's documents at 58-75 active terms (3,500-5,200 with the default)
    and raised its held-out retrieval on the dev domains (bench/RESULTS.md); a lower
    ``tau_min`` also keeps them sparse but retrieved worse there.
    """
    if before > 0 and after == 0:  # lr or weight decay large enough to push every logit below 0
        return ("warning: distill: the documents now activate no term at all (mean 0, "
                f"{before:.0f} before this stage): the model retrieves nothing; train again with a lower distill.lr "
                "or distill.weight_decay")
    if before <= 0 or after <= DENSITY_WARNING * before:
        return None
    fix = (
        'distill.pres_form = "all-texts" (preservation of the domain texts\' general words) kept a trained '
        f"SPLADE base's documents sparse; a lower distill.tau_min (now {tau_min}) does too"
        if pres_form != "all-texts" else f"a lower distill.tau_min (now {tau_min}) keeps the vectors sparser"
    )
    return (
        f"warning: distill: documents now activate {after:.0f} terms on average ({before:.0f} before this stage); "
        f"an index of this model is ~{after / before:.0f}x larger and slower. The domain hinge forces domain "
        f"weights up to distill.tau_min = {tau_min}; {fix}"
    )
