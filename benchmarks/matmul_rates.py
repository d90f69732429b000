"""This CPU's matmul rates at the model's shapes, and the floors they give
(:mod:`benchmarks.step_floors`).

The rate is measured on matmuls of the same shapes as the model's linear maps and output
layer, at the same number of rows (one decode step's live rows, one micro-batch's tokens), in
the dtype the engine ran; a part's floor is its FLOPs (:mod:`benchmarks.flop_count`) over that
rate, plus the backward pass for the parts that train.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.flop_count import Shapes, Work

# Rows of the probe matmuls: from one decode row to a long micro-batch; rates in between are
# interpolated in log(rows), beyond the ends held.
LINEAR_ROWS = (1, 4, 16, 64, 256, 1024)
LOGIT_ROWS = (1, 4, 16, 64, 256)  # the output layer saturates sooner, and a 49k-wide probe is slow


# ---------------------------------------------------------------- rates and floors
@dataclass
class Rates:
    """FLOP/s this CPU reached on the model's matmuls in one dtype, by kind and rows; forward
    shapes, and (``backward``) the two transposed products a linear layer's backward pass runs.
    Attention is charged at the linear rate: its matmuls are smaller, so this keeps the floor
    a floor."""

    dtype: str
    forward: dict[str, dict[int, float]]
    backward: dict[str, dict[int, float]]

    def at(self, kind: str, rows: int, backward: bool = False) -> float:
        table = (self.backward if backward else self.forward)["linear" if kind == "attention" else kind]
        grid = sorted(table)
        if rows <= grid[0]:
            return table[grid[0]]
        if rows >= grid[-1]:
            return table[grid[-1]]
        hi = next(g for g in grid if g >= rows)
        lo = grid[grid.index(hi) - 1]
        t = (math.log(rows) - math.log(lo)) / (math.log(hi) - math.log(lo))
        return math.exp((1 - t) * math.log(table[lo]) + t * math.log(table[hi]))


def floor_seconds(work: Sequence[Work], rates: Rates, train: bool = False) -> float:
    """Seconds ``work`` takes at ``rates``: each item's FLOPs over the rate of its kind at its
    rows; ``train`` adds the backward pass, twice the forward FLOPs (the gradients of the
    inputs and of the weights) at the backward shapes' rate."""
    seconds = sum(w.flops / rates.at(w.kind, w.rows) for w in work)
    if train:
        seconds += sum(2 * w.flops / rates.at(w.kind, w.rows, backward=True) for w in work)
    return seconds


def time_linear(dtype, rows: int, k: int, n: int, reps: int = 3) -> float:
    """Best-of-``reps`` seconds of ``F.linear`` on ``rows x k`` inputs and an ``n x k`` weight,
    after a warm-up: the layout the model's layers use. :func:`runtime.cpu_dtype.time_matmul`
    multiplies by a ``k x n`` matrix instead, which at a few rows runs another kernel (one bf16
    row through the output layer: 7 GFLOP/s that way, 17 this way, on the 2-core EPYC)."""
    import torch

    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(rows, k, generator=gen).to(dtype), torch.randn(n, k, generator=gen).to(dtype)
    torch.nn.functional.linear(x, w)
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        torch.nn.functional.linear(x, w)
        best = min(best, time.perf_counter() - start)
    return best


def measure_rates(shapes: Shapes, dtype: str, reps: int = 5) -> Rates:
    """The model's matmuls timed on this CPU (best of ``reps``) in ``dtype`` at
    :data:`LINEAR_ROWS` / :data:`LOGIT_ROWS` rows: a layer's seven linear maps together, and the
    output layer. Forward: :func:`time_linear`; backward: the two products autograd runs for a
    linear layer, ``d out @ W`` and ``d out^T @ x``, as plain matmuls
    (:func:`runtime.cpu_dtype.time_matmul`, whose layout they have)."""
    import torch

    from runtime.cpu_dtype import time_matmul

    dt = getattr(torch, dtype)

    def forward(products: list[tuple[int, int, int]]) -> float:
        return sum(2 * m * k * n for m, k, n in products) / sum(time_linear(dt, m, k, n, reps) for m, k, n in products)

    def backward(products: list[tuple[int, int, int]]) -> float:
        grads = [s for m, k, n in products for s in ((m, n, k), (n, m, k))]
        return sum(2 * m * k * n for m, k, n in grads) / sum(time_matmul(dt, s, reps) for s in grads)

    def head(rows: int) -> list[tuple[int, int, int]]:
        return [(rows, shapes.hidden, shapes.vocab)]

    return Rates(
        dtype,
        forward={
            "linear": {m: forward(shapes.linear_shapes(m)) for m in LINEAR_ROWS},
            "logits": {m: forward(head(m)) for m in LOGIT_ROWS},
        },
        backward={
            "linear": {m: backward(shapes.linear_shapes(m)) for m in LINEAR_ROWS},
            "logits": {m: backward(head(m)) for m in LOGIT_ROWS},
        },
    )
