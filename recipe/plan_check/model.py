"""What ``pasr check`` knows of a model before anything loads it: its size, attention heads and
whether its folder is one verl can load.

A local folder's ``config.json`` is read (parameters counted from its hidden size, layers,
vocabulary, MLP and experts; heads as vLLM splits them); a hub name gives only the size it
spells, read strictly (``Qwen3-30B-A3B`` is 30B with 3B active, ``Qwen2.5-7B-Instruct-1M`` is
7B with a 1M-token context), and everything it does not spell is ``None``: unknown, said as
such, never guessed.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

REMOTE_PREFIXES = ("hdfs://", "s3://", "gs://")  # verl copies these to local disk at start
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


@dataclass(frozen=True)
class ModelShape:
    """A model's figures, each None when unknown; ``source`` says where they come from (or, with
    no size, why there is none)."""

    params: float | None = None  # every parameter (the memory the weights take)
    active: float | None = None  # parameters a token goes through (a mixture of experts: fewer)
    heads: int | None = None  # num_attention_heads
    kv_heads: int | None = None  # num_key_value_heads
    source: str = "unknown"

    @property
    def compute_params(self) -> float | None:
        return self.active if self.active is not None else self.params


def is_local_path(path: str) -> bool:
    """Whether transformers reads ``path`` from disk (else it is a hub name, fetched at start)."""
    text = str(path)
    return text.startswith((".", "/", "~")) or Path(text).expanduser().exists()


def human(params: float) -> str:
    return f"{params / 1e9:.1f}B" if params >= 1e9 else f"{params / 1e6:.0f}M"


# --------------------------------------------------------------------------- config.json
def _positive_int(config: dict, key: str, default=None) -> int | None:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def _text_config(config: dict) -> dict:
    """The language model's part of a config (multimodal configs nest it in ``text_config``)."""
    inner = config.get("text_config")
    return inner if "hidden_size" not in config and isinstance(inner, dict) else config


def shape_from_config(config: dict) -> tuple[ModelShape | None, str]:
    """``(shape, '')`` from a parsed ``config.json``, or ``(None, why)`` when it lacks a size key
    or holds one that cannot be (zero, negative, not a whole number)."""
    c = _text_config(config)
    named = {k: _positive_int(c, k) for k in ("hidden_size", "num_hidden_layers", "vocab_size", "num_attention_heads")}
    bad = [f"{k}={c.get(k)!r}" for k, v in named.items() if v is None]
    if bad:
        return None, f"its config.json has no usable {', '.join(bad)}"
    h, layers, vocab, heads = named.values()
    kv = _positive_int(c, "num_key_value_heads", heads) or heads
    head_dim = _positive_int(c, "head_dim") or h // heads
    inter = _positive_int(c, "intermediate_size") or 4 * h
    attention = 2 * h * heads * head_dim + 2 * h * kv * head_dim  # q and o, k and v
    dense = 3 * h * inter  # gated MLP
    experts = next(
        (v for k in ("num_experts", "num_local_experts", "n_routed_experts") if (v := _positive_int(c, k))), 0
    )
    if experts > 1:
        expert = 3 * h * (_positive_int(c, "moe_intermediate_size") or inter)
        shared = (_positive_int(c, "n_shared_experts") or 0) * expert
        if _positive_int(c, "shared_expert_intermediate_size"):
            shared += 3 * h * c["shared_expert_intermediate_size"]
        top_k = min(experts, _positive_int(c, "num_experts_per_tok") or 1)
        dense_layers = min(layers, _positive_int(c, "first_k_dense_replace") or 0)
        moe_layers = layers - dense_layers
        total_mlp = dense_layers * dense + moe_layers * (experts * expert + shared + h * experts)
        active_mlp = dense_layers * dense + moe_layers * (top_k * expert + shared + h * experts)
    else:
        total_mlp = active_mlp = layers * dense
    embed = vocab * h * (1 if c.get("tie_word_embeddings") else 2)
    params = float(layers * attention + total_mlp + embed)
    active = float(layers * attention + active_mlp + embed) if experts > 1 else None
    return ModelShape(params, active, heads, kv, "its config.json"), ""


def read_config(path: str) -> tuple[dict | None, str]:
    """``(config.json as a dict, '')`` of the local folder ``path``, or ``(None, why not)``."""
    folder = Path(os.path.expanduser(str(path)))
    file = folder / "config.json"
    if not folder.is_dir():
        return None, "no such folder" if not folder.exists() else "not a folder"
    if not file.is_file():
        return None, "no config.json in it"
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, f"its config.json does not read as JSON ({str(exc).splitlines()[0][:80]})"
    if not isinstance(config, dict):
        return None, "its config.json is not a JSON object"
    return config, ""


# --------------------------------------------------------------------------- the name
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([BbMm])$")  # a whole part of the name: 7B, 1.5B, 135M
_ACTIVE = re.compile(r"^[Aa](\d+(?:\.\d+)?)[Bb]$")  # a mixture of experts' active size: A3B
_EXPERTS = re.compile(r"^\d+[xX]\d+(?:\.\d+)?[BbMm]$")  # 8x7B: the experts share layers, total unknown


def shape_from_name(name: str) -> ModelShape:
    """The size a hub name spells, read strictly: a part of the name (between ``-``, ``_`` and
    ``/``) that is a number and B or M. A 1M-9M part beside a B size, or alone, is a context
    length (``-1M``), not a size; ``A3B`` is a mixture of experts' active size; an ``8x7B`` name,
    or two different sizes, leave the size unknown."""
    parts = [p for p in re.split(r"[-_/\s]+", str(name)) if p]
    if any(_EXPERTS.match(p) for p in parts):
        return ModelShape(source="unknown (a mixture of experts named NxSIZE: its total is not in its name)")
    sizes, active = [], None
    for part in parts:
        if m := _ACTIVE.match(part):
            active = float(m[1]) * 1e9
        elif m := _SIZE.match(part):
            sizes.append((float(m[1]), m[2].lower()))
    billions = {v * 1e9 for v, unit in sizes if unit == "b"}
    millions = {v * 1e6 for v, unit in sizes if unit == "m" and v >= 10}  # 1M-9M: a context length
    found = billions or millions
    if len(found) != 1:
        why = "no size in its name" if not found else f"its name holds {len(found)} sizes"
        return ModelShape(source=f"unknown (no local config.json, {why})")
    params = found.pop()
    return ModelShape(params, active if active is not None and active < params else None, source="its name")


def model_shape(path: str) -> ModelShape:
    """The model's figures: from ``config.json`` where ``path`` is a local folder with one (its
    sizes unknown when that file lacks them), else from the name."""
    config, _ = read_config(path)
    if config is not None:
        shape, why = shape_from_config(config)
        return shape if shape is not None else ModelShape(source=f"unknown ({why})")
    return shape_from_name(Path(str(path)).name if is_local_path(path) else str(path))


def model_params(path: str) -> tuple[float | None, str]:
    """``(parameters, where the figure comes from)``: see :func:`model_shape`."""
    shape = model_shape(path)
    return shape.params, shape.source


def model_folder_problem(path: str) -> str | None:
    """Why verl could not load the local model folder ``path`` (missing, empty, no readable
    ``config.json``, no weights), or None: it loads it only after minutes of start-up."""
    config, why = read_config(path)
    if config is None:
        return why
    if "model_type" not in config and "architectures" not in config:
        return "its config.json names no model_type: not a Hugging Face model config"
    folder = Path(os.path.expanduser(str(path)))
    if not any(p.name.endswith(WEIGHT_SUFFIXES) for p in folder.iterdir()):
        return "no weights in it (*.safetensors or *.bin)"
    return None


def heads_problem(shape: ModelShape, tp: int) -> str | None:
    """Why vLLM cannot split the model's attention over ``tp`` GPUs, or None (also when the
    heads are unknown): the query heads must divide evenly, and the key/value heads either
    divide evenly or each be copied to a whole number of GPUs."""
    if shape.heads is None or tp <= 1:
        return None
    if shape.heads % tp:
        return f"its {shape.heads} attention heads do not split over tensor parallel {tp}"
    kv = shape.kv_heads or shape.heads
    if (kv >= tp and kv % tp) or (kv < tp and tp % kv):
        return f"its {kv} key/value heads do not split over (or copy evenly to) tensor parallel {tp}"
    return None


def heads_that_fit(shape: ModelShape, limit: int) -> list[int]:
    """The tensor-parallel sizes up to ``limit`` that the model's heads allow (for a hint)."""
    return [tp for tp in range(1, max(1, limit) + 1) if heads_problem(shape, tp) is None]
