"""A verl FSDP checkpoint as a Hugging Face model folder: what ``pasr eval --model CKPT`` loads.

verl 0.9.1 saves a checkpoint as per-rank FSDP shards (``model_world_size_W_rank_R.pt``, plus
``fsdp_config.json``) and an ``huggingface/`` folder holding only the config and tokenizer (full
weights only with ``actor.checkpoint.save_contents`` containing ``hf_model``). Neither
transformers nor vLLM can load that, so a checkpoint is merged once with verl's own
``verl.model_merger`` (``FSDPModelMerger``: the DTensor placements decide how shards are joined)
into a cache folder, and that folder is what gets loaded.

Accepted paths (:func:`find_actor_dir`):

* a trainer checkpoint ``.../global_step_N`` (its ``actor/`` is merged), or ``.../global_step_N/actor``;
* a run directory (``trainer.default_local_dir``): its latest checkpoint, as verl resumes;
* a verl SFT checkpoint ``.../global_step_N`` (shards directly inside, ``verl.trainer.sft_trainer``);
* ``.../actor/huggingface`` (config only): the checkpoint it belongs to.

Where ``huggingface/`` already holds weights (``hf_model`` saved) it is used as it is.
The cache is ``$PASR_CACHE/verl_merged/<name>-<key>``; the key changes when the shard files
change, so a rewritten checkpoint is merged again. Merging runs on CPU (the whole model in host
memory, bf16 as verl's merger writes it).

``python3 -m runtime.hf_export CKPT`` prints the merged folder (e.g. to use an SFT
warm-up checkpoint as ``actor_rollout_ref.model.path``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

FSDP_CONFIG = "fsdp_config.json"
HF_DIR = "huggingface"
TRACKER = "latest_checkpointed_iteration.txt"
_STEP = re.compile(r"^global_step_(\d+)$")
_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


class VerlCheckpointError(RuntimeError):
    """A path that looks like a verl checkpoint but cannot be turned into a model (its metadata
    unreadable, its shards missing); one line naming the file."""


def _is_shard_dir(path: Path) -> bool:
    return (path / FSDP_CONFIG).is_file() and (path / HF_DIR / "config.json").is_file()


def tracked_step(run_dir: Path) -> int | None:
    """The step verl's tracker file (``latest_checkpointed_iteration.txt``) in ``run_dir`` names,
    None without one; a :class:`VerlCheckpointError` naming the file when it holds anything but
    a step number."""
    tracker = run_dir / TRACKER
    if not tracker.is_file():
        return None
    fix = (
        "it should hold the step of one of the global_step_N folders beside it; "
        "write that step into it, or give the folder itself"
    )
    try:
        text = tracker.read_bytes().decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise VerlCheckpointError(
            f"{tracker} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}): {fix}"
        ) from None
    except OSError as exc:
        raise VerlCheckpointError(f"{tracker} cannot be read ({exc.strerror or exc}): {fix}") from None
    if not (text.isascii() and text.isdigit()):
        raise VerlCheckpointError(f"{tracker} holds {text[:40]!r}, not a step number: {fix}")
    return int(text)


def _latest_step_dir(run_dir: Path, strict: bool = False) -> Path | None:
    """The step folder verl resumes from: the one its tracker names, else the newest. A tracker
    that is not a step number is skipped, or with ``strict`` a :class:`VerlCheckpointError`."""
    try:
        tracked = tracked_step(run_dir)
    except VerlCheckpointError:
        if strict:
            raise
        tracked = None
    if tracked is not None and (run_dir / f"global_step_{tracked}").is_dir():
        return run_dir / f"global_step_{tracked}"
    steps = [(int(m.group(1)), p) for p in run_dir.iterdir() if p.is_dir() and (m := _STEP.match(p.name))]
    return max(steps)[1] if steps else None


def find_actor_dir(path: str | Path, strict: bool = False) -> Path | None:
    """The folder with the FSDP shards of the checkpoint ``path`` names, or None when ``path`` is
    not a verl checkpoint (see the module docstring for the accepted layouts). A run directory's
    malformed tracker file is passed over (the newest step is taken), or with ``strict`` a
    :class:`VerlCheckpointError` naming it: what loading a model does."""
    path = Path(path).expanduser()
    if not path.is_dir():
        return None
    if path.name == HF_DIR and _is_shard_dir(path.parent):
        return path.parent
    if _is_shard_dir(path):
        return path
    if _is_shard_dir(path / "actor"):
        return path / "actor"
    if not _STEP.match(path.name):
        step = _latest_step_dir(path, strict)
        if step is not None and step != path:
            return find_actor_dir(step, strict)
    return None


def is_verl_checkpoint(path: str | Path) -> bool:
    return find_actor_dir(path) is not None


def _has_weights(folder: Path) -> bool:
    return any((folder / name).is_file() for name in _WEIGHTS)


def _cache_key(actor: Path) -> str:
    """Changes with the checkpoint's location and its shard files (names, sizes, mtimes)."""
    h = hashlib.sha256(str(actor.resolve()).encode())
    for shard in sorted(actor.glob("model_world_size_*_rank_*.pt")):
        st = shard.stat()
        h.update(f"{shard.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def _display_name(actor: Path) -> str:
    parts = [p for p in actor.resolve().parts if p not in ("actor", "/")]
    return "-".join(parts[-2:]) if parts else "checkpoint"


def merge_fsdp_checkpoint(actor: Path, target: Path) -> None:
    """verl's ``python -m verl.model_merger merge --backend fsdp --local_dir ACTOR --target_dir
    TARGET``, called in-process."""
    from verl.model_merger.base_model_merger import ModelMergerConfig
    from verl.model_merger.fsdp_model_merger import FSDPModelMerger

    config = ModelMergerConfig(
        operation="merge",
        backend="fsdp",
        local_dir=str(actor),
        target_dir=str(target),
        hf_model_config_path=str(actor / HF_DIR),
    )
    merger = FSDPModelMerger(config)
    merger.merge_and_save()
    merger.cleanup()


def fsdp_world_size(actor: Path) -> int:
    """The ``world_size`` of the checkpoint's ``fsdp_config.json`` (how many shards it has); a
    :class:`VerlCheckpointError` naming the file when it is not such a JSON object."""
    config = actor / FSDP_CONFIG
    fix = "verl writes it with the shards; copy it again from where the checkpoint was saved"
    try:
        data = json.loads(config.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise VerlCheckpointError(
            f"{config} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}): {fix}"
        ) from None
    except ValueError as exc:
        raise VerlCheckpointError(f"{config} is not valid JSON ({exc}): {fix}") from None
    except OSError as exc:
        raise VerlCheckpointError(f"{config} cannot be read ({exc.strerror or exc}): {fix}") from None
    world = data.get("world_size") if isinstance(data, dict) else None
    if not isinstance(world, int) or isinstance(world, bool) or world < 1:
        what = f"world_size {world!r}" if isinstance(data, dict) else f"a JSON {type(data).__name__}"
        raise VerlCheckpointError(f"{config} holds {what}, not a JSON object with a positive world_size: {fix}")
    return world


def merged_model_dir(path: str | Path, cache: str | Path | None = None) -> Path:
    """A loadable HF folder for the verl checkpoint ``path``: its own ``huggingface/`` when that
    holds weights, else the merged copy in the cache (merged on first use)."""
    actor = find_actor_dir(path, strict=True)
    if actor is None:
        raise VerlCheckpointError(f"{path} is not a verl checkpoint (no {FSDP_CONFIG} with a {HF_DIR}/ folder)")
    if _has_weights(actor / HF_DIR):
        return actor / HF_DIR
    world = fsdp_world_size(actor)
    missing = [r for r in range(world) if not (actor / f"model_world_size_{world}_rank_{r}.pt").is_file()]
    if not world or missing:
        raise VerlCheckpointError(
            f"{actor} is an incomplete verl checkpoint: world_size={world}, missing model shards of ranks {missing} "
            "(saved with checkpoint.save_contents without 'model', or still being written?)"
        )

    from filelock import FileLock

    from runtime.cache_dir import CacheDirError, cache_subdir

    try:
        root = Path(cache) if cache is not None else cache_subdir("verl_merged")
    except CacheDirError as exc:
        raise VerlCheckpointError(f"cannot merge the verl checkpoint {actor}: {exc}") from None
    out = root / f"{_display_name(actor)}-{_cache_key(actor)}"
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out) + ".lock"):
        if (out / "config.json").is_file() and _has_weights(out):
            return out
        print(f"pasr: merging the verl checkpoint {actor} into {out} (once, with verl.model_merger)", file=sys.stderr)
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=out.name + ".tmp"))
        try:
            merge_fsdp_checkpoint(actor, tmp)
            os.replace(tmp, out)
        except Exception as exc:
            raise VerlCheckpointError(f"cannot merge the verl checkpoint {actor}: {type(exc).__name__}: {exc}") from exc
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python3 -m runtime.hf_export",
        description="Merge a verl FSDP checkpoint into a Hugging Face folder (cached) and print its path.",
    )
    parser.add_argument("checkpoint", help="global_step_N, its actor/ folder, or a run directory (latest checkpoint)")
    parser.add_argument("--cache", default=None, help="cache folder (default: $PASR_CACHE/verl_merged)")
    args = parser.parse_args(argv)
    try:
        print(merged_model_dir(args.checkpoint, args.cache))
    except VerlCheckpointError as exc:
        print(f"pasr: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
