"""Checkpoints of the local engine: enough to resume with no step lost or repeated.

A checkpoint folder holds the policy in HF format (loadable by ``pasr eval --model``), the
optimizer state, every RNG state (python, numpy, torch) and the trainer state (global step).
It is written under a temporary name and renamed, and ``latest`` is updated last, so a run
killed mid-save resumes from the previous complete checkpoint.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import numpy as np
import torch

from data.atomic_write import naming_full_disk, replace_text
from runtime.model_loading import LATEST, checkpoint_named_by


def _rng_state() -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_initialized():  # sampling on a GPU draws from its own generator
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(ckpt_root: Path, step: int, model, tokenizer, optimizer, state: dict, keep_last: int) -> Path:
    """Write checkpoint ``step`` and point ``latest`` at it, then :func:`prune`. A failed write
    (a full disk: :class:`~data.atomic_write.DiskFullError`) leaves no part of it behind and
    ``latest`` where it was."""
    final = ckpt_root / f"step_{step:06d}"
    tmp = ckpt_root / f".tmp_step_{step:06d}"
    try:
        with naming_full_disk(final):
            ckpt_root.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            torch.save({"optimizer": optimizer.state_dict() if optimizer is not None else None, "rng": _rng_state()}, tmp / "trainer.pt")
            (tmp / "trainer_state.json").write_text(json.dumps({**state, "step": step}, indent=2))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    replace_text(ckpt_root / LATEST, final.name)
    prune(ckpt_root, keep_last)
    return final


def prune(ckpt_root: Path, keep_last: int) -> None:
    """Keep the pinned checkpoints and the ``keep_last`` newest up to ``latest``. Called after
    every save and on resume: a run killed between a save and its pruning would otherwise keep
    the extra checkpoint for good (its resume may save nothing more). Checkpoints newer than
    ``latest`` (killed between renaming one into place and pointing ``latest`` at it) are
    dropped, since their steps are redone, and so are saves cut off mid-write (``.tmp_step_*``:
    no other process writes here, :mod:`recipe.run_lock`)."""
    latest = latest_checkpoint(ckpt_root)
    if latest is None:  # nothing is known to be complete: keep everything
        return
    pinned = _pinned(ckpt_root)
    unpinned = [p for p in sorted(ckpt_root.glob("step_*")) if p.name not in pinned]
    kept = [p for p in unpinned if p.name <= latest.name][-keep_last:]
    for stale in [p for p in unpinned if p not in kept] + sorted(ckpt_root.glob(".tmp_step_*")):
        shutil.rmtree(stale, ignore_errors=True)


def _pinned(ckpt_root: Path) -> set[str]:
    pins = ckpt_root / "pinned"
    return set(pins.read_text().split()) if pins.is_file() else set()


def pin(ckpt_root: Path, path: Path) -> None:
    """Keep this checkpoint whatever ``keep_last`` says (e.g. the end of the warm-up)."""
    pins = _pinned(ckpt_root) | {path.name}
    replace_text(ckpt_root / "pinned", "\n".join(sorted(pins)) + "\n")


def latest_checkpoint(ckpt_root: Path) -> Path | None:
    pointer = ckpt_root / LATEST
    return checkpoint_named_by(pointer) if pointer.is_file() else None


def load_trainer_state(path: Path, optimizer) -> dict:
    blob = torch.load(path / "trainer.pt", weights_only=False)
    if optimizer is not None and blob["optimizer"] is not None:
        optimizer.load_state_dict(blob["optimizer"])
    _set_rng_state(blob["rng"])
    return trainer_state(path)


def trainer_state(path: Path) -> dict:
    """What checkpoint ``path`` records of the run (``step``, ``phase``, ...), without loading it."""
    return json.loads((path / "trainer_state.json").read_text())
