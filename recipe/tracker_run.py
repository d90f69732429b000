"""A resumed verl run logs into the same Weights & Biases run, not a new one of the same name.

verl 0.9.1's ``Tracking`` starts wandb with ``wandb.init(project=..., name=..., entity=...,
config=..., settings=...)``: no run id and no resume, so every start, each resubmission after a
preemption included, was a new wandb run. wandb reads ``WANDB_RUN_ID`` and ``WANDB_RESUME`` from
the environment for what ``init`` is not given, so :func:`resume_wandb_run` sets them before
verl's ``Tracking`` starts: the run id kept in the checkpoint folder (:data:`RUN_ID_FILE`, written
at the first start), and ``allow`` (resume that run if it exists, else create it). The id lives
with the checkpoints it belongs to: the same ``trainer.default_local_dir`` resumes the same wandb
run, a fresh folder starts a new one. A ``WANDB_RUN_ID`` (or ``WANDB_RESUME``) set by the user
wins.

What wandb does with the steps a resume logs again (those after the checkpoint that the preempted
run had logged already): it keeps the first values and drops the new ones with a warning (a step
below its last is ignored); ``metrics.jsonl`` holds the values of the run that went on.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import MutableMapping
from pathlib import Path

RUN_ID_FILE = "wandb_run_id"
_VALID_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")  # what this module writes; wandb takes more


def resume_wandb_run(run_dir: str, environ: MutableMapping[str, str] | None = None) -> str | None:
    """Set ``WANDB_RUN_ID`` (the id in ``run_dir/wandb_run_id``, made there at the first start)
    and ``WANDB_RESUME=allow`` in ``environ`` unless set already; the run id, or None when
    ``run_dir`` cannot hold the file (remote storage, read-only): the run then logs as verl
    would, to a new wandb run, and one line says so."""
    environ = os.environ if environ is None else environ
    environ.setdefault("WANDB_RESUME", "allow")
    if environ.get("WANDB_RUN_ID"):
        return environ["WANDB_RUN_ID"]
    path = Path(run_dir).expanduser() / RUN_ID_FILE
    try:
        run_id = path.read_text().strip() if path.is_file() else ""
        if not _VALID_ID.fullmatch(run_id):
            run_id = secrets.token_hex(4)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(run_id + "\n")
            tmp.replace(path)
    except OSError as exc:
        print(
            f"pasr: cannot keep the wandb run id in {path} ({exc.strerror or exc}): a resumed run logs to a new "
            "wandb run; set WANDB_RUN_ID to keep one",
            flush=True,
        )
        return None
    environ["WANDB_RUN_ID"] = run_id
    return run_id


def logs_to_wandb(backends) -> bool:
    """Whether verl's ``Tracking`` backends (a name or a list, as ``trainer.logger`` gives) start wandb."""
    names = [backends] if isinstance(backends, str) else list(backends or [])
    return any(str(name) in ("wandb", "tracking") for name in names)
