"""The phases of ``gpu_check``'s parts on the machine: ``--part learn`` (verl started first, the
warm-up beside its start-up, the local engine's steps beside its loop, both evaluated at verl's
last step), ``--part first`` / ``all`` (verl run 1 stopped during a step) and ``--part resume``
(run 2, or after learn the stop/resume check alone), each phase under the command's deadline.

Why a module of its own: the driver (:mod:`benchmarks.gpu_check`: options, plan, settings) and the
commands (:mod:`benchmarks.gpu_commands`) stay short enough to read, and what runs when on the GPU
is in one place. Moved here from :mod:`benchmarks.gpu_check`, which still re-exports these names.
"""

from __future__ import annotations

import importlib
import signal
import sys
import threading
import time
from pathlib import Path

from benchmarks import sampled_rows
from benchmarks.gpu_check_report import MARKS, latest_checkpoint, read_json
from benchmarks.gpu_commands import driver_cmd, eval_cmd, local_pasr_cmd, verl_env, warmup_cmd, write_verl_data
from benchmarks.gpu_phases import Progress
from benchmarks.learn_deadline import LearnDeadline, Pace
from benchmarks.watched_run import WatchedRun, run_to_end, stop_during

# --part learn: the local engine must reach verl's last step this long before the command's end
# (the budget, plus --eval-grace-s): its evaluation of the 300 held-out problems, start-up
# included, took 30.4 s beside verl's on the H200.
LOCAL_EVAL_S = 35.0


def warmup_checkpoint(args, cfg, root: Path) -> Path:
    """The model verl starts from: ``--warmup-model``, or the check's own warm-up's last step."""
    if args.warmup_model:
        return Path(args.warmup_model).resolve()
    from recipe.step_files import step_name

    return root / "warmup" / "checkpoints" / step_name(cfg.warmup.steps)


def first_part(args, cfg, root: Path, run: Progress) -> WatchedRun | None:
    """Warm-up, data, verl run 1 stopped during step ``--stop-at``; the local parity run beside it.
    Returns the parity run if it is still going (``--part all`` waits for it later)."""
    warm_dir = root / "warmup"
    warm_ckpt = warmup_checkpoint(args, cfg, root)
    t = time.monotonic()
    if args.warmup_model:
        warm = run_to_end("warmup-eval", eval_cmd(args, warm_dir, warm_ckpt), root / "warmup.log", run.deadline)
    else:
        warm = run_to_end("warmup", warmup_cmd(args, warm_dir, cfg), root / "warmup.log", run.deadline)
    run.phase("warmup", t)
    if warm.rc != 0 or not warm_ckpt.is_dir():
        print(f"gpu_check: the warm-up failed (exit {warm.rc}); see {root / 'warmup.log'}", file=sys.stderr)

    t = time.monotonic()
    write_verl_data(cfg, root / "data")  # the paths are in settings.json's verl overrides
    run.phase("data", t)
    local = None
    if not args.no_local and warm_ckpt.is_dir():
        local = WatchedRun(
            "local", local_pasr_cmd(args, root / "local_pasr", warm_ckpt, parity=True), root / "local_pasr.log"
        ).start()
    t = time.monotonic()
    overrides = read_json(root / "settings.json")["verl_overrides"]
    run1 = WatchedRun(
        "verl-1",
        driver_cmd(args.verl_driver, overrides),
        root / "verl_1.log",
        on_step=stop_during(args.stop_at, args.stop_delay_s),
        env=verl_env(args),
    )
    run1.start().wait(run.deadline - (args.eval_reserve_s if args.part == "all" else 0))
    run.phase("verl_run1", t, stop_checkpoint=latest_checkpoint(root / "verl"))
    if local is not None and args.part == "first":
        local.wait(run.deadline)
        run.phase("local_pasr", local.t0)
        return None
    return local


def _import_quietly(module: str) -> None:
    try:
        importlib.import_module(module)
    except Exception:  # the merge itself will say what is wrong
        pass


def await_fit(verl: WatchedRun, until: float) -> None:
    """Until verl's training loop starts (or it exits, or ``until``): by then vLLM has profiled
    its memory. vLLM 0.24 asserts that no other process freed GPU memory while it did (a local run
    that ended then would stop verl's start-up)."""
    while verl.proc.poll() is None and time.monotonic() < until and verl.first(MARKS["fit_start"]) is None:
        time.sleep(0.5)


def learn_part(args, cfg, root: Path, run: Progress) -> None:
    """``--part learn``: one verl run, no resume. verl's start-up is minutes of process spawns and
    imports on the CPU while the GPU idles, so it starts first, told to wait for its model
    (``pasr_verl.wait_for_model_s``: its task runner reads the model about a minute in); the warm-up
    (rate decayed to zero) trains and checkpoints meanwhile. The warm-up's evaluation and the local
    engine's steps (each step's weights kept) start once verl's training loop has (:func:`await_fit`):
    vLLM refuses to start when another process frees GPU memory while it profiles its own.
    verl trains until ``--steps`` or until the deadline less ``--eval-reserve-s``, where the recipe's
    stop path ends it (SIGTERM: the step in flight finishes and is checkpointed), since how many
    steps fit is known only once the start-up has been measured. Then verl's last checkpoint is
    merged and evaluated beside the local engine's checkpoint of the same step."""
    from recipe.step_files import step_name, step_of

    # the merge (verl.model_merger, in this process) imports torch and verl: now, not after the deadline
    threading.Thread(target=_import_quietly, args=("verl.model_merger.fsdp_model_merger",), daemon=True).start()
    warm_ckpt = warmup_checkpoint(args, cfg, root)
    t = time.monotonic()
    write_verl_data(cfg, root / "data")
    run.phase("data", t)
    overrides = read_json(root / "settings.json")["verl_overrides"]
    verl = WatchedRun("verl", driver_cmd(args.verl_driver, overrides), root / "verl.log", env=verl_env(args)).start()
    if not args.warmup_model:
        t = time.monotonic()
        warm = run_to_end(
            "warmup", warmup_cmd(args, root / "warmup", cfg, evaluate=False), root / "warmup.log", run.deadline
        )
        run.phase("warmup", t)
        if warm.rc != 0 or not warm_ckpt.is_dir():
            print(f"gpu_check: the warm-up failed (exit {warm.rc}); see {root / 'warmup.log'}", file=sys.stderr)
            verl.wait(time.monotonic())  # stopped: it has nothing to start from
            return
    beside = [WatchedRun("warmup-eval", eval_cmd(args, root / "warmup_eval", warm_ckpt), root / "warmup_eval.log")]
    if not args.no_local:
        beside.append(
            WatchedRun(
                "local", local_pasr_cmd(args, root / "local_pasr", warm_ckpt, parity=True), root / "local_pasr.log"
            )
        )
    plan = learn_deadline(args, run.deadline)
    await_fit(verl, plan.end - plan.first_step_s - plan.verl_tail_s)  # past that, no first step fits
    run.took("verl_to_fit", time.monotonic() - verl.t0)
    for r in beside:
        r.start()
    local = next((r for r in beside if r.name == "local"), None)
    local_ckpts = root / "local_pasr" / "checkpoints"
    run.state["verl_stop"] = drive_verl(verl, plan, local, local_ckpts, args.steps)
    run.took("verl", verl.wall_s)
    k = latest_checkpoint(root / "verl")
    # verl's merge and evaluation start at once: the local engine, started with verl's loop but
    # slowed at first by its own start and the warm-up's evaluation beside it, may be steps behind
    final = start_final_eval(args, root, run) if k is not None else None
    for r in beside:
        if r.name == "local" and k is not None:
            # the same step as verl's, not whichever the deadline caught (H200 2026-11-28: 17 of 20)
            until = run.deadline - plan.local_eval_s
            reached = wait_for_step(r, local_ckpts, k, until=until)
            run.state["local_caught_up_s"] = round(time.monotonic() - run.t_start, 1) if reached else None
            if reached:  # nothing after verl's step is wanted: no stop checkpoint to wait for
                r.kill_group()
            r.wait(until, grace_s=5)
        else:  # the warm-up's evaluation: long done, normally; the local engine when verl left nothing
            r.wait(run.deadline - args.eval_reserve_s / 2, grace_s=5)
        run.took(r.name.replace("-", "_"), r.wall_s)

    if k is None:
        print("gpu_check: verl left no checkpoint: nothing to evaluate", file=sys.stderr)
        return
    evals = [final] if final is not None else []
    local_steps = sorted(s for p in local_ckpts.glob("step_*") if p.is_dir() and (s := step_of(p.name)) is not None)
    local_k = max((s for s in local_steps if s <= k), default=None)
    if local_k is not None:
        run.state["local_eval_step"] = local_k
        evals.append(
            WatchedRun(
                "local-eval",
                eval_cmd(args, root / "local_eval", local_ckpts / step_name(local_k)),
                root / "local_eval.log",
            ).start()
        )
    t = time.monotonic()
    for r in evals:  # the command's end is the evaluations' too: what is not done then is reported missing
        r.wait(run.deadline + args.eval_grace_s, grace_s=3)
    run.phase("final_evals", t, complete=True)


def learn_deadline(args, end: float) -> LearnDeadline:
    """``--part learn``'s stop rule (:mod:`benchmarks.learn_deadline`) for a command ending at
    ``end`` (monotonic) plus ``--eval-grace-s``: verl's tail is ``--eval-reserve-s``, the local
    engine's evaluation :data:`LOCAL_EVAL_S`, each with the sampled rows' extra time."""
    extra = sampled_rows.extra_s(args)
    return LearnDeadline(
        end=end + args.eval_grace_s, verl_tail_s=args.eval_reserve_s + extra, local_eval_s=LOCAL_EVAL_S + extra
    )


def drive_verl(verl: WatchedRun, plan: LearnDeadline, local: WatchedRun | None, local_ckpts: Path, steps: int):
    """Run verl until it ends on its own or :meth:`LearnDeadline.stop_now` says to stop it (one
    SIGTERM: the step in flight is finished and checkpointed), re-deciding every half second from
    verl's logged steps and the local engine's checkpoints. Returns why it was stopped, or None."""
    vpace = Pace(verl.t0)
    lpace = Pace(local.t0) if local is not None else None
    why = None
    while verl.proc.poll() is None:
        now = time.monotonic()
        vpace.ends = {s: verl.t0 + t for s, (t, _) in list(verl.steps.items())}
        if lpace is not None:
            lpace.see_checkpoints(local_ckpts, now)
        why = plan.stop_now(now, vpace, lpace, steps)
        if why:
            print(f"gpu_check: stopping verl after the step in flight: {why}", flush=True)
            verl.signal(signal.SIGTERM)
            break
        time.sleep(0.5)
    # its step in flight and checkpoint: by then the merge and the evaluation still fit
    verl.wait(plan.end - plan.verl_tail_s / 2, grace_s=10)
    return why


def wait_for_step(local: WatchedRun, ckpt_dir: Path, step: int, until: float) -> bool:
    """Wait until the local engine has checkpointed ``step`` (its checkpoints are renamed into
    place whole) or has exited, or until ``until`` (monotonic). True when the step is there."""
    from recipe.step_files import step_name

    target = ckpt_dir / step_name(step)
    while not target.is_dir() and local.proc.poll() is None and time.monotonic() < until:
        time.sleep(0.2)
    return target.is_dir()


def resume_after_learn(args, root: Path, run: Progress) -> None:
    """``--part resume`` after ``--part learn`` on the same machine: the stop/resume check with one
    verl start-up. The same verl command, asked for three steps past learn's last checkpoint K,
    must resume from ``global_step_K``; during step K + 2 it gets SIGTERM and must finish that
    step, checkpoint it and exit 0 without starting K + 3."""
    k = latest_checkpoint(root / "verl")
    if k is None:
        raise SystemExit(f"gpu_check: --part resume: --part learn left no verl checkpoint in {root / 'verl'}")
    overrides = [
        o
        for o in read_json(root / "settings.json")["verl_overrides"]
        if not o.startswith("trainer.total_training_steps=")
    ]
    run.state["resume_from"] = k
    t = time.monotonic()
    WatchedRun(
        "verl-resume",
        driver_cmd(args.verl_driver, [*overrides, f"trainer.total_training_steps={k + 3}"]),
        root / "verl_resume.log",
        on_step=stop_during(k + 2, args.stop_delay_s),
        env=verl_env(args),
    ).start().wait(run.deadline)
    run.phase("verl_resume", t)


def start_final_eval(args, root: Path, run: Progress) -> WatchedRun | None:
    """verl's last checkpoint merged (phase ``merge``) and its greedy evaluation started
    (``final_eval/``); None, with the reason on stderr, when it cannot be merged: the figures
    gathered so far still go out."""
    t = time.monotonic()
    try:
        from runtime.hf_export import merged_model_dir

        merged = merged_model_dir(root / "verl", cache=root / "merged")
    except Exception as exc:
        print(f"gpu_check: cannot merge the final checkpoint: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None
    run.phase("merge", t, final_checkpoint=latest_checkpoint(root / "verl"))
    return WatchedRun("final-eval", eval_cmd(args, root / "final_eval", merged), root / "final_eval.log").start()


def resume_part(args, root: Path, run: Progress, local: WatchedRun | None) -> None:
    """verl run 2 (the same command, which resumes) until ``--steps``, then the merged final
    checkpoint evaluated as the warm-up was."""
    t = time.monotonic()
    overrides = read_json(root / "settings.json")["verl_overrides"]
    WatchedRun("verl-2", driver_cmd(args.verl_driver, overrides), root / "verl_2.log", env=verl_env(args)).start().wait(
        run.deadline - args.eval_reserve_s
    )
    run.phase("verl_run2", t)
    if local is not None:
        local.wait(run.deadline - 20)
        run.phase("local_pasr", local.t0)
    final = start_final_eval(args, root, run)
    if final is not None:
        t = time.monotonic()
        final.wait(run.deadline + args.eval_grace_s)
        run.phase("final_eval", t, complete=True)
