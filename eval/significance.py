"""Paired significance for two evaluations of the same questions."""

from __future__ import annotations

from scipy.stats import binomtest


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test on discordant pairs (ties dropped): the probability, under
    "neither is better", of a split at least as uneven as ``wins`` vs ``losses``. That is a
    binomial test of ``wins`` out of ``wins + losses`` at p = 0.5 (scipy's); no discordant pair
    is no evidence either way (1.0)."""
    n = wins + losses
    if n == 0:
        return 1.0
    return float(binomtest(wins, n, 0.5, alternative="two-sided").pvalue)


def paired_counts(a: dict[str, bool], b: dict[str, bool]) -> tuple[int, int]:
    """(questions b gets right and a wrong, questions a gets right and b wrong) over shared keys."""
    keys = a.keys() & b.keys()
    return sum(b[k] and not a[k] for k in keys), sum(a[k] and not b[k] for k in keys)
