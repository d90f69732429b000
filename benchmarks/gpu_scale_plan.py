"""``gpu_scale``'s plan: each phase's expected time (the warm-ups, the RL runs, the evaluations of
stopped runs) from a measured run of the benchmark, and how many RL steps fit the budget, which
``--dry-run`` prints and the result records.

Why a module of its own: the plan is arithmetic on measured figures (:data:`BASIS`), read and
changed apart from the driver that runs the phases (:mod:`benchmarks.gpu_scale`, which re-exports
these names).
"""

from __future__ import annotations

from benchmarks import sampled_rows

# The plan's figures, measured on a lent H200 by this benchmark (2026-11-28, commit 32c8928, 290-s
# budget, docs/results/gpu_scale.md): three demo warm-ups side by side with their evaluations 62 s
# (the embedded model already converted), six RL runs of 16 queries x (8 + 8) rollouts side by
# side 8.76 s a step (8.42-9.05), the evaluations of six stopped runs 33.5 s; and from the H100's
# local-engine runs: a Python start 16 s, the GGUF conversion of a fresh machine 21 s, a
# checkpoint 2 s, a greedy evaluation of 300 problems 5 s, a warm-up step 0.22 s.
BASIS = {
    "device": "NVIDIA H200",
    "runs": 6,
    "rollouts": 16 * (8 + 8),
    "step_s": 8.76,
    "warmups_s": 62.0,
    "warmup_steps": 100,  # the demo's
    "evals_s": 33.5,
}
START_S, CONVERT_S, CKPT_S, EVAL_S, WARMUP_STEP_S = 16.0, 21.0, 2.0, 5.0, 0.22


def plan(args, cfg) -> dict:
    """Each phase's expected time from :data:`BASIS` (a measured run of this benchmark): its RL
    step scaled by rollouts a step (linear: an upper bound for generation, which batches) and by
    ``--side-by-side`` (the slowdown against BASIS's six runs sharing the GPU: 1 for three seeds),
    a fresh machine's model conversion added, and the RL steps that fit the budget."""
    rollouts = cfg.rollout.queries_per_step * (cfg.pasr.n_refine + cfg.pasr.n_plain)
    measured = BASIS["step_s"] * rollouts / BASIS["rollouts"]
    step_s = args.step_s or measured * args.side_by_side
    sampled = sampled_rows.extra_s(args, EVAL_S)  # each evaluation's K samples a question (estimated)
    warm = CONVERT_S + BASIS["warmups_s"] + (cfg.warmup.steps - BASIS["warmup_steps"]) * WARMUP_STEP_S + sampled
    rl = START_S + args.steps * step_s + CKPT_S + EVAL_S + sampled
    evals = BASIS["evals_s"] + sampled
    room = args.budget_s - args.eval_reserve_s - warm - START_S
    return {
        "basis": f"{BASIS['runs']} local-engine RL runs side by side, {BASIS['rollouts']} rollouts a step: "
        f"{BASIS['step_s']} s a step on an {BASIS['device']} (docs/results/gpu_scale.md)",
        "rollouts_per_step": rollouts,
        "step_s_measured": round(measured, 2),
        "side_by_side": args.side_by_side,
        "step_s": round(step_s, 2),
        "phases_s": {"warmups": round(warm), "rl": round(rl), "evals": round(evals)},
        "whole_s": round(warm + rl),
        "steps_asked": args.steps,
        "steps_fit": max(0, int(room // step_s)),
        "stop_at_s": args.budget_s - args.eval_reserve_s,
    }


def print_plan(p: dict, args) -> None:
    n, s = len(args.seeds), p["phases_s"]
    print(
        f"plan: basis {p['basis']}; a step here has {p['rollouts_per_step']} rollouts: {p['step_s_measured']} s "
        f"(scaled by rollouts), x{p['side_by_side']} for {2 * len(args.seeds)} runs side by side = {p['step_s']} s"
        + (" (--step-s)" if args.step_s else "")
    )
    for what, runs, expected in (
        ("1. warm-ups", f"{n} side by side", f"warm-up and its evaluation ~{s['warmups']} s"),
        (
            "2. RL runs",
            f"{2 * n} side by side",
            f"{args.steps} steps of {p['step_s']} s and an evaluation ~{s['rl']} s",
        ),
        ("3. evaluations", "of runs stopped", f"~{s['evals']} s"),
    ):
        print(f"  {what:<16}{runs:<18}{expected}")
    print(
        f"  budget {args.budget_s:.0f} s: from {p['stop_at_s']:.0f} s the RL runs stop after the step the furthest "
        f"is in (SIGINT, a checkpoint); about {p['steps_fit']} steps fit; {args.steps} steps would take "
        f"~{p['whole_s']} s ({p['whole_s'] / 60:.0f} min) before the evaluations"
    )
