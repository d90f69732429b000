"""What a ``pasr eval`` answer depends on beyond the flags: which weights answered, and which rows.

:func:`model_identity` names the checkpoint a ``--model`` spec stands for without loading it: the
folder it resolves to (``RUN/checkpoints/latest`` to the ``step_N`` it names, a verl run
directory to the ``global_step_N`` verl would resume from), the training step, and a content
digest of its weight, config and tokenizer files. The resume fingerprint holds the step and the
digest, not the spec: ``latest`` after more training is another model, and one checkpoint named
two ways is the same one. A hub name is identified by its name only.

:func:`rows_digest` is the content of the rows evaluated (ids, questions and gold answers), for
the summary and for ``pasr eval compare``, which marks runs over other rows.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recipe.step_files import step_of

# files whose content decides answers: weights (local, HF, verl FSDP shards), config, tokenizer
_MODEL_FILES = re.compile(
    r"^(model.*\.safetensors|(pytorch_)?model.*\.bin|model_world_size_\d+_rank_\d+\.pt|.*\.gguf|"
    r"config\.json|generation_config\.json|tokenizer.*\.json|.*\.model|vocab\.json|merges\.txt|"
    r"special_tokens_map\.json|chat_template\.(jinja|json))$"
)
_WHOLE_FILE = 8 * 1024**2  # files up to this size are hashed whole
_BLOCK = 1024**2  # larger ones: their size and four blocks of this size spread over the file


class ModelIdentityError(ValueError):
    """The checkpoint a spec points at cannot be named (a broken ``latest`` pointer); one line."""


@dataclass(frozen=True)
class ModelIdentity:
    spec: str  # --model as given
    path: str | None = None  # the folder that answers (the checkpoint), None for a hub name
    run: str | None = None  # the training run directory around it (local or verl), if any
    step: int | None = None  # its training step, if it is a training checkpoint
    digest: str | None = None  # content of its weight, config and tokenizer files
    note: str | None = None  # what the user should know (a verl run's tracked step is gone)

    def fingerprint(self) -> dict[str, Any]:
        """What the resume fingerprint holds: the content, not the path."""
        if self.digest is None:
            return {"name": self.spec}
        return {"step": self.step, "weights": self.digest}

    def header(self) -> dict[str, Any] | None:
        """The summary's ``checkpoint`` entry: where the answers came from."""
        if self.path is None:
            return None
        return {"path": self.path, "run": self.run, "step": self.step, "note": self.note}


def _digest_file(h, path: Path) -> None:
    size = path.stat().st_size
    h.update(f"{path.name}\0{size}\0".encode())
    with path.open("rb") as fh:
        if size <= _WHOLE_FILE:
            h.update(fh.read())
            return
        for offset in (0, size // 3, 2 * size // 3, size - _BLOCK):
            fh.seek(offset)
            h.update(fh.read(_BLOCK))


def folder_digest(folder: Path) -> str:
    """A cheap content digest of the files of ``folder`` (and its ``huggingface/`` subfolder, as a
    verl checkpoint has) that decide answers: small files whole, large ones by size and four
    spread 1 MiB blocks (every block of a weight file changes when training moves the weights).
    Optimizer and trainer state are left out."""
    h = hashlib.sha256()
    for sub in (folder, folder / "huggingface"):
        if sub.is_dir():
            for path in sorted(p for p in sub.iterdir() if p.is_file() and _MODEL_FILES.match(p.name)):
                _digest_file(h, path)
    return h.hexdigest()[:16]


def _step_of(folder: Path) -> int | None:
    """The training step of a checkpoint folder: its ``trainer_state.json`` (local runs), else the
    number in its name (``step_N``, ``global_step_N``)."""
    try:
        step = json.loads((folder / "trainer_state.json").read_text()).get("step")
        if isinstance(step, int) and not isinstance(step, bool):
            return step
    except (OSError, ValueError, AttributeError):
        pass
    return step_of(folder.name)


def _verl_identity(spec: str, local: Path, actor: Path) -> ModelIdentity:
    from runtime.hf_export import TRACKER

    step_dir = next((p for p in (actor, *actor.parents) if step_of(p.name) is not None), None)
    step = _step_of(step_dir) if step_dir is not None else None
    run = step_dir.parent if step_dir is not None else None
    note = None
    tracker = local / TRACKER
    if step_dir is not None and step_dir.parent == local.resolve() and tracker.is_file():
        try:
            tracked = tracker.read_text().strip()
        except (OSError, UnicodeDecodeError):
            tracked = "?"
        if tracked != str(step):
            note = (
                f"{tracker} names step {tracked}, which is not there: evaluating global_step_{step}, "
                "the newest checkpoint left"
            )
    return ModelIdentity(
        spec,
        str(actor.parent if actor.name == "actor" else actor),
        str(run) if run else None,
        step,
        folder_digest(actor),
        note,
    )


def model_identity(spec: str) -> ModelIdentity:
    """The identity of the model ``spec`` names (see the module docstring). Nothing is loaded or
    merged; a spec that is not a local checkpoint or folder is identified by its name (the
    backend says later whether it exists)."""
    from runtime.hf_export import VerlCheckpointError, find_actor_dir
    from runtime.model_loading import (
        EMBEDDED_ALIASES,
        LATEST,
        ModelNotFoundError,
        checkpoint_named_by,
        resolve_model_path,
    )

    local = Path(spec).expanduser()
    if local.is_file() and local.name == LATEST:
        try:
            named = checkpoint_named_by(local)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ModelIdentityError(
                f"{spec}: cannot read the checkpoint it names ({exc}); point it at a "
                "step_N folder or give that folder as --model"
            ) from None
        if named is None:
            raise ModelIdentityError(f"{spec} names no complete checkpoint")
        local = named
    elif spec in EMBEDDED_ALIASES:
        try:
            local = Path(resolve_model_path(spec))  # the converted embedded model (once, cached)
        except ModelNotFoundError:
            return ModelIdentity(spec)
    if not local.is_dir():
        return ModelIdentity(spec)
    local = local.resolve()
    try:  # strict: a run's tracker that is not a step number is refused, as loading the model refuses it
        actor = find_actor_dir(local, strict=True)
    except VerlCheckpointError as exc:
        raise ModelIdentityError(str(exc)) from None
    if actor is not None:
        return _verl_identity(spec, local, actor)
    step = _step_of(local) if (local / "trainer_state.json").is_file() else None
    run = local.parent.parent if step is not None and local.parent.name == "checkpoints" else None
    return ModelIdentity(spec, str(local), str(run) if run else None, step, folder_digest(local))


def row_fields(example) -> list[str]:
    """What of a row decides its samples and their scores: its id, question and gold answer."""
    return [example.id, example.question, example.answer]


def rows_digest(examples) -> str:
    """A digest of the set of rows (ids, questions, golds), in any order: two runs with the same
    digest for a dataset evaluated the same questions against the same answers."""
    rows = sorted(json.dumps(row_fields(ex), ensure_ascii=False) for ex in examples)
    return hashlib.sha256("\n".join(rows).encode("utf-8", "surrogatepass")).hexdigest()[:16]
