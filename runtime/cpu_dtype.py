"""What ``auto`` means for the compute dtype and the torch threads: one rule, decided here, for
training (the local engine) and evaluation (``pasr eval --backend hf``), on a CPU and on a GPU.

**dtype**: bf16 where a bf16 matmul runs at least :data:`MIN_SPEEDUP` times as fast as fp32 on
the device that computes, measured there at start-up (:func:`resolve_dtype`). bf16 is only fast
on CPUs with bf16 matmul instructions (AVX512-BF16, AMX); elsewhere PyTorch emulates it: on an
AVX2-only x86 a 512x576 @ 576x1536 matmul took 729 ms in bf16 and 11 ms in fp32 (64x slower),
which turned a 30-minute demo into a 7-hour one. On a GPU with bf16 tensor cores the probe
(a matmul large enough to be bound by its arithmetic, :data:`GPU_MATMUL_SHAPE`) picks bf16, as
verl computes (vLLM samples in bf16, FSDP trains bf16 over fp32 masters); on one without them,
fp32. Training keeps fp32 master weights either way (``model.dtype``): ``auto`` decides the
rollouts' dtype and the update's autocast. A probe takes about a tenth of a second.

**threads**: a count given is used; left to ``auto`` on a CPU, all cores only where a probe
shows they beat one (:func:`set_threads`); on a GPU, torch's own default (the CPU only feeds it).

**memory**: importing this module bounds oneDNN's shape caches (:mod:`runtime.onednn_caches`),
without which the bf16 path grows by tens of MB a training step.

``model.rollout_dtype`` / ``algo.bf16_autocast`` / ``model.threads`` (train) and ``--dtype`` /
``--threads`` (eval) still override the choice; ``auto`` or no flag asks for the measurement.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import torch

from runtime.onednn_caches import bound_onednn_caches

# before this module's probe, the first bf16 matmul of a run: oneDNN reads its caches' sizes then
bound_onednn_caches()

AUTO = "auto"
# bf16 must beat fp32 by this factor to be worth its precision loss in generation.
MIN_SPEEDUP = 1.3
# A SmolLM2-135M MLP projection for a batch of rollouts: the shape that dominates a step.
MATMUL_SHAPE = (512, 576, 1536)
# On a GPU the shape above takes microseconds in either dtype (kernel launches, not arithmetic):
# a matmul this large measures what the GPU's tensor cores do with each dtype.
GPU_MATMUL_SHAPE = (4096, 4096, 4096)


@dataclass(frozen=True)
class DtypeChoice:
    dtype: str  # float32 | bfloat16
    bf16_speedup: float  # fp32 time / bf16 time of the probe matmul (> 1: bf16 is faster)
    capability: str  # torch.backends.cpu.get_cpu_capability() (AVX2, AVX512), or the GPU's name
    measured: bool = True
    device: str = "cpu"  # where it was measured: cpu | cuda

    @property
    def use_bf16(self) -> bool:
        return self.dtype == "bfloat16"

    def describe(self) -> str:
        if not self.measured:  # forced: there is no speed-up to report (it is NaN)
            return f"{self.device} dtype: {self.dtype} (forced, not measured; capability {self.capability})"
        return (
            f"{self.device} dtype: {self.dtype} (bf16 matmul {self.bf16_speedup:.2f}x the speed of fp32 on this "
            f"{'GPU' if self.device == 'cuda' else 'CPU'}, capability {self.capability}; bf16 needs >= {MIN_SPEEDUP}x)"
        )


def cpu_capability() -> str:
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except Exception:  # older torch, exotic platforms
        return "unknown"


def time_matmul(
    dtype: torch.dtype, shape: tuple[int, int, int] = MATMUL_SHAPE, reps: int = 3, device: str = "cpu"
) -> float:
    """Best-of-``reps`` seconds for one ``(m x k) @ (k x n)`` matmul in ``dtype`` on ``device``,
    after a warm-up."""
    m, k, n = shape
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=gen).to(device=device, dtype=dtype)
    b = torch.randn(k, n, generator=gen).to(device=device, dtype=dtype)
    sync = torch.cuda.synchronize if device != "cpu" else (lambda: None)
    torch.mm(a, b)  # warm-up: kernel selection, page faults
    sync()
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        torch.mm(a, b)
        sync()
        best = min(best, time.perf_counter() - start)
    return best


def _choose(timer: Callable[[torch.dtype], float], capability: str, device: str) -> DtypeChoice:
    """bfloat16 where ``timer``'s bf16 matmul is at least :data:`MIN_SPEEDUP` times faster than
    its fp32 one, else float32 (also where bf16 does not run at all)."""
    fp32 = timer(torch.float32)
    try:
        bf16 = timer(torch.bfloat16)
    except RuntimeError:  # a device without bf16 kernels
        bf16 = float("inf")
    speedup = fp32 / bf16 if bf16 > 0 else 0.0
    return DtypeChoice("bfloat16" if speedup >= MIN_SPEEDUP else "float32", speedup, capability, device=device)


def choose_cpu_dtype(timer: Callable[[torch.dtype], float] = time_matmul) -> DtypeChoice:
    """The rule on this CPU (the module docstring). ``timer`` is injectable so tests can play any CPU."""
    return _choose(timer, cpu_capability(), "cpu")


def choose_gpu_dtype(timer: Callable[[torch.dtype], float] | None = None) -> DtypeChoice:
    """The same rule on the GPU torch uses, with :data:`GPU_MATMUL_SHAPE` (``timer`` injectable)."""
    timer = timer or (lambda dtype: time_matmul(dtype, GPU_MATMUL_SHAPE, device="cuda"))
    name = torch.cuda.get_device_name() if torch.cuda.is_available() else "unknown GPU"
    choice = _choose(timer, name, "cuda")
    if torch.cuda.is_available():
        torch.cuda.empty_cache()  # the probe's matrices
    return choice


@lru_cache(maxsize=1)
def measured_cpu_dtype() -> DtypeChoice:
    """:func:`choose_cpu_dtype`, measured once per process (the answer does not change)."""
    return choose_cpu_dtype()


@lru_cache(maxsize=1)
def measured_gpu_dtype() -> DtypeChoice:
    """:func:`choose_gpu_dtype`, measured once per process."""
    return choose_gpu_dtype()


def resolve_dtype(
    requested: str | None, measure: Callable[[], DtypeChoice] | None = None, device: str = "cpu"
) -> DtypeChoice:
    """The compute dtype for ``requested`` on ``device`` (cpu | cuda): an explicit
    float32/bfloat16/float16 is kept as given (not measured); ``auto`` or None is measured there
    (:func:`measured_cpu_dtype`, :func:`measured_gpu_dtype`), the one rule of training and
    evaluation (module docstring)."""
    if requested not in (None, AUTO):
        capability = cpu_capability() if device == "cpu" else device
        return DtypeChoice(requested, float("nan"), capability, measured=False, device=device)
    return (measure or (measured_cpu_dtype if device == "cpu" else measured_gpu_dtype))()


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
    (:func:`choose_threads` over the cores torch sees). Returns the number set."""
    n = requested if requested and requested > 0 else choose_threads(torch.get_num_threads(), timer)
    torch.set_num_threads(n)
    return n


def decide_threads(requested: int | None, device: str) -> int | None:
    """The thread rule of training (``model.threads``) and evaluation (``--threads``): a count
    given is set; left to ``auto`` (None or 0) the probe decides on a CPU (:func:`set_threads`),
    and on a GPU torch keeps its own default (None: the CPU only feeds the GPU there). Returns
    the count set, or None."""
    if device == "cpu" or (requested and requested > 0):
        return set_threads(requested)
    return None
