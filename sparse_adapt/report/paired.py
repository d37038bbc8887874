"""Paired comparison of two systems on the same queries: wins, ties, losses and the two-sided
p-value of a paired permutation test of the mean difference (sign flips of the per-query
differences; Fisher's randomisation test as used for IR evaluation by Smucker, Allan and
Carterette, "A comparison of statistical significance tests for information retrieval
evaluation", CIKM 2007). The benchmark pools queries (each its seeds' mean) with it; ``bench/``
reuses it."""

from __future__ import annotations

import numpy as np
from scipy import stats

# scipy enumerates all 2^n sign flips while 2^n <= RESAMPLES (n <= 16 pairs that differ), and
# draws RESAMPLES of them (seeded) beyond that.
RESAMPLES = 100_000
# Per-query nDCG differences this small are float noise, not a win or a loss.
TIE = 1e-9


def paired_test(adapted: np.ndarray, base: np.ndarray, tie: float = TIE) -> dict:
    """Wins / ties / losses of ``adapted`` over ``base`` (per-query values in the same order; a
    difference within ``tie`` is a tie) and the two-sided p-value of a paired permutation test
    of the mean difference."""
    adapted, base = np.asarray(adapted, dtype=float), np.asarray(base, dtype=float)
    diff = adapted - base
    # A tie flips to itself: leaving ties out changes no flip's statistic relative to the others
    # (the sum of the rest), and keeps the test exact for up to 16 pairs that differ.
    moved = np.abs(diff) > tie
    if moved.sum() < 2:
        p = 1.0  # one pair's two sign flips are equally extreme; all ties: the statistic cannot move
    else:
        p = float(stats.permutation_test(
            (adapted[moved], base[moved]), lambda x, y: np.mean(x - y), permutation_type="samples",
            n_resamples=RESAMPLES, alternative="two-sided", random_state=0,
        ).pvalue)
    return {"wins": int((diff > tie).sum()), "ties": int((np.abs(diff) <= tie).sum()),
            "losses": int((diff < -tie).sum()), "p_value": round(min(p, 1.0), 6)}
