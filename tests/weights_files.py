"""Weights files rewritten in place, as a run's inputs can be under it (tests/test_owned_weights.py,
tests/test_run_inputs.py)."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import numpy as np
import torch


def rewrite_in_place(weights: Path) -> None:
    """Every float of safetensors file ``weights`` negated, written over the same inode at the
    same size (the header untouched): other weights in the file a model was loaded from."""
    raw = bytearray(weights.read_bytes())
    (n,) = struct.unpack("<Q", raw[:8])
    body = np.frombuffer(bytes(raw[8 + n :]), dtype=np.uint8).copy()
    body[3::4] ^= 0x80  # the sign bit of each little-endian float32
    inode = weights.stat().st_ino
    with open(weights, "r+b") as f:
        f.seek(8 + n)
        f.write(body.tobytes())
    assert weights.stat().st_ino == inode


def copy_other_model_over(weights: Path, seed: int = 1) -> None:
    """``cp`` of another initialisation's weights file over ``weights``: truncated and rewritten,
    the same inode."""
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(seed)
    other = weights.parent.parent / f"other_{seed}"
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(weights.parent)).save_pretrained(other)
    inode = weights.stat().st_ino
    shutil.copyfile(other / "model.safetensors", weights)
    assert weights.stat().st_ino == inode
