"""The stages both learning-signal benchmarks run (PASR's and Reflect-Retry-Reward's).

A learning-signal benchmark asks whether a method's RL phase teaches the model more than the
same wall time of supervised training would. Both answer it the same way, so the stages live
here once and the benchmarks differ only in the method's overrides, rows and columns:

1. :func:`warmup_stage`: base evaluation, supervised warm-up, warm-up evaluation, in this
   process; its wall time is written beside the run so an interrupted benchmark can reuse a
   finished stage (``--reuse-warmup``) and rerun only what follows.
2. :func:`method_and_control`: from the warm-up checkpoint, the method's RL steps and the
   warm-up continued (the control) side by side, one core and one torch thread each, until the
   RL steps end. Each process evaluates its own policy afterwards.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import platform
import time
from pathlib import Path
from statistics import fmean

EVAL_AT_WARMUP = ["trainer.steps=0", "trainer.eval_at_start=true", "trainer.eval_after_warmup=true"]


def alone_threads() -> int:
    """Torch threads for a stage that has the machine to itself: every core, pinned.

    Not probed (``model.threads=0``): the probe times one small matmul, and on a shared VM a
    moment of host contention makes it pick one thread for the whole stage (the 2-core EPYC's
    1-vs-2-thread ratio read 0.9-1.0 for about a second, 1.8-2.5 before and after), which would
    time the probe's luck, not the benchmark.
    """
    import torch

    return torch.get_num_threads()


def load(preset: str, overrides: list[str]):
    from recipe.local_engine.config import load_config

    return load_config(preset=preset, overrides=overrides)


def run_method(
    preset: str, overrides: list[str], run_dir: str, start_ckpt: str, stop_file: str | None = None, threads: int = 1
) -> None:
    """The preset's RL steps (whatever ``method`` it names) from the warm-up checkpoint;
    ``stop_file`` is created when training ends (before the final evaluation), which stops the
    control running beside it. ``threads``: 1 beside the control, :func:`alone_threads` alone."""
    from recipe.local_engine.trainer import LocalPasrTrainer

    cfg = load(
        preset,
        [
            *overrides,
            f"model.path={start_ckpt}",
            "warmup.steps=0",
            f"model.threads={threads}",
            "trainer.eval_at_start=false",
            "trainer.eval_at_end=false",
            "trainer.eval_plain=false",
        ],
    )
    trainer = LocalPasrTrainer(cfg, Path(run_dir))
    trainer.setup()
    try:
        trainer.fit()
    finally:
        if stop_file:
            Path(stop_file).touch()
    trainer._evaluate("final")


def run_control(preset: str, overrides: list[str], run_dir: str, start_ckpt: str, stop_file: str) -> None:
    """The supervised warm-up continued from its checkpoint (weights, optimizer, data order)
    until ``stop_file`` appears, then evaluated."""
    from recipe.local_engine import checkpoint as ckpt
    from recipe.local_engine.trainer import LocalPasrTrainer

    cfg = load(preset, [*overrides, f"model.path={start_ckpt}", "model.threads=1", "trainer.eval_plain=false"])
    trainer = LocalPasrTrainer(cfg, Path(run_dir))
    trainer.setup()
    trainer.evals = {}
    trainer.optimizer = trainer._make_optimizer("warmup")
    ckpt.load_trainer_state(Path(start_ckpt), trainer.optimizer)
    step = cfg.warmup.steps
    while not Path(stop_file).exists():
        step += 1
        trainer._log(step, "control", trainer.warmup_step(step))
    trainer.step = step
    trainer._evaluate("control")


def spawn(target, *args) -> mp.Process:
    """``target(*args)`` in a fresh process that exits when this one does.

    Without that, killing the benchmark left its children training: they went on writing
    metrics, checkpoints and the stop file into directories that a rerun had just recreated."""
    proc = mp.get_context("spawn").Process(target=_die_with_parent, args=(target, *args))
    proc.start()
    return proc


def _die_with_parent(target, *args) -> None:
    import os
    import threading
    from multiprocessing.connection import wait

    parent = mp.parent_process()

    def watch() -> None:
        wait([parent.sentinel])  # ready when the parent has exited, however it ended
        os._exit(1)

    if parent is not None:
        threading.Thread(target=watch, daemon=True, name="die-with-parent").start()
    target(*args)


def join(*procs: mp.Process) -> None:
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"{p.name} failed with exit code {p.exitcode}")


def prepare_dirs(root: Path, names: tuple[str, ...], keep: tuple[str, ...] = ()) -> dict[str, Path]:
    """``{name: root/name}``, each a new empty run directory except those in ``keep``.

    When something is kept (``--reuse-warmup``), the other stages are rerun whole, so what an
    interrupted run left in their directories is removed first; without ``keep`` an existing,
    non-empty directory is refused as for any new run (nothing is deleted unasked)."""
    import shutil

    from recipe.local_engine.trainer import prepare_run_dir

    dirs = {name: root / name for name in names}
    for name, d in dirs.items():
        if name in keep:
            continue
        if keep and d.is_dir():
            print(f"removing {d}: an earlier run's stage, rerun from the kept {', '.join(keep)} stage")
            shutil.rmtree(d)
        prepare_run_dir(d, resume=False)
    return dirs


def can_reuse_warmup(requested: bool, warmup_dir: Path, cfg) -> bool:
    """Whether to reuse (``--reuse-warmup`` asked for it) the warm-up stage in ``warmup_dir``:
    only a finished one, with the checkpoint and both evaluations; otherwise it is run again."""
    if not requested:
        return False
    done = all(
        p.exists()
        for p in (
            warmup_checkpoint(warmup_dir, cfg),
            warmup_dir / "eval" / "base.jsonl",
            warmup_dir / "eval" / "warmup.jsonl",
        )
    )
    if not done:
        print(f"no finished warm-up stage in {warmup_dir}: running it")
    return done


def warmup_checkpoint(warmup_dir: Path, cfg) -> Path:
    from recipe.step_files import step_name

    return warmup_dir / "checkpoints" / step_name(cfg.warmup.steps)


def warmup_stage(cfg, warmup_dir: Path, reuse: bool) -> tuple[str, float | None]:
    """Stage 1 in this process, or (``reuse``) the finished one already in ``warmup_dir``.
    Returns the warm-up checkpoint and the stage's wall time (None when reused from a run that
    did not record it)."""
    from recipe.local_engine.trainer import LocalPasrTrainer

    ckpt = str(warmup_checkpoint(warmup_dir, cfg))
    if reuse:
        print(f"reusing the warm-up stage in {warmup_dir} ({ckpt})")
        return ckpt, warmup_stage_wall_s(warmup_dir)
    start = time.perf_counter()
    warm = LocalPasrTrainer(cfg, warmup_dir)
    warm.setup()
    warm.fit()
    wall_s = time.perf_counter() - start
    (warmup_dir / STAGE_FILE).write_text(json.dumps({"wall_s": wall_s}) + "\n")
    return ckpt, wall_s


STAGE_FILE = "stage.json"  # the warm-up stage's wall time, beside its run


def warmup_stage_wall_s(warmup_dir: Path) -> float | None:
    """The recorded wall time of the finished warm-up stage in ``warmup_dir`` (None when the run
    that made it did not record one)."""
    stage_file = warmup_dir / STAGE_FILE
    return json.loads(stage_file.read_text())["wall_s"] if stage_file.exists() else None


def method_and_control(
    preset: str,
    method_overrides: list[str],
    common: list[str],
    method_dir: Path,
    control_dir: Path,
    ckpt: str,
    stop_file: Path,
) -> float:
    """Stage 2: the RL steps and the control side by side; returns the pair's wall time."""
    stop_file.unlink(missing_ok=True)
    t0 = time.perf_counter()
    method = spawn(run_method, preset, [*common, *method_overrides], str(method_dir), ckpt, str(stop_file))
    control = spawn(run_control, preset, common, str(control_dir), ckpt, str(stop_file))
    join(method, control)
    return time.perf_counter() - t0


def phase_steps(run_dir: Path, phase: str) -> list[dict]:
    """The metrics lines of ``phase`` in a run's ``metrics.jsonl``."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [m for m in (json.loads(x) for x in lines if x.strip()) if m.get("phase") == phase]


def trends(steps: list[dict], keys: tuple[str, ...]) -> dict:
    """Each key's mean over the first and the last third of the steps: did it rise or fall?"""
    if not steps:
        return {}
    third = max(1, len(steps) // 3)
    return {
        key: {"first_third": fmean(m[key] for m in steps[:third]), "last_third": fmean(m[key] for m in steps[-third:])}
        for key in keys
    }


def cpu_info() -> dict:
    """The CPU a result was measured on: model, capability, the measured dtype choice, cores."""
    from runtime.cpu_dtype import cpu_capability, measured_cpu_dtype

    dtype = measured_cpu_dtype()
    return {
        "model": cpu_model(),
        "capability": cpu_capability(),
        "dtype": dtype.dtype,
        "bf16_speedup": round(dtype.bf16_speedup, 2),
        "cores": mp.cpu_count(),
    }


def machine_info(cfg) -> dict:
    """Where a result was trained and evaluated: the CPU, and the GPU (``model.device``; None
    on the CPU)."""
    import torch

    from runtime.model_loading import resolve_device

    gpu = torch.cuda.get_device_name() if resolve_device(cfg.model.device) == "cuda" else None
    return {"cpu": cpu_info(), "gpu": gpu}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def fmt(v) -> str:
    return "-" if v is None else (f"{v:d}" if isinstance(v, int) else f"{v:.3f}")
