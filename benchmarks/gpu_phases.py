"""What a benchmark on a lent GPU machine keeps as it goes: :class:`Progress` (one command's
deadline, each phase's wall time and findings in ``state.json``, the result rebuilt from the run
directory and written after every phase), and what the result records of where it ran (the
device's name, the commit).

Why: a lent machine's command has a hard time limit, and one cut off there must still leave its
figures; ``gpu_check``, ``gpu_scale`` and ``pasr_ab`` all keep their phases this way. Moved here
from :mod:`benchmarks.gpu_check`, which still re-exports these names.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.gpu_check_report import build_result, read_json, write_result
from benchmarks.watched_run import ROOT


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, cwd=ROOT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def device_name(device: str) -> str:
    if device == "cpu":
        from benchmarks.training_stages import cpu_model

        return f"cpu: {cpu_model()}"
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else device
    except (OSError, subprocess.TimeoutExpired):
        return device


class Progress:
    """One command's part of the check: phase times and findings in ``state.json``, and the
    result rebuilt from the run directory (``build``: gpu_check's
    :func:`~benchmarks.gpu_check_report.build_result` unless another benchmark gives its own) and
    written after every phase."""

    def __init__(self, root: Path, part: str, out: Path, budget_s: float, name: str = "gpu_check", build=None):
        self.root, self.part, self.out, self.name = root, part, out, name
        self.build = build or build_result
        self.t_start = time.monotonic()
        self.deadline = self.t_start + budget_s
        self.state = read_json(root / "state.json")
        self.state.setdefault("parts", {})[part] = {"wall_s": 0.0, "budget_s": budget_s}
        self.state.setdefault("phases", {})

    def phase(self, name: str, t: float, **found) -> None:
        self.state["phases"][name] = round(time.monotonic() - t, 1)
        self.state.update(found)
        print(
            f"{self.name}: {name} {self.state['phases'][name]} s (at {time.monotonic() - self.t_start:.0f} s)",
            flush=True,
        )
        self.save()

    def took(self, name: str, seconds: float) -> None:
        """A phase that ran beside others: its own wall time, not the time since ``t``."""
        self.state["phases"][name] = round(seconds, 1)
        print(f"{self.name}: {name} {self.state['phases'][name]} s", flush=True)
        self.save()

    def save(self) -> dict:
        self.state["parts"][self.part]["wall_s"] = round(time.monotonic() - self.t_start, 1)
        (self.root / "state.json").write_text(json.dumps(self.state, indent=1) + "\n")
        result = self.build(self.root)
        write_result(result, self.out)
        return result


def prepare_root(root: Path, bench: str) -> None:
    """A fresh run directory for benchmark ``bench``: an earlier run of it (its ``settings.json``)
    is replaced; a folder holding anything else is refused, never deleted."""
    if root.exists() and any(root.iterdir()):
        if not (root / "settings.json").is_file():
            raise SystemExit(f"{bench}: {root} is not empty and not a {bench} run directory: choose another --run-dir")
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)


# what a benchmark needs after its own end: the last JSON written, its processes gone
OUTER_MARGIN_S = 15.0


def fit_outer_timeout(args, bench: str, timeout_s: str | None = None):
    """Under an outer ``timeout`` (``gpu_loan.sh`` exports ``CHECK_TIMEOUT_S``) a benchmark must
    end itself first, its JSON written with every row it has: ``--budget-s`` + ``--eval-grace-s``
    is cut to fit that less :data:`OUTER_MARGIN_S`, and it says so. (2026-11-28: gpu_check's
    budget and grace added up to the timeout exactly, and the timeout ended it, local row lost.)"""
    timeout_s = timeout_s if timeout_s is not None else os.environ.get("CHECK_TIMEOUT_S")
    if not timeout_s:
        return args
    room = float(timeout_s) - OUTER_MARGIN_S - args.eval_grace_s
    if args.budget_s > room:
        print(
            f"{bench}: --budget-s {args.budget_s:.0f} cut to {room:.0f}: the command's timeout is {timeout_s} s, "
            f"with --eval-grace-s {args.eval_grace_s:.0f} and {OUTER_MARGIN_S:.0f} s to write the result after it",
            file=sys.stderr,
        )
        args.budget_s = room
    return args
