"""What a planned run needs of where it runs, besides GPUs: folders it can write and the
credentials of its experiment tracker. verl meets both only after minutes of start-up (the
checkpoint at its first save, ``wandb.init`` when ``fit()`` starts)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from recipe.plan_check.compose import select
from recipe.plan_check.report import Report


def check_dirs(config, engine, report: Report, here: bool = True) -> None:
    """The checkpoint and dump folders: absolute (a job's relative folder is lost with it) and
    writable here (the nearest folder that exists), nothing created. With ``here`` false (a
    job elsewhere) a folder this machine cannot write is a note: the cluster's storage is not
    this machine's."""
    from recipe.verl_engine.config import REMOTE_PREFIXES

    dirs = {"trainer.default_local_dir": select(config, "trainer.default_local_dir")}
    if engine.rollout_dir:
        dirs["pasr_verl.rollout_dir"] = engine.rollout_dir
    for key, value in dirs.items():
        if value is None:
            continue
        text = str(value)
        if text.startswith(REMOTE_PREFIXES):
            report.note("dirs", f"{key}={text}: remote storage, not checked")
            continue
        path = Path(os.path.expanduser(text))
        existing = next((p for p in [path, *path.parents] if p.exists()), None)
        if existing is None or not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
            if here:
                report.fail("dirs", f"{key}={text}: cannot be written here ({existing} is not a writable folder)")
            else:
                report.note("dirs", f"{key}={text}: not writable from this machine; the job writes it on the cluster")
            continue
        where = "exists" if existing == path else f"will be made in {existing}"
        relative = (
            ""
            if path.is_absolute()
            else "; relative: pasr submit refuses it (a job's copy of the repository is temporary)"
        )
        report.ok("dirs", f"{key}={text}: writable ({where}){relative}")


def check_tracker(config, report: Report, job_env: Mapping[str, str] | None = None) -> None:
    """``trainer.logger``'s credentials (:func:`recipe.metrics_file.tracker_login_problems`: only
    wandb needs one), here (this shell and its ``wandb login``) or, with ``job_env``, in the Ray
    job's environment (what ``pasr submit --env`` passes; this machine's login does not travel)."""
    from recipe.metrics_file import tracker_login_problems

    loggers = select(config, "trainer.logger") or []
    names = [loggers] if isinstance(loggers, str) else list(loggers)
    if job_env is None:
        problems = tracker_login_problems(names)
    elif tracker_login_problems(names, {**job_env, "NETRC": os.devnull}):
        problems = [
            "trainer.logger has wandb but the job gets no WANDB_API_KEY: pass --env WANDB_API_KEY (this shell's) "
            "or --env WANDB_MODE=offline, or drop wandb from trainer.logger (--no-check if the cluster's nodes "
            "are logged in)"
        ]
    else:
        problems = []
    for line in problems:
        report.fail("tracker", line)
    if not problems and "wandb" in names:
        report.ok("tracker", "trainer.logger has wandb, and wandb has a login (or a WANDB_MODE that needs none)")
