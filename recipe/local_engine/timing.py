"""Wall-time metrics of a step: ``timing_s/<name>``, verl's naming."""

from __future__ import annotations

import time
from contextlib import contextmanager


@contextmanager
def timer(metrics: dict, name: str):
    """Add the block's wall time to ``metrics["timing_s/<name>"]`` (a phase timed in several
    blocks, such as RRR's two judge calls, is their sum)."""
    start = time.perf_counter()
    yield
    key = f"timing_s/{name}"
    metrics[key] = metrics.get(key, 0.0) + time.perf_counter() - start
