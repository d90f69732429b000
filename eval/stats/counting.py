"""Bounded-memory counting for ``pasr stats``: every number of a group is built from these.

A dump can hold millions of responses, so nothing keeps them: texts are counted in a counter
that sheds its rarest half when it grows too large, examples are a reservoir sample, lengths are
exact integer histograms (bounded by the number of distinct lengths) summarised at the end.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

TOP_TEXT_CAP = 20000  # distinct keys a BoundedCounter keeps before pruning


def rate(num: float, den: float) -> float | None:
    """``num / den``, or None when nothing was counted (a rate of nothing is not 0)."""
    return num / den if den else None


class BoundedCounter:
    """A counter of at most ``cap`` keys: when it grows past ``cap`` the rarer half is dropped
    (counts of texts seen fewer times than that are then approximate; flagged)."""

    def __init__(self, cap: int = TOP_TEXT_CAP):
        self.cap = cap
        self.counts: Counter[str] = Counter()
        self.pruned = False

    def add(self, key: str) -> None:
        self.counts[key] += 1
        if len(self.counts) > self.cap:
            self.counts = Counter(dict(self.counts.most_common(self.cap // 2)))
            self.pruned = True

    def top(self, k: int) -> list[dict[str, Any]]:
        return [{"text": t, "count": c} for t, c in self.counts.most_common(k)]


class Reservoir:
    """Uniform sample of at most ``size`` items from a stream (reservoir sampling). Callers ask
    :meth:`slot` first and build the item only when it is kept."""

    def __init__(self, size: int, rng: random.Random):
        self.size, self.rng, self.seen, self.items = size, rng, 0, []

    def slot(self) -> int:
        """Index to store the next item at, or -1 when it is not kept."""
        self.seen += 1
        if len(self.items) < self.size:
            self.items.append(None)
            return len(self.items) - 1
        if self.size <= 0:
            return -1
        j = self.rng.randrange(self.seen)
        return j if j < self.size else -1


def distribution(counts: Counter[int], edges: tuple[int, ...]) -> dict[str, Any]:
    """Summary of an exact integer histogram: n, mean, median, p90, max and counts binned by
    ``edges`` (bin i is ``[edges[i], edges[i+1])``, the last one open)."""
    n = sum(counts.values())
    out: dict[str, Any] = {"n": n, "mean": None, "median": None, "p90": None, "max": None}
    binned = [0] * len(edges)
    for v, c in counts.items():
        i = len(edges) - 1
        while i > 0 and v < edges[i]:
            i -= 1
        binned[i] += c
    out["bin_edges"] = list(edges) + [None]
    out["bin_counts"] = binned
    if n:
        out["mean"] = sum(v * c for v, c in counts.items()) / n
        out["max"] = max(counts)
        ordered = sorted(counts.items())

        def quantile(q: float) -> int:
            target = q * (n - 1)
            acc = 0
            for v, c in ordered:
                acc += c
                if acc - 1 >= target:
                    return v
            return ordered[-1][0]

        out["median"] = quantile(0.5)
        out["p90"] = quantile(0.9)
    return out
