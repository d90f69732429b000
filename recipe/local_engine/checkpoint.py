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

LATEST = "latest"


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
    ckpt_root.mkdir(parents=True, exist_ok=True)
    final = ckpt_root / f"step_{step:06d}"
    tmp = ckpt_root / f".tmp_step_{step:06d}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    torch.save({"optimizer": optimizer.state_dict() if optimizer is not None else None, "rng": _rng_state()}, tmp / "trainer.pt")
    (tmp / "trainer_state.json").write_text(json.dumps({**state, "step": step}, indent=2))
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    pointer = ckpt_root / (LATEST + ".tmp")
    pointer.write_text(final.name)
    os.replace(pointer, ckpt_root / LATEST)
    pinned = _pinned(ckpt_root)
    unpinned = [p for p in sorted(ckpt_root.glob("step_*")) if p.name not in pinned]
    for stale in unpinned[:-keep_last]:
        shutil.rmtree(stale, ignore_errors=True)
    return final


def _pinned(ckpt_root: Path) -> set[str]:
    pins = ckpt_root / "pinned"
    return set(pins.read_text().split()) if pins.is_file() else set()


def pin(ckpt_root: Path, path: Path) -> None:
    """Keep this checkpoint whatever ``keep_last`` says (e.g. the end of the warm-up)."""
    pins = _pinned(ckpt_root) | {path.name}
    (ckpt_root / "pinned").write_text("\n".join(sorted(pins)) + "\n")


def latest_checkpoint(ckpt_root: Path) -> Path | None:
    pointer = ckpt_root / LATEST
    if not pointer.is_file():
        return None
    path = ckpt_root / pointer.read_text().strip()
    return path if (path / "trainer_state.json").is_file() else None


def load_trainer_state(path: Path, optimizer) -> dict:
    blob = torch.load(path / "trainer.pt", weights_only=False)
    if optimizer is not None and blob["optimizer"] is not None:
        optimizer.load_state_dict(blob["optimizer"])
    _set_rng_state(blob["rng"])
    return json.loads((path / "trainer_state.json").read_text())
