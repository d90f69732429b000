"""Pick the CPU compute dtype (and thread count) by measuring, not by preset.

bf16 is only fast on CPUs that have bf16 matmul instructions (AVX512-BF16, AMX). Elsewhere
PyTorch emulates it: on an AVX2-only x86 a 512x576 @ 576x1536 matmul took 729 ms in bf16 and
11 ms in fp32 (64x slower), which turned a 30-minute demo into a 7-hour one. So the local
engine and ``pasr eval --backend hf`` time one matmul of the model's shape in both dtypes at
start-up (about a tenth of a second) and use bf16 only where it actually wins.

``model.rollout_dtype`` / ``algo.bf16_autocast`` (train) and ``--dtype`` (eval) still override
the choice; ``auto`` (train) or no flag (eval) asks for the measurement.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import torch

AUTO = "auto"
# bf16 must beat fp32 by this factor to be worth its precision loss in generation.
MIN_SPEEDUP = 1.3
# A SmolLM2-135M MLP projection for a batch of rollouts: the shape that dominates a step.
MATMUL_SHAPE = (512, 576, 1536)


@dataclass(frozen=True)
class DtypeChoice:
    dtype: str  # float32 | bfloat16
    bf16_speedup: float  # fp32 time / bf16 time of the probe matmul (> 1: bf16 is faster)
    capability: str  # torch.backends.cpu.get_cpu_capability(), e.g. AVX2, AVX512
    measured: bool = True

    @property
    def use_bf16(self) -> bool:
        return self.dtype == "bfloat16"

    def describe(self) -> str:
        if not self.measured:  # forced: there is no speed-up to report (it is NaN)
            return f"cpu dtype: {self.dtype} (forced, not measured; capability {self.capability})"
        return (f"cpu dtype: {self.dtype} (bf16 matmul {self.bf16_speedup:.2f}x the speed of fp32 on this CPU,"
                f" capability {self.capability}; bf16 needs >= {MIN_SPEEDUP}x)")


def cpu_capability() -> str:
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except Exception:  # older torch, exotic platforms
        return "unknown"


def time_matmul(dtype: torch.dtype, shape: tuple[int, int, int] = MATMUL_SHAPE, reps: int = 3) -> float:
    """Best-of-``reps`` seconds for one ``(m x k) @ (k x n)`` matmul in ``dtype``, after a warm-up."""
    m, k, n = shape
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=gen).to(dtype)
    b = torch.randn(k, n, generator=gen).to(dtype)
    torch.mm(a, b)  # warm-up: kernel selection, page faults
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return best


def choose_cpu_dtype(timer: Callable[[torch.dtype], float] = time_matmul) -> DtypeChoice:
    """bfloat16 where a bf16 matmul is at least :data:`MIN_SPEEDUP` times faster than fp32,
    else float32. ``timer`` is injectable so tests can play any CPU."""
    fp32, bf16 = timer(torch.float32), timer(torch.bfloat16)
    speedup = fp32 / bf16 if bf16 > 0 else 0.0
    return DtypeChoice("bfloat16" if speedup >= MIN_SPEEDUP else "float32", speedup, cpu_capability())


@lru_cache(maxsize=1)
def measured_cpu_dtype() -> DtypeChoice:
    """:func:`choose_cpu_dtype`, measured once per process (the answer does not change)."""
    return choose_cpu_dtype()


def resolve_dtype(requested: str | None, measure: Callable[[], DtypeChoice] | None = None) -> DtypeChoice:
    """The dtype to use for ``requested``: an explicit float32/bfloat16/float16 is kept as given
    (not measured); ``auto`` or None is measured (:func:`measured_cpu_dtype` by default)."""
    if requested not in (None, AUTO):
        return DtypeChoice(requested, float("nan"), cpu_capability(), measured=False)
    return (measure or measured_cpu_dtype)()


def time_threads(n: int, shape: tuple[int, int, int] = MATMUL_SHAPE, reps: int = 3) -> float:
    """:func:`time_matmul` in fp32 with ``n`` torch threads (the previous count is restored)."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        return time_matmul(torch.float32, shape, reps)
    finally:
        torch.set_num_threads(before)


def choose_threads(
    max_threads: int, timer: Callable[[int], float] = time_threads, min_speedup: float = 1.25, rounds: int = 5
) -> int:
    """How many torch threads to use: all ``max_threads`` only when that measurably beats one.

    On a 2-core machine where another process keeps a core busy, two OpenMP threads spin-wait
    for each other and a step ran 7x slower than with one; on an idle one two threads are ~1.8x
    faster. A probe matmul tells the two apart at start-up. One thread and all of them are timed
    in turn, ``rounds`` times each (about a third of a second), and the best times compared: a
    busy core slows every many-thread probe, a moment of contention from outside (another VM on
    the host: the 2-core EPYC read 0.9-1.0 for a second, 1.8-2.5 around it) only some.
    """
    if max_threads <= 1:
        return 1
    one = many = float("inf")
    for _ in range(max(1, rounds)):
        one, many = min(one, timer(1)), min(many, timer(max_threads))
    return max_threads if many > 0 and one / many >= min_speedup else 1


def set_threads(requested: int | None, timer: Callable[[int], float] = time_threads) -> int:
    """Set torch's intra-op threads: ``requested`` when given (> 0), else the probe's choice
    (:func:`choose_threads` over the cores torch sees). The one place every CPU path decides
    it: the local engine (``model.threads``), ``pasr eval``'s hf backend (``--threads``) and the
    benchmarks. Returns the number set."""
    n = requested if requested and requested > 0 else choose_threads(torch.get_num_threads(), timer)
    torch.set_num_threads(n)
    return n
