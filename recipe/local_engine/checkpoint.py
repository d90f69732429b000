"""Checkpoints of the local engine: enough to resume with no step lost or repeated.

A checkpoint folder holds the policy in HF format (safetensors in the training dtype, loadable
by ``pasr eval --model``), every RNG state (python, numpy, torch) and the trainer state (global
step) in ``trainer.pt`` and ``trainer_state.json``, and, in the newest checkpoint of an unfinished
run only, the optimizer state (``optimizer.pt``: AdamW's two moments, twice the weights' size). A
resume starts from ``latest``, so an older checkpoint's optimizer state is removed once ``latest``
names a newer one; the end of the warm-up is saved without it, since the phase after it starts
a fresh optimizer, and a finished run drops it unless ``trainer.keep_final_optimizer``.
A checkpoint is written under a temporary name and renamed, a pin is recorded before
``latest`` names the checkpoint and ``latest`` is updated last, so a run killed mid-save resumes
from the previous complete checkpoint and a kill never loses a pin.
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
from recipe.step_files import STEP_GLOB, step_name
from runtime.model_loading import LATEST, ModelNotFoundError, checkpoint_named_by

OPTIMIZER = "optimizer.pt"  # the optimizer state, in the newest checkpoint only
PINNED = "pinned"  # the names of the checkpoints kept whatever trainer.keep_last says, one a line


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


def save_checkpoint(
    ckpt_root: Path, step: int, model, tokenizer, optimizer, state: dict, keep_last: int, pin: bool = False
) -> Path:
    """Write checkpoint ``step`` and point ``latest`` at it, then :func:`prune`. ``optimizer``
    None: no optimizer state (what follows starts a fresh one). ``pin``: keep it whatever
    ``keep_last`` says (the end of the warm-up), recorded before ``latest`` names it: a stop
    between the two used to leave the checkpoint unpinned, and the resumed run pruned it. A
    failed write (a full disk: :class:`~data.atomic_write.DiskFullError`) leaves no part of it
    behind and ``latest`` where it was."""
    final = ckpt_root / step_name(step)
    tmp = ckpt_root / f".tmp_{step_name(step)}"
    try:
        with naming_full_disk(final):
            ckpt_root.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            torch.save({"rng": _rng_state()}, tmp / "trainer.pt")
            if optimizer is not None:
                torch.save(optimizer.state_dict(), tmp / OPTIMIZER)
            (tmp / "trainer_state.json").write_text(json.dumps({**state, "step": step}, indent=2))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    if pin:
        _write_pins(ckpt_root, _pinned(ckpt_root) | {final.name})
    replace_text(ckpt_root / LATEST, final.name)
    prune(ckpt_root, keep_last)
    return final


def prune(ckpt_root: Path, keep_last: int) -> None:
    """Keep the pinned checkpoints and the ``keep_last`` newest up to ``latest``, and the
    optimizer state of ``latest`` only (a resume starts from it). Called after every save and
    on resume: a run killed between a save and its pruning would otherwise keep the extra
    checkpoint for good (its resume may save nothing more). Checkpoints newer than ``latest``
    (killed between renaming one into place and pointing ``latest`` at it) are dropped, pinned
    or not, since their steps are redone (and pinned again), and so are saves cut off mid-write
    (``.tmp_step_*``: no other process writes here, :mod:`recipe.run_lock`)."""
    latest = latest_checkpoint(ckpt_root)
    if latest is None:  # nothing is known to be complete: keep everything
        return
    pinned = _pinned(ckpt_root)
    if any(name > latest.name for name in pinned):
        _write_pins(ckpt_root, {name for name in pinned if name <= latest.name})
    steps = sorted(ckpt_root.glob(STEP_GLOB))
    newer = [p for p in steps if p.name > latest.name]
    unpinned = [p for p in steps if p.name not in pinned and p not in newer]
    for stale in newer + unpinned[:-keep_last] + sorted(ckpt_root.glob(f".tmp_{STEP_GLOB}")):
        shutil.rmtree(stale, ignore_errors=True)
    for older in steps:
        if older.name < latest.name and older.is_dir():
            (older / OPTIMIZER).unlink(missing_ok=True)


def drop_optimizer(ckpt_root: Path) -> None:
    """Remove the optimizer state of ``latest`` (a finished run's last checkpoint: no resume
    reads it; extending the run then starts a fresh optimizer)."""
    latest = latest_checkpoint(ckpt_root)
    if latest is not None:
        (latest / OPTIMIZER).unlink(missing_ok=True)


def _pinned(ckpt_root: Path) -> set[str]:
    pins = ckpt_root / PINNED
    return set(pins.read_text().split()) if pins.is_file() else set()


def _write_pins(ckpt_root: Path, names: set[str]) -> None:
    replace_text(ckpt_root / PINNED, "".join(f"{name}\n" for name in sorted(names)))


def latest_checkpoint(ckpt_root: Path) -> Path | None:
    pointer = ckpt_root / LATEST
    return checkpoint_named_by(pointer) if pointer.is_file() else None


def resume_point(ckpt_root: Path) -> Path | None:
    """The checkpoint a resume starts from (:func:`latest_checkpoint`; None: the run was killed
    before its first one and starts over). ``latest`` moves only once a checkpoint is whole, so
    one naming a checkpoint that is gone or incomplete was deleted by hand: a
    :class:`ModelNotFoundError` saying what to do, where the run used to start over and drop
    every step it had logged."""
    latest = latest_checkpoint(ckpt_root)
    pointer = ckpt_root / LATEST
    if latest is None and pointer.is_file():
        named = ckpt_root / pointer.read_text().strip()
        raise ModelNotFoundError(
            f"{pointer} names {named}, which is gone or incomplete{unloadable_hint(ckpt_root, named)}"
        )
    return latest


def unloadable_hint(ckpt_root: Path, latest: Path) -> str:
    """What to do when ``latest``, the checkpoint a resume starts from, cannot be loaded (for the
    end of the one-line error): restore it, or resume from the complete checkpoint before it
    (what ``latest`` names is all a resume reads; the newer one is pruned then), or start over."""
    complete = [p for p in sorted(ckpt_root.glob(STEP_GLOB)) if (p / "trainer_state.json").is_file()]
    earlier = [p for p in complete if p.name < latest.name]
    how = (
        f"write {earlier[-1].name} into {ckpt_root / LATEST} to resume from the checkpoint before it"
        if earlier
        else "start the run over in a new --run-dir"
    )
    return f"; it is the checkpoint this run resumes from: restore it, or {how}"


def load_trainer_state(path: Path, optimizer) -> dict:
    """The RNG states of checkpoint ``path`` restored, and its optimizer state into
    ``optimizer`` when it keeps one; returns its trainer state (:func:`trainer_state`) with
    ``optimizer_restored``, whether it did."""
    blob = torch.load(path / "trainer.pt", weights_only=False)
    # older checkpoints kept the optimizer state inside trainer.pt
    saved = torch.load(path / OPTIMIZER, weights_only=False) if (path / OPTIMIZER).is_file() else blob.get("optimizer")
    if optimizer is not None and saved is not None:
        optimizer.load_state_dict(saved)
    _set_rng_state(blob["rng"])
    return {**trainer_state(path), "optimizer_restored": optimizer is not None and saved is not None}


def trainer_state(path: Path) -> dict:
    """What checkpoint ``path`` records of the run (``step``, ``phase``, ...), without loading it."""
    return json.loads((path / "trainer_state.json").read_text())
