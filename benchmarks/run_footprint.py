"""Peak memory (RSS), disk and time of a local training run per stage, before and after, in one run.

Runs ``pasr train`` of a preset twice, each in a process of its own: once with the code of a
given commit (``--before``, default a0e24a7: the tree of issue 53's figures, unpacked with
``git archive`` into a temporary folder and put first on ``PYTHONPATH``) and once with this
working tree, and prints a table per stage with both and their ratio:

* **peak RSS**: the process's high-water mark (``VmHWM`` in ``/proc/self/status``), reset
  (``/proc/self/clear_refs``) when each stage starts, read when it ends: set-up (model, data),
  warm-up steps, RL steps, each evaluation, checkpoint saves; ``run`` is the whole process's peak
  (what ``/usr/bin/time`` reports as maximum resident set size);
* **disk**: the run directory's size when the stage last ended;
* **time**: the stage's wall and CPU seconds, per step for the warm-up and RL steps (the speed
  ratio asked of a change that saves memory: after / before of the same step, in the same run).
  With one torch thread (pinned below) CPU seconds are the work done, and on a machine shared
  with other jobs they stay put where wall seconds follow the neighbours' load.

    python3 -m benchmarks.run_footprint                                # the tiny preset, ~2 min
    python3 -m benchmarks.run_footprint --preset demo warmup.steps=2 trainer.steps=2
    python3 -m benchmarks.run_footprint --preset demo --warm-start runs/x/checkpoints/step_000100 trainer.steps=2

``--warm-start CKPT`` runs the RL phase from a warmed-up checkpoint (``model.path=CKPT
warmup.steps=0``): the demo's PASR steps as they run after its warm-up, with rows that train
(from a base model the responses rarely score and the update is skipped). Both versions use
the same settings (``model.threads``, ``model.rollout_dtype``, ``algo.bf16_autocast`` pinned, so
a start-up probe cannot choose differently for the two); ``--repeats N`` alternates them N
times and reports each figure's median. Results: ``benchmarks/results/run_footprint.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEP_STAGES = {"warmup_step": "warm-up", "pasr_step": "RL steps", "rrr_step": "RL steps"}
PINNED = ["model.threads=1", "model.rollout_dtype=float32", "algo.bf16_autocast=false"]


def _status_kb(field: str) -> int:
    return int(re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M).group(1))


def _reset_peak() -> None:
    """The high-water mark set back to the current RSS (Linux >= 4.0)."""
    Path("/proc/self/clear_refs").write_text("5")


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


class Stages:
    """Peak RSS, seconds, calls and the run directory's size of each named stage."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.rows: dict[str, dict] = {}
        self.run_peak_kb = 0

    @contextmanager
    def stage(self, name: str):
        self.run_peak_kb = max(self.run_peak_kb, _status_kb("VmHWM"))  # what ran between stages
        _reset_peak()
        start, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            peak = _status_kb("VmHWM")
            self.run_peak_kb = max(self.run_peak_kb, peak)
            row = self.rows.setdefault(name, {"peak_rss_gb": 0.0, "seconds": 0.0, "cpu_seconds": 0.0, "calls": 0})
            row["peak_rss_gb"] = max(row["peak_rss_gb"], peak / 1e6)
            row["seconds"] += seconds
            row["cpu_seconds"] += cpu
            row["calls"] += 1
            row["disk_gb"] = _dir_bytes(self.run_dir) / 1e9 if self.run_dir.exists() else 0.0

    def wrap(self, obj, attr: str, name) -> None:
        """``obj.attr`` measured as stage ``name`` (a callable of the call's arguments: its name)."""
        inner = getattr(obj, attr)

        def measured(*args, **kwargs):
            with self.stage(name(*args) if callable(name) else name):
                return inner(*args, **kwargs)

        setattr(obj, attr, measured)


def measure(preset: str, overrides: list[str], run_dir: Path) -> dict:
    """One training run of ``preset`` in this process, measured per stage (:class:`Stages`)."""
    from recipe.local_engine.config import load_config
    from recipe.local_engine.trainer import LocalPasrTrainer

    cfg = load_config(preset=preset, overrides=overrides)
    trainer = LocalPasrTrainer(cfg, run_dir)
    stages = Stages(run_dir)
    with stages.stage("set-up"):
        trainer.setup()
    for attr, name in STEP_STAGES.items():
        stages.wrap(trainer, attr, name)
    stages.wrap(trainer, "_evaluate", lambda tag: f"eval {tag}")
    stages.wrap(trainer, "_save", "checkpoints")
    trainer.fit()
    rows = stages.rows
    for name in set(STEP_STAGES.values()) & rows.keys():
        rows[name]["seconds_per_step"] = rows[name]["seconds"] / rows[name]["calls"]
        rows[name]["cpu_seconds_per_step"] = rows[name]["cpu_seconds"] / rows[name]["calls"]
    rows["run"] = {
        "peak_rss_gb": max(stages.run_peak_kb, _status_kb("VmHWM")) / 1e6,
        "disk_gb": _dir_bytes(run_dir) / 1e9,
    }
    return rows


@contextmanager
def code_at(rev: str):
    """A temporary folder holding the tracked files of commit ``rev`` (``git archive``: no
    worktree to register or forget)."""
    with tempfile.TemporaryDirectory(prefix="footprint_src_") as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield Path(tmp)


def run_version(src: Path, preset: str, overrides: list[str]) -> dict:
    """:func:`measure` in a fresh process importing the code under ``src``."""
    with tempfile.TemporaryDirectory(prefix="footprint_run_") as tmp:
        out = Path(tmp) / "rows.json"
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            str(out),
            "--preset",
            preset,
            "--run-dir",
            str(Path(tmp) / "run"),
            *overrides,
        ]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        }
        subprocess.run(cmd, check=True, cwd=src, env=env)
        return json.loads(out.read_text())


def _median_rows(runs: list[dict]) -> dict:
    """Each figure's median over repeated runs of one version."""
    out: dict[str, dict] = {}
    for stage in runs[0]:
        keys = runs[0][stage].keys()
        out[stage] = {k: statistics.median(r[stage][k] for r in runs if stage in r) for k in keys}
    return out


def ratio(after: float | None, before: float | None) -> float | None:
    return round(after / before, 3) if after is not None and before else None


COLUMNS = (
    ("peak RSS GB", "peak_rss_gb"),
    ("disk GB", "disk_gb"),
    ("CPU s (/step)", "cpu_seconds"),
    ("wall s (/step)", "seconds"),
)


def table(before: dict, after: dict) -> str:
    """Per stage: peak RSS, disk, CPU and wall seconds (per step for the steps) before and
    after, with after / before."""
    head = f"{'stage':<13}" + "".join(f"{title:>27}" for title, _ in COLUMNS)
    lines = [head, f"{'':<13}" + f"{'before':>10}{'after':>9}{'ratio':>8}" * len(COLUMNS)]
    for stage in [s for s in after if s != "run"] + ["run"]:
        b, a = before.get(stage, {}), after.get(stage, {})
        cells = []
        for _, key in COLUMNS:
            key = f"{key}_per_step" if f"{key}_per_step" in a else key
            x, y = b.get(key), a.get(key)
            cells.append(f"{_fmt(x):>10}{_fmt(y):>9}{_fmt(ratio(y, x)):>8}")
        lines.append(f"{stage:<13}" + "".join(cells))
    return "\n".join(lines)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--before", default="a0e24a7", help="the commit whose code gives the 'before' figures")
    parser.add_argument("--warm-start", help="a warmed-up checkpoint: measure the RL phase from it (no warm-up)")
    parser.add_argument("--repeats", type=int, default=1, help="alternate before/after this many times (medians)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/run_footprint.json"))
    parser.add_argument("--child", help=argparse.SUPPRESS)  # internal: measure here, write the rows to this file
    parser.add_argument("--run-dir", help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", help="key=value config overrides, for both versions")
    args = parser.parse_args(argv)
    if args.child:
        Path(args.child).write_text(json.dumps(measure(args.preset, args.overrides, Path(args.run_dir))))
        return 0

    overrides = [*PINNED, *args.overrides]
    if args.warm_start:
        overrides += [f"model.path={Path(args.warm_start).resolve()}", "warmup.steps=0"]
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    with code_at(args.before) as old:
        for _ in range(args.repeats):
            for version, src in (("before", old), ("after", ROOT)):
                print(
                    f"== {version} ({args.before if version == 'before' else 'working tree'})",
                    file=sys.stderr,
                    flush=True,
                )
                runs[version].append(run_version(src, args.preset, overrides))
    before, after = _median_rows(runs["before"]), _median_rows(runs["after"])
    print(table(before, after))
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    from benchmarks.training_stages import cpu_model

    result = {
        "preset": args.preset,
        "overrides": overrides,
        "warm_start": args.warm_start,
        "repeats": args.repeats,
        "before": {"commit": args.before, "stages": before},
        "after": {"commit": f"{head} + working tree", "stages": after},
        "ratios": {
            stage: {k: ratio(after[stage].get(k), before.get(stage, {}).get(k)) for k in after[stage]}
            for stage in after
        },
        "runs": runs,
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
