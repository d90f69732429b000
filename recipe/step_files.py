"""The names of a run's per-step files: one spelling for both engines, ``pasr eval`` and the
benchmarks.

A step's checkpoint folder (the local engine's ``checkpoints/step_000012``) and its rollout dump
(``rollouts/step_000012.jsonl`` in both engines; a verl validation's ``val_step_000012.jsonl``)
carry the step zero-padded to six digits, so a listing sorts by step. verl names its own
checkpoints ``global_step_12``; :func:`step_of` reads both.
"""

from __future__ import annotations

import re
from pathlib import Path

STEP_GLOB = "step_*"  # every step_NNNNNN name in a folder (checkpoints, rollout dumps)
_STEP_NAME = re.compile(r"^(?:global_)?step_(\d+)$")


def step_name(step: int) -> str:
    """The name of step ``step``'s checkpoint folder, and the stem of its rollout dump.

    >>> step_name(12)
    'step_000012'
    """
    return f"step_{step:06d}"


def step_of(name: str) -> int | None:
    """The step a checkpoint folder or dump stem names (``step_000012``, verl's
    ``global_step_12``), None for any other name.

    >>> step_of("step_000012"), step_of("global_step_7"), step_of("latest")
    (12, 7, None)
    """
    m = _STEP_NAME.match(name)
    return int(m.group(1)) if m else None


def rollout_dump(rollout_dir: Path | str, step: int) -> Path:
    """The JSONL file of training step ``step``'s rollouts in ``rollout_dir`` (both engines)."""
    return Path(rollout_dir) / f"{step_name(step)}.jsonl"


def validation_dump(rollout_dir: Path | str, step: int) -> Path:
    """The JSONL file of the validation at step ``step`` in ``rollout_dir`` (the verl engine's;
    the local engine's evaluations are named by tag)."""
    return Path(rollout_dir) / f"val_{step_name(step)}.jsonl"
