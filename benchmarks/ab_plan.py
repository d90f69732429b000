"""``benchmarks.pasr_ab --dry-run``'s plan: how long the A/B takes and what fits a budget, from
measured step times.

Why a simulation: the runs do not all run at once. Each seed's four arms wait for its warm-up,
and ``--parallel N`` runs at most N side by side, so on a 2-core CPU the seeds go in waves and
the wall time is a schedule, not a sum. :func:`simulate` plays that schedule (the runner's own
order: a seed's warm-up, then its arms, before the next seed's warm-up) with each run's duration
from a :class:`Basis` of measured times, every run slowed by ``running / capacity`` when more run
side by side than the device serves at full speed. :func:`plan` then says how many steps fit all
the seeds in the budget, and how many seeds fit the steps asked.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path


@dataclass(frozen=True)
class Basis:
    """Measured seconds of one run's parts, at ``capacity`` runs side by side or fewer."""

    source: str
    capacity: float  # runs side by side at these speeds; more share them (each slowed by running / capacity)
    start_s: float  # a run's start (python, model load, dtype probe) and its checkpoint writes
    once_s: float  # once a command (a fresh GPU machine converts the embedded model)
    warmup_step_s: float  # a warm-up step of 8 rows
    rl_step_s: float  # an RL step of ``rollouts`` rollouts (scaled linearly: an upper bound, generation batches)
    rollouts: int
    eval_s: float  # a greedy evaluation, a held-out problem (refine prompt only)
    sampled_s: float  # one answer sampled at T=0.5, a held-out problem


# The GPU (an H200): benchmarks.gpu_scale's measured run (2026-11-28, docs/results/gpu_scale.md):
# six RL runs of 16 x (8 + 8) rollouts side by side 8.76 s a step, a start 16 s and a checkpoint
# 2 s (H100), a greedy evaluation of 300 problems 5 s, its K samples 0.625 of that each
# (benchmarks.sampled_rows, estimated); and the warm-up phase of three demo warm-ups side by side
# as measured on a fresh H200 (120 s, not the 62 s gpu_scale planned): less the model's conversion
# (21 s), a start, a checkpoint and the evaluation, 0.76 s a warm-up step.
GPU = Basis(
    source="an H200: gpu_scale's six RL runs side by side (docs/results/gpu_scale.md), a fresh machine's 120-s warm-up",
    capacity=6,
    start_s=18.0,
    once_s=21.0,
    warmup_step_s=0.76,
    rl_step_s=8.76,
    rollouts=256,
    eval_s=5.0 / 300,
    sampled_s=5.0 / 300 * 0.625,
)
# The CPU: this benchmark on the 2-core AMD EPYC (AVX512-BF16, bf16 chosen), at the demo's model
# and step shapes (8 x (4 + 2) rollouts), two runs side by side with one thread each while other
# work kept the load at 3-4 (2026-11-29, benchmarks/results/pasr_ab_cpu_timing.json: one seed, a
# 4-step warm-up, 3 RL steps, 30 held-out problems, K=4): a warm-up step 5.5 s, an RL step 56.5 s
# (its first, which pays one-off costs, left out), a start and its checkpoints 21 s; per held-out
# problem 0.45 s greedy and 0.29 s a sample. An evaluation of 30 is one batch, paid for its
# longest answer: per problem, larger ones cost less (an upper bound above ~100 problems).
CPU = Basis(
    source="the 2-core AMD EPYC (bf16), two runs side by side, one thread each, load 3-4 "
    "(benchmarks/results/pasr_ab_cpu_timing.json)",
    capacity=2,
    start_s=21.0,
    once_s=0.0,
    warmup_step_s=5.5,
    rl_step_s=56.5,
    rollouts=48,
    eval_s=0.45,
    sampled_s=0.29,
)


def basis_for(device: str, measured: dict | None = None) -> Basis:
    """The basis of ``device``: a measured pasr_ab result's own timings (``--plan-from``) when it
    ran on the same kind of device, else the constants above."""
    base = CPU if device == "cpu" else GPU
    t = (measured or {}).get("timings", {}).get("measured") or {}
    if not t or (t.get("device_kind") or "cpu") != ("cpu" if device == "cpu" else "gpu"):
        return base
    keys = ("warmup_step_s", "rl_step_s", "rollouts", "start_s", "eval_s", "sampled_s")
    got = {k: t[k] for k in keys if t.get(k) is not None}
    return replace(base, **got, capacity=t.get("parallel") or base.capacity, source=t.get("source", base.source))


@dataclass
class Job:
    name: str
    seed: int
    work_s: float  # seconds alone (at most ``capacity`` runs side by side)
    needs: str | None = None  # the job that must end first (an arm's warm-up)


def jobs_for(args, arms, cfg, basis: Basis, steps: int, seeds) -> list[Job]:
    """The runs of ``seeds`` in the runner's order, each with its expected seconds."""
    rollouts = cfg.rollout.queries_per_step * (cfg.pasr.n_refine + cfg.pasr.n_plain)
    evaluation = args.eval_size * (basis.eval_s + args.eval_sampled_k * basis.sampled_s)
    warm = basis.start_s + cfg.warmup.steps * basis.warmup_step_s + evaluation
    rl = basis.start_s + steps * basis.rl_step_s * rollouts / basis.rollouts + evaluation
    out = []
    for s in seeds:
        out.append(Job(f"seed_{s}/warmup", s, warm))
        out += [Job(f"seed_{s}/{arm}", s, rl, needs=f"seed_{s}/warmup") for arm in arms]
    return out


def simulate(jobs: list[Job], parallel: int, capacity: float) -> dict[str, tuple[float, float]]:
    """``(start, end)`` of each job: at most ``parallel`` at once, the first ready job in order
    first, each going at ``1 / max(1, running / capacity)`` of its speed alone."""
    pending, running, spans, ended = list(jobs), {}, {}, set()
    t = 0.0
    while pending or running:
        for job in list(pending):
            if len(running) >= parallel:
                break
            if job.needs is None or job.needs in ended:
                running[job.name] = job.work_s
                spans[job.name] = (t, t)
                pending.remove(job)
        if not running:
            break  # what is left waits on a job that never ran
        rate = 1.0 / max(1.0, len(running) / capacity)
        dt = min(running.values()) / rate
        t += dt
        for name in list(running):
            running[name] -= dt * rate
            if running[name] <= 1e-9:
                del running[name]
                ended.add(name)
                spans[name] = (spans[name][0], t)
    return spans


def wall_s(args, arms, cfg, basis: Basis, steps: int, seeds) -> float:
    spans = simulate(jobs_for(args, arms, cfg, basis, steps, seeds), args.parallel, basis.capacity)
    return basis.once_s + max((end for _, end in spans.values()), default=0.0)


def plan(args, arms, cfg, basis: Basis) -> dict:
    """The asked run's expected wall time, the steps that fit every seed within the budget (less
    ``eval_reserve_s``), and the seeds that fit at the asked steps."""
    stop = args.budget_s - args.eval_reserve_s
    steps_fit = 0
    while steps_fit < args.steps and wall_s(args, arms, cfg, basis, steps_fit + 1, args.seeds) <= stop:
        steps_fit += 1
    seeds_fit = 0
    while (
        seeds_fit < len(args.seeds) and wall_s(args, arms, cfg, basis, args.steps, args.seeds[: seeds_fit + 1]) <= stop
    ):
        seeds_fit += 1
    rollouts = cfg.rollout.queries_per_step * (cfg.pasr.n_refine + cfg.pasr.n_plain)
    slow = max(1.0, args.parallel / basis.capacity)
    return {
        "basis": asdict(basis),
        "parallel": args.parallel,
        "rollouts_per_step": rollouts,
        "warmup_steps": cfg.warmup.steps,
        "rl_step_s": round(basis.rl_step_s * rollouts / basis.rollouts * slow, 2),
        "warmup_step_s": round(basis.warmup_step_s * slow, 2),
        "eval_s": round(args.eval_size * (basis.eval_s + args.eval_sampled_k * basis.sampled_s) * slow, 1),
        "start_s": round(basis.start_s * slow, 1),
        "warmup_run_s": round(jobs_for(args, arms, cfg, basis, 0, args.seeds[:1])[0].work_s * slow),
        "whole_s": round(wall_s(args, arms, cfg, basis, args.steps, args.seeds)),
        "steps_asked": args.steps,
        "steps_fit": steps_fit,
        "seeds_asked": len(args.seeds),
        "seeds_fit": seeds_fit,
        "budget_s": args.budget_s,
        "stop_at_s": stop,
    }


def plan_lines(p: dict, arms) -> list[str]:
    b = p["basis"]
    runs = p["seeds_asked"] * (1 + len(arms))
    return [
        f"plan: basis {b['source']}; {p['parallel']} runs side by side ({b['capacity']:g} at full speed)",
        f"  a run with {p['parallel']} side by side: warm-up {p['warmup_steps']} steps of {p['warmup_step_s']} s, "
        f"RL step of {p['rollouts_per_step']} rollouts {p['rl_step_s']} s, each evaluation ~{p['eval_s']} s, start "
        f"{b['start_s']:g} s",
        f"  {p['seeds_asked']} seeds x (warm-up + {len(arms)} arms) = {runs} runs of {p['steps_asked']} RL steps: "
        f"~{p['whole_s']} s ({p['whole_s'] / 60:.0f} min)",
        f"  budget {p['budget_s']:.0f} s (runs still going stop at {p['stop_at_s']:.0f} s): "
        f"{p['seeds_fit']} of {p['seeds_asked']} seeds x {len(arms)} arms x {p['steps_asked']} steps fit; "
        f"all {p['seeds_asked']} seeds fit {p['steps_fit']} steps",
    ]


def read_measured(path: str | None) -> dict | None:
    """A pasr_ab result (``--plan-from``), or None where there is none."""
    if not path or not Path(path).is_file():
        return None
    try:
        return json.loads(Path(path).read_text())
    except ValueError:
        return None


def default_reserve(args: argparse.Namespace, cfg, basis: Basis) -> float:
    """What a stop needs after the stop time: the step in flight with its checkpoint, then the
    stopped arms' evaluations (a start and the evaluation; at most ``--parallel`` were going, so
    one wave), at ``--parallel`` side by side, and 10 s to spare."""
    rollouts = cfg.rollout.queries_per_step * (cfg.pasr.n_refine + cfg.pasr.n_plain)
    slow = max(1.0, args.parallel / basis.capacity)
    evaluation = basis.start_s + args.eval_size * (basis.eval_s + args.eval_sampled_k * basis.sampled_s)
    return round((basis.rl_step_s * rollouts / basis.rollouts + evaluation) * slow + 10.0)
