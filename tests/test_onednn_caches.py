"""oneDNN's shape caches are bounded before the first bf16 matmul (runtime/onednn_caches.py): a
bf16 run that meets a new sequence length every micro-batch must not hold memory for each."""

from __future__ import annotations

import subprocess
import sys

import pytest

from runtime.onednn_caches import CAPACITY, VARIABLES, bound_onednn_caches

# 200 bf16 forward/backward passes of a two-layer MLP, each at a sequence length not seen
# before; prints the growth of malloc's bytes in use (glibc's mallinfo2) over them
GROWTH = """
import ctypes, sys
import runtime.cpu_dtype  # what training and pasr eval import before their first bf16 matmul
import torch
torch.set_num_threads(1)
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
mlp = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.Linear(128, 64))
def run(lengths):
    for n in lengths:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = mlp(torch.randn(1, n, 64)).float().sum()
        y.backward()
run(range(8, 28))
before = libc.mallinfo2().uordblks
run(range(28, 228))
print((libc.mallinfo2().uordblks - before) / 1e6)
"""


def growth_mb(env: dict) -> float:
    out = subprocess.run([sys.executable, "-c", GROWTH], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return float(out.stdout.strip().splitlines()[-1])


def test_the_caches_are_bounded_unless_the_user_chose_a_size():
    env = {}
    assert bound_onednn_caches(env) == {name: str(CAPACITY) for name in VARIABLES}
    env = {"LRU_CACHE_CAPACITY": "1024"}
    assert bound_onednn_caches(env)["LRU_CACHE_CAPACITY"] == "1024"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallinfo2")
def test_bf16_memory_stays_flat_over_new_shapes():
    import os

    base = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    unbounded = growth_mb({**base, **{name: "1024" for name in VARIABLES}})  # the libraries' defaults
    if unbounded < 50:
        pytest.skip(f"this CPU's bf16 matmuls do not go through oneDNN's caches ({unbounded:.1f} MB)")
    bounded = growth_mb(base)
    assert bounded < 20, (bounded, unbounded)  # 0.0 MB here; 506 MB unbounded
