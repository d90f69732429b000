"""Bounded oneDNN caches on the CPU: the bf16 path's memory stays flat over a run's steps.

Why: on a CPU with bf16 matmul instructions PyTorch runs bf16 matmuls through oneDNN, which
keeps a compiled primitive for every input shape it has seen: in oneDNN's own primitive cache
(``ONEDNN_PRIMITIVE_CACHE_CAPACITY``, default 1024 entries) and in PyTorch's ideep layer
(``LRU_CACHE_CAPACITY``, default 1024). Training on text meets a new sequence length almost
every micro-batch, so both fill for the whole run: on the 2-core AMD EPYC (AVX512-BF16,
2026-11-28) the demo's bf16 warm-up held 23.5 MB more after every step (malloc's bytes in use;
flat in fp32, which uses no oneDNN there), and ``make demo`` peaked at 6.17 GB against 3.94 GB
on the fp32 path. With both caches at :data:`CAPACITY` entries the bytes in use stay flat: 30
bf16 warm-up steps peak at 3.76 GB instead of 4.79, and a step costs less CPU time (5.65 s
against 6.30: fewer pages touched), an RL step the same (35 s); docs/results/demo.md, "The bf16
path's memory". PyTorch's CPU performance guide gives the same advice for dynamic shapes.

Both libraries read their variable once, at their first bf16 matmul, so this must run before
any: :mod:`runtime.cpu_dtype` (whose dtype probe is that first matmul in training and in
``pasr eval``) calls it when imported. A value the user exported is kept.
"""

from __future__ import annotations

import os

# entries of each cache: a handful of shapes recur within a step (the layers' weights), the
# sequence lengths do not recur usefully across steps
CAPACITY = 16
VARIABLES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")


def bound_onednn_caches(env=os.environ, capacity: int = CAPACITY) -> dict[str, str]:
    """Set both caches' capacity in ``env`` where the user has not; returns the values in force."""
    for name in VARIABLES:
        env.setdefault(name, str(capacity))
    return {name: env[name] for name in VARIABLES}
