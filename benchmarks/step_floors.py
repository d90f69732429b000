"""Each part of a local PASR run beside its floor on this CPU, and a peer's step beside ours.

Issue 36 asks the demo to learn by getting faster, not by shrinking until nothing is learned.
To know which part can get faster, and by how much, each part is set beside its *floor*: the
time its arithmetic alone would take on this CPU. The floor counts the FLOPs of the very step
that was timed, from the model's shapes and the step's real tokens (each distinct prompt and
each prompt prefix several prompts share counted once, as the engine runs them; responses at
their sampled lengths, no padding; causal attention over each token's own context), and divides
them by the rate this CPU reaches on matmuls of the same shapes (the model's linear maps at the
same number of rows: one decode step's live rows, one micro-batch's tokens) in the dtype the
engine ran. ``measured / floor`` is how much of a part is not arithmetic: padding, rows kept past
their stop, per-call overhead, copies, memory-bound decode steps. The issue's target is 2x on an
AVX2 CPU. Outside every floor: AdamW's step (memory-bound; its seconds are shown beside the
update's), syncing the rollout copy's weights, judging.

Parts, each the trainer's own code on the real embedded model (``LocalPasrTrainer``, the
default ``LocalTrainConfig``):

* **warm-up step**: ``warmup_step`` on ``warmup_batch`` (forward, backward, AdamW); its step 1
  runs first, untimed, to warm the allocator, the kernels and AdamW's state;
* **PASR step**: ``pasr_step`` (the RL phase's second; its first, untimed, makes the reference,
  the rollout copy and a fresh AdamW's state), split into generation (sampled refine and plain
  rollouts), reward (judging; no floor), log-probs (the frozen reference's forward over the
  trained rows, ``fill_logprobs``; the old log-probs come from the update's own forward with one
  PPO epoch) and update (the policy's forward and backward over the trained rows, AdamW);
* **evaluation**: ``_evaluate`` on ``--eval-n`` held-out problems, greedy.

The update trains every refine row (``algo.skip_zero_adv=false``): a step whose groups happen to
have no reward spread would skip its update and time nothing; this way the update is the same
work in every run, the work TRL's ``GRPOTrainer`` always does (it trains zero-advantage rows).

The peer: TRL's ``GRPOTrainer`` (the optional ``bench`` extra: ``pip install -e .[bench]``;
skipped with a message when ``trl`` is not installed) from the policy our parts left (two
warm-up steps already make the model stop where the base model writes to the budget), with the
same 8 queries x 4 completions, completion budget, sampling, learning rate, KL weight,
micro-batch and dtype, on the same threads; its last training step is timed (the first warms
up), beside ours. Both columns are the same CPU in the same run: on a shared machine the load
averages before and after, and ``--note``, go into ``--out``.

    python -m benchmarks.step_floors --threads 1 --eval-n 32 --out benchmarks/results/step_floors.json
    python -m benchmarks.step_floors --dtype float32 --no-trl model.path=runs/x/checkpoints/step_000160
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The FLOP counting, the rates, the timed parts and the peer live in their own modules; their
# names are imported here too, so ``from benchmarks.step_floors import ...`` keeps working.
from benchmarks.flop_count import (  # noqa: F401  (re-exported)
    Shapes,
    Work,
    _triangle,
    generation_work,
    micro_batches,
    pass_work,
    total_flops,
)
from benchmarks.matmul_rates import LINEAR_ROWS, LOGIT_ROWS, Rates, floor_seconds, measure_rates, time_linear  # noqa: F401
from benchmarks.timed_parts import (  # noqa: F401  (re-exported)
    TRAIN_KINDS,
    Part,
    _mean_len,
    recorder,
    stopwatch,
    time_parts,
    trained_rows,
    wrapped,
)
from benchmarks.trl_peer import trl_available, trl_step

SUBJECT = ["warmup.steps=2", "trainer.steps=2", "algo.skip_zero_adv=false", "trainer.dump_rollouts=false"]


# ---------------------------------------------------------------- report
def git_commit() -> str:
    try:
        root = Path(__file__).resolve().parents[1]
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def rows_of(parts: list[Part], rates: dict[str, Rates]) -> list[dict]:
    """One row per part, and the PASR step's total after its last part: measured seconds,
    GFLOP (forward and backward), and per measured dtype the floor and measured/floor."""
    step_names = ("generation", "reward", "log-probs", "update")
    step = [p for p in parts if p.name in step_names]

    def row(name, group, dtype, detail):
        r = {
            "part": name,
            "measured_s": sum(p.seconds for p in group),
            "optimizer_s": sum(p.optimizer_s or 0.0 for p in group) if any(p.optimizer_s for p in group) else None,
            "gflop": sum(total_flops(p.work) * (3 if p.train else 1) for p in group) / 1e9,
            "dtype": dtype,
            "detail": detail,
        }
        for d, rate in rates.items():
            floor = (
                sum(floor_seconds(p.work, rate, p.train) for p in group if p.dtype)
                if any(p.dtype for p in group)
                else None
            )
            r[f"floor_{d}_s"], r[f"ratio_{d}"] = floor, (r["measured_s"] / floor if floor else None)
        return r

    out = []
    for p in parts:
        out.append(row(p.name, [p], p.dtype or "-", p.detail))
        if p.name == step_names[-1]:
            out.append(row("PASR step", step, "/".join(sorted({q.dtype for q in step if q.dtype})), "the four above"))
    return out


def print_table(rows: list[dict], dtypes: list[str]) -> None:
    def cell(v, spec):
        return "-" if v is None else format(v, spec)

    head = f"{'part':<14}{'ran in':>10}{'measured s':>12}{'GFLOP':>9}"
    head += "".join(f"{f'floor {d} s':>18}{'x floor':>9}" for d in dtypes)
    print(head + "  what")
    for row in rows:
        line = f"{row['part']:<14}{row['dtype']:>10}{row['measured_s']:>12.2f}{row['gflop']:>9.1f}"
        line += "".join(f"{cell(row[f'floor_{d}_s'], '.2f'):>18}{cell(row[f'ratio_{d}'], '.1f'):>9}" for d in dtypes)
        print(line + f"  {row['detail']}")


def print_peer(peer: dict, subject: dict, step_s: float) -> None:
    """TRL's step beside ours, in time and per rollout token (the two write different numbers of
    tokens: PASR also samples plain rollouts, and sampled lengths differ); adds the per-token
    ratio to ``peer``."""
    ours = {
        "step_s": step_s,
        "rollouts": subject["step_rollouts"],
        "rollout_tokens": subject["step_response_tokens"],
        "trained": subject["step_trained_rows"],
        "trained_tokens": subject["step_trained_tokens"],
    }
    theirs = {
        "step_s": peer["step_s"],
        "rollouts": peer["rows"],
        "trained": peer["rows"],
        "rollout_tokens": round(peer["rows"] * (peer["completion_mean_length"] or 0)),
    }
    theirs["trained_tokens"] = theirs["rollout_tokens"]  # GRPOTrainer trains every completion
    print(f"{'':<26}{'step s':>9}{'rollouts':>10}{'tokens':>8}{'trained':>9}{'tokens':>8}{'s / 1k rollout tokens':>23}")
    for name, c in (("TRL GRPOTrainer", theirs), ("PASR step (local engine)", ours)):
        per_k = c["step_s"] / c["rollout_tokens"] * 1000 if c["rollout_tokens"] else float("nan")
        print(
            f"{name:<26}{c['step_s']:>9.2f}{c['rollouts']:>10}{c['rollout_tokens']:>8}{c['trained']:>9}"
            f"{c['trained_tokens']:>8}{per_k:>23.2f}"
        )
    per_token = (
        (step_s / ours["rollout_tokens"]) / (peer["step_s"] / theirs["rollout_tokens"])
        if theirs["rollout_tokens"]
        else None
    )
    print(
        f"PASR step / TRL step: {step_s / peer['step_s']:.2f}x in time"
        + (f", {per_token:.2f}x per rollout token" if per_token else "")
    )
    peer.update(rollout_tokens=theirs["rollout_tokens"], pasr_per_rollout_token_ratio=per_token)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: the engine's probe, model.threads=0)")
    parser.add_argument(
        "--dtype",
        choices=("auto", "float32", "bfloat16"),
        default="auto",
        help="rollouts and update autocast: the engine's probe (auto) or forced",
    )
    parser.add_argument("--eval-n", type=int, default=64, help="held-out problems in the evaluation (data.eval_size)")
    parser.add_argument("--trl-steps", type=int, default=2, help="TRL GRPOTrainer steps (the last is timed)")
    parser.add_argument("--no-trl", action="store_true", help="skip the TRL peer")
    parser.add_argument("--note", default="", help="what else ran on the machine (written to --out)")
    parser.add_argument("--out", help="write the table as JSON here (e.g. benchmarks/results/step_floors.json)")
    parser.add_argument("overrides", nargs="*", help="key=value overrides of the local defaults (model.path=...)")
    args = parser.parse_args(argv)

    from benchmarks.training_stages import cpu_info
    from recipe.local_engine.config import load_config
    from runtime.cpu_dtype import resolve_dtype

    dtype = (
        []
        if args.dtype == "auto"
        else [f"model.rollout_dtype={args.dtype}", f"algo.bf16_autocast={str(args.dtype == 'bfloat16').lower()}"]
    )
    cfg = load_config(
        overrides=[*SUBJECT, f"model.threads={args.threads}", f"data.eval_size={args.eval_n}", *dtype, *args.overrides]
    )
    load_before = os.getloadavg()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        parts, subject = time_parts(cfg, Path(work) / "policy")
        ran = {p.dtype for p in parts if p.dtype}
        dtypes = ["bfloat16", "float32"] if "bfloat16" in ran else ["float32"]
        rates = {d: measure_rates(subject["shapes"], d) for d in dtypes}
        rows = rows_of(parts, rates)
        peer = None
        if args.no_trl:
            peer_note = "skipped (--no-trl)"
        elif not trl_available():
            peer_note = "skipped: trl is not installed (pip install -e .[bench], or pip install trl)"
        else:
            peer = trl_step(cfg, subject, args.trl_steps)
            peer_note = f"trl {peer['version']}"
    load_after = os.getloadavg()

    print(
        f"\nOne local PASR run's parts beside their floors (FLOPs / this CPU's matmul rate at the same shapes); "
        f"{subject['threads']} torch thread(s), {subject['attention']} attention, rollouts {subject['rollout_dtype']}, "
        f"update {subject['update_dtype']}; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after"
    )
    print_table(rows, dtypes)
    for d, r in rates.items():
        print(
            f"{d} matmul rate, GFLOP/s by rows: linear "
            + ", ".join(f"{m}: {v / 1e9:.0f}" for m, v in r.forward["linear"].items())
            + "; logits "
            + ", ".join(f"{m}: {v / 1e9:.0f}" for m, v in r.forward["logits"].items())
        )
    step_s = next(row["measured_s"] for row in rows if row["part"] == "PASR step")
    print(
        f"\npeer: TRL GRPOTrainer, {cfg.rollout.queries_per_step} queries x {cfg.pasr.n_refine} completions, "
        f"max {cfg.rollout.max_new_tokens} tokens: {peer_note}"
    )
    if peer:
        print_peer(peer, subject, step_s)
    print(f"({time.perf_counter() - started:.0f} s in all)")

    if args.out:
        result = {
            "cpu": {**cpu_info(), "threads": subject["threads"]},
            "dtype": {
                "requested": args.dtype,
                "rollout": subject["rollout_dtype"],
                "update": subject["update_dtype"],
                "probe": resolve_dtype(args.dtype).describe(),
            },
            "commit": git_commit(),
            "overrides": [*SUBJECT, *args.overrides],
            "eval_n": args.eval_n,
            "load": {"loadavg_before": load_before, "loadavg_after": load_after, "note": args.note},
            "parts": rows,
            "rates_gflops": {
                d: {
                    "forward": {k: {m: v / 1e9 for m, v in t.items()} for k, t in r.forward.items()},
                    "backward": {k: {m: v / 1e9 for m, v in t.items()} for k, t in r.backward.items()},
                }
                for d, r in rates.items()
            },
            "peer": {
                "note": peer_note,
                **(peer or {}),
                "pasr_step_s": step_s,
                "pasr_rollouts": subject["step_rollouts"],
                "pasr_rollout_tokens": subject["step_response_tokens"],
                "pasr_trained_rows": subject["step_trained_rows"],
                "pasr_trained_tokens": subject["step_trained_tokens"],
            },
        }
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
