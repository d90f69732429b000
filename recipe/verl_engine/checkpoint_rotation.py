"""``trainer.max_actor_ckpt_to_keep`` across resumes.

verl 0.9.1 keeps at most that many checkpoints, but counts only the ones its own process saved
(its checkpoint manager's in-memory ``previous_saved_paths``): after a resume, the checkpoints
of the run before it are never removed, so every preemption leaves up to that many more on disk
(about 90 GB each at 7B). After each save the trainer calls :func:`remove_stale_checkpoints`,
which removes the oldest ``global_step_N`` folders beyond the limit, whichever start wrote them.
The checkpoint just saved (the one ``latest_checkpointed_iteration.txt`` names) and any folder of
a later step (a save a crash cut short, overwritten when the run gets there again) are never
removed, and the limit counts only complete steps up to the newest.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from recipe.step_files import step_of

VERL_PREFIX = "global_step_"


def stale_checkpoints(run_dir: str | Path, keep, latest: int) -> list[Path]:
    """The ``global_step_N`` folders of ``run_dir`` to remove so that ``keep`` remain among the
    steps up to ``latest``; none when ``keep`` is not a whole number >= 1 (verl: keep all)."""
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        return []
    root = Path(run_dir)
    if not root.is_dir():
        return []
    steps = sorted(
        (step, path)
        for path in root.iterdir()
        if path.name.startswith(VERL_PREFIX) and path.is_dir()
        if (step := step_of(path.name)) is not None and step <= latest
    )
    return [path for _, path in steps[:-keep]]


def remove_stale_checkpoints(run_dir: str | Path, keep, latest: int) -> list[Path]:
    """Remove :func:`stale_checkpoints`, one line each; the folders removed."""
    removed = []
    for path in stale_checkpoints(run_dir, keep, latest):
        shutil.rmtree(path, ignore_errors=True)
        print(
            f"pasr verl: removed {path.name}, a checkpoint of an earlier start beyond "
            f"trainer.max_actor_ckpt_to_keep={keep}",
            flush=True,
        )
        removed.append(path)
    return removed
