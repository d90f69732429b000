"""How the local trainer runs on this machine: torch threads, the attention implementation,
the rollout dtype and update autocast, and the model that generates.

Each choice is the config's where it names one; ``0`` threads and ``auto`` dtypes follow the one
rule training and ``pasr eval`` share (:mod:`runtime.cpu_dtype`: measured on the device that
computes). The choices are printed to stderr, since they decide what a step costs.
"""

from __future__ import annotations

import copy
import dataclasses
import sys

import torch

from recipe.local_engine.config import AlgoConfig, ModelConfig


def choose_threads(threads: int, device: str) -> None:
    """``model.threads`` torch threads, or (0) :func:`runtime.cpu_dtype.decide_threads`'s choice."""
    from runtime.cpu_dtype import decide_threads

    decide_threads(threads, device)


def choose_attention(model, attention: str) -> str:
    """Grouped-query attention without KV copies (``model.attention=grouped``); the bf16
    rollout copy and the KL reference are deep copies and inherit it. Returns the attention
    in use."""
    from runtime.gqa_attention import use_attention

    chosen = use_attention(model, attention)
    print(f"attention: {chosen}", file=sys.stderr)
    return chosen


def choose_dtypes(m: ModelConfig, a: AlgoConfig, device: str) -> tuple[str, AlgoConfig]:
    """Rollout dtype and update autocast: as configured, or (``auto``) the compute dtype
    :func:`runtime.cpu_dtype.resolve_dtype` measures on ``device``, as ``pasr eval`` decides
    its own: bf16 rollouts on a copy and bf16 autocast in the update where bf16 is measurably
    faster there, the master weights staying ``model.dtype``.

    Returns the rollout dtype and ``a`` with ``bf16_autocast`` resolved (the config itself,
    and config.yaml, keep what was asked)."""
    from runtime.cpu_dtype import AUTO, resolve_dtype

    auto = m.rollout_dtype == AUTO or a.bf16_autocast is None
    on_cpu = device == "cpu"
    choice = resolve_dtype(AUTO, device=device) if auto else None
    auto_dtype, auto_bf16 = (choice.dtype, choice.use_bf16) if choice is not None else (m.dtype, False)
    rollout_dtype = auto_dtype if m.rollout_dtype == AUTO else m.rollout_dtype
    algo = dataclasses.replace(a, bf16_autocast=auto_bf16 if a.bf16_autocast is None else a.bf16_autocast)
    if choice is not None:
        print(choice.describe(), file=sys.stderr)
    where = f"{torch.get_num_threads()} torch threads" if on_cpu else device
    print(
        f"rollouts in {rollout_dtype}, update bf16 autocast {'on' if algo.bf16_autocast else 'off'} ({where})",
        file=sys.stderr,
    )
    return rollout_dtype, algo


def generator(model, rollout_dtype: str, rollout_model):
    """The policy for generation, synced with the trained weights: ``model`` itself when it
    is in ``rollout_dtype``, else its copy in that dtype (``rollout_model``: made when there is
    none, else refreshed; a PASR step lets it go before its update). Returns the generator and
    the copy to keep (None if none)."""
    dtype = getattr(torch, rollout_dtype)
    if dtype == model.dtype:
        return model, rollout_model
    if rollout_model is None:
        rollout_model = copy.deepcopy(model).to(dtype).eval().requires_grad_(False)
    else:
        with torch.no_grad():
            for dst, src in zip(rollout_model.parameters(), model.parameters()):
                dst.copy_(src)
    return rollout_model, rollout_model
