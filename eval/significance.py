"""Paired significance for two evaluations of the same questions."""

from __future__ import annotations

from math import comb


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test on discordant pairs (ties dropped): the probability, under
    "neither is better", of a split at least as uneven as ``wins`` vs ``losses``."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired_counts(a: dict[str, bool], b: dict[str, bool]) -> tuple[int, int]:
    """(questions b gets right and a wrong, questions a gets right and b wrong) over shared keys."""
    keys = a.keys() & b.keys()
    return sum(b[k] and not a[k] for k in keys), sum(a[k] and not b[k] for k in keys)
