"""Does a ten-times-larger RL phase turn PASR's sampled gains into held-out gains? The embedded
model, three seeds, against the reward without its refine term. ``bash recipe/scripts/gpu_scale.sh``
(this module: ``python3 -m benchmarks.gpu_scale``), on one GPU, every start-up included.

Why: over a warm-up whose rate decayed to zero, ten PASR steps made the sampled answers better
(the reward rose) without moving the greedy held-out ones (docs/results/demo.md); a larger RL
phase is cheap on a GPU. The local engine only (``python -m recipe train``), per seed S
(``warmup.seed`` = ``trainer.seed`` = S):

1. **warm-up** of the embedded SmolLM2-135M, its rate decayed to zero (``warmup.lr_schedule=cosine``),
   checkpointed at its end and evaluated greedily on the held-out problems (``eval/warmup.jsonl``);
2. from that checkpoint, **PASR** (the reward with its refine term) and the **control** (the same
   run with ``pasr.weights.refine=0``, everything else equal) for ``--steps`` steps of
   ``--queries-per-step`` queries x (``--n-refine`` + ``--n-plain``) rollouts, each evaluated
   greedily at its end (``eval/final.jsonl``);
3. paired sign tests of PASR against the warm-up and the control, per seed and pooled; refine-fix
   and refine-break rates, tokens, every RL run's per-step curves (its ``metrics.jsonl``); beside
   each greedy row mean@K at temperature 0.5 (the paper's protocol, ``--eval-sampled-k``) with the
   same tests on per-question means (:mod:`benchmarks.sampled_rows`).

The three warm-ups run side by side on the one GPU, then the six RL runs (a 135M model fits
many times over). Everything runs under one wall-clock budget (``--budget-s``): from
``--eval-reserve-s`` before its end the RL runs still going stop after one same step (SIGINT
during it: the local trainer finishes the step, checkpoints it and exits), a run still going at
the budget's end gets SIGTERM and SIGKILL, and the checkpoints of the stopped runs are evaluated
in a last phase. The result is rebuilt from the run directory after every phase, so a command
cut off by the machine still leaves its figures, and ``--report RUN_DIR`` rebuilds them from the
files alone. ``--dry-run`` prints every command and the plan: each phase's expected time from a
measured step time, and how many steps fit.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from statistics import fmean

from benchmarks import sampled_rows
from benchmarks.gpu_check import (
    Progress,
    device_name,
    eval_cmd,
    git_commit,
    local_pasr_cmd,
    local_settings,
    warmup_cmd,
)
from benchmarks.gpu_check import build_parser as gpu_check_parser
from benchmarks.gpu_check_report import paired, read_json, write_result
from benchmarks.learning_signal import PAPER_EXACT, eval_row
from benchmarks.report_files import ReportError, rebuild
from benchmarks.training_stages import fmt
from benchmarks.watched_run import ROOT, WatchedRun
from eval.significance import sign_test
from recipe.metrics_file import metric_lines

QUESTION = (
    "Does a ten-times-larger RL phase turn PASR's sampled gains into held-out gains? The embedded model, "
    "three seeds, against the reward without its refine term."
)
ARMS = ("pasr", "control")
ARM_OVERRIDES = {"pasr": [], "control": ["pasr.weights.refine=0"]}  # the control: the reward less its refine term
ROWS = ("warmup", "pasr", "control")
TESTS = {
    "pasr_vs_warmup": ("warmup", "pasr"),
    "pasr_vs_control": ("control", "pasr"),
    "control_vs_warmup": ("warmup", "control"),
}
POOLED_KEYS = ("acc", "format", "refine_rate", "refine_fix_rate", "refine_break_rate", "tokens")
CURVE_KEYS = (
    "pasr/reward_mean",
    "pasr/refine_reward_mean",
    "pasr/format_pass_rate",
    "pasr/acc_refine",
    "pasr/acc_plain",
    "pasr/refine_rate",
    "pasr/refine_fix_rate",
    "pasr/refine_break_rate",
    "pasr/zero_spread_groups",
    "actor/pg_loss",
    "actor/kl_loss",
    "actor/grad_norm",
    "actor/lr",
    "actor/trained_rows",
    "timing_s/step",
)

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


# --------------------------------------------------------------------------- commands
def with_(args, **changes) -> argparse.Namespace:
    """What gpu_check's command builders read from their ``args``: gpu_check's own defaults (for
    whatever option they come to read), this benchmark's options over them, its part whose local
    PASR run evaluates itself at its end (``all``), the decayed warm-up, then ``changes`` (one
    run's seed and overrides)."""
    fixed = {"part": "all", "warmup_lr_schedule": "cosine"}
    return argparse.Namespace(**{**vars(gpu_check_parser().parse_args([])), **vars(args), **fixed, **changes})


def common_overrides(args, n_runs: int) -> list[str]:
    """What every run of the benchmark shares beyond gpu_check's common settings (which carry
    the decayed warm-up, :func:`with_`): the group sizes, one generate call for a step's rollouts
    on the GPU, and the cores shared among the runs side by side. The user's
    ``--local-override`` comes last."""
    return [
        f"pasr.n_refine={args.n_refine}",
        f"pasr.n_plain={args.n_plain}",
        f"rollout.gen_batch_size={args.gen_batch_size}",
        f"model.threads={max(1, len(os.sched_getaffinity(0)) // n_runs)}",
    ]


def reward_overrides(args) -> list[str]:
    """``preset``: the reward of ``--preset`` (the cpu preset's: margin, tie 0, restating refines
    paid 0), the one the earlier CPU and GPU runs trained with; ``paper``: the paper-exact reward
    of benchmarks.learning_signal."""
    return list(PAPER_EXACT) if args.reward == "paper" else []


def warmup_checkpoint(root: Path, seed: int, cfg) -> Path:
    """Where seed ``seed``'s warm-up leaves its end (pinned), the RL runs' ``model.path``."""
    from recipe.step_files import step_name

    return root / f"seed_{seed}" / "warmup" / "checkpoints" / step_name(cfg.warmup.steps)


def run_args(args, seed: int, n_runs: int, *overrides: str) -> argparse.Namespace:
    """One run's ``args`` for gpu_check's builders: its seed, the shared overrides, its own, the user's."""
    return with_(args, seed=seed, local_override=[*common_overrides(args, n_runs), *overrides, *args.local_override])


def commands(args, root: Path, cfg) -> dict[str, list[str]]:
    """Every run's command, by ``seed_S/warmup`` and ``seed_S/<arm>`` (gpu_check's builders)."""
    out = {}
    n_rl = len(ARMS) * len(args.seeds)
    for seed in args.seeds:
        d = root / f"seed_{seed}"
        out[f"seed_{seed}/warmup"] = warmup_cmd(run_args(args, seed, len(args.seeds)), d / "warmup", cfg)
        for arm in ARMS:
            own = [*reward_overrides(args), *ARM_OVERRIDES[arm], f"trainer.save_every={args.save_every}"]
            out[f"seed_{seed}/{arm}"] = local_pasr_cmd(
                run_args(args, seed, n_rl, *own), d / arm, warmup_checkpoint(root, seed, cfg)
            )
    return out


def stopped_eval_cmd(args, root: Path, name: str, ckpt: Path) -> list[str]:
    """The greedy evaluation of a stopped RL run's last checkpoint (``<arm>_eval/eval/base.jsonl``)."""
    seed = int(name.split("/")[0].removeprefix("seed_"))
    return eval_cmd(run_args(args, seed, len(ARMS) * len(args.seeds)), root / f"{name}_eval", ckpt)


def cmd_overrides(cmd: list[str]) -> list[str]:
    return cmd[cmd.index("--run-dir") + 2 :]


def check_configs(args, cmds: dict[str, list[str]]) -> None:
    """Every command's config loads and validates here, the GPU aside (``model.device``)."""
    from recipe.local_engine.config import load_config

    for name, cmd in cmds.items():
        try:
            load_config(
                preset=args.preset, overrides=[o for o in cmd_overrides(cmd) if not o.startswith("model.device")]
            )
        except Exception as exc:
            raise SystemExit(f"gpu_scale: {name}: {exc}") from None


# --------------------------------------------------------------------------- plan
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


# --------------------------------------------------------------------------- result
def row(path: Path) -> dict | None:
    return eval_row(path) if path.is_file() else None


def arm_eval(seed_dir: Path, arm: str) -> Path:
    """The dump of an RL run's evaluation: its own at its end, else that of its last checkpoint."""
    final = seed_dir / arm / "eval" / "final.jsonl"
    return final if final.is_file() else seed_dir / f"{arm}_eval" / "eval" / "base.jsonl"


def run_config(run_dir: Path) -> dict:
    import yaml

    path = run_dir / "config.yaml"
    return yaml.safe_load(path.read_text()) if path.is_file() else {}


def evaluated_step(seed_dir: Path, arm: str) -> int | None:
    """The RL step of the evaluated policy (:func:`arm_eval`'s): the step of the run's own final
    evaluation, or of the checkpoint the last phase evaluated (its trainer_state.json, else its
    folder's name); None where neither was evaluated."""
    dump = arm_eval(seed_dir, arm)
    if not dump.is_file():
        return None
    if dump.name == "final.jsonl":
        final = [m for m in metric_lines(seed_dir / arm) if m.get("phase") == "eval" and m.get("tag") == "final"]
        return final[-1]["step"] if final else None
    model = run_config(seed_dir / f"{arm}_eval").get("model", {}).get("path")
    if not model:
        return None
    from recipe.step_files import step_of

    # the folder's name where the checkpoint itself did not travel (a run directory packed without them)
    return read_json(Path(model) / "trainer_state.json").get("step") or step_of(Path(model).name)


def reward_of(cfg: dict) -> dict:
    """The keys that say which reward a run trained with, as its config.yaml has them."""
    p = cfg.get("pasr", {})
    keys = ("n_refine", "n_plain", "tie_value", "zeta", "empty_refine_value", "refine_compare", "weights")
    return {k: p.get(k) for k in keys} | {
        "queries_per_step": cfg.get("rollout", {}).get("queries_per_step"),
        "trainer.seed": cfg.get("trainer", {}).get("seed"),
        "warmup.seed": cfg.get("warmup", {}).get("seed"),
    }


def seed_dumps(seed_dir: Path) -> dict[str, Path]:
    return {"warmup": seed_dir / "warmup" / "eval" / "warmup.jsonl", **{arm: arm_eval(seed_dir, arm) for arm in ARMS}}


def seed_result(seed_dir: Path) -> dict:
    dumps = seed_dumps(seed_dir)
    return {
        "rows": {name: row(path) for name, path in dumps.items()},
        "sampled": sampled_rows.section(dumps, *TESTS),  # mean@K at T=0.5, tests on per-question means
        "steps": {arm: evaluated_step(seed_dir, arm) for arm in ARMS},
        "tests": {name: paired(dumps[a], dumps[b]) for name, (a, b) in TESTS.items()},
        "configs": {arm: reward_of(run_config(seed_dir / arm)) for arm in ARMS},
    }


def mean_of(values) -> float | None:
    """The mean of the values that are not None (a rate with no denominator is None), or None."""
    values = [v for v in values if v is not None]
    return fmean(values) if values else None


def pooled(seeds: dict[str, dict]) -> dict:
    """Over the seeds with all three rows: mean rows, and each test's wins and losses summed
    (one sign test on the pool) with the seeds that went up and down."""
    done = [s for s in seeds.values() if all(s["rows"][r] for r in ROWS)]
    rows = {name: {k: mean_of(s["rows"][name][k] for s in done) for k in POOLED_KEYS} for name in ROWS}
    tests = {}
    for name in TESTS:
        pairs = [s["tests"][name] for s in done]
        wins, losses = sum(t["wins"] for t in pairs), sum(t["losses"] for t in pairs)
        tests[name] = {
            "wins": wins,
            "losses": losses,
            "p": sign_test(wins, losses),
            "seeds_up": sum(t["wins"] > t["losses"] for t in pairs),
            "seeds_down": sum(t["wins"] < t["losses"] for t in pairs),
        }
    return {"n_seeds": len(done), "rows": rows, "tests": tests}


def curves(run_dir: Path) -> dict:
    """An RL run's per-step training metrics (its ``metrics.jsonl``), each key a list by step."""
    lines = [m for m in metric_lines(run_dir) if m.get("phase") == "pasr"]

    def num(v):
        return None if v is None else float(f"{v:.4g}")

    return {"step": [m["step"] for m in lines], **{k: [num(m.get(k)) for m in lines] for k in CURVE_KEYS}}


def build_result(root: Path) -> dict:
    """The benchmark's result from what ``root`` holds now (its settings.json, state.json, the
    runs' evaluation dumps, configs and metrics): after every phase, or with ``--report``."""
    settings, state = read_json(root / "settings.json"), read_json(root / "state.json")
    seeds = {f"seed_{s}": seed_result(root / f"seed_{s}") for s in settings.get("seeds", [])}
    pool = pooled(seeds)
    done = [root / name for name, s in seeds.items() if all(s["rows"][r] for r in ROWS)]  # pooled()'s seeds
    pool["sampled"] = sampled_rows.pooled([seed_dumps(d) for d in done], *TESTS)
    runs = {f"{s}/{arm}": curves(root / s / arm) for s in seeds for arm in ARMS}
    # each RL run's mean step time, side by side; its first step, which pays one-off warm-ups, left out
    step_s = {name: mean_of(c["timing_s/step"][1:]) for name, c in runs.items()}
    step_s = {name: None if t is None else round(t, 2) for name, t in step_s.items()}
    verdict = {
        f"{name}_{way}": t["p"] < 0.05 and (t["wins"] > t["losses"] if way == "up" else t["wins"] < t["losses"])
        for name, t in pool["tests"].items()
        for way in ("up", "down")
    }
    return {
        "question": QUESTION,
        "device": settings.get("device"),
        "commit": settings.get("commit"),
        "wall_s": round(sum(p["wall_s"] for p in state.get("parts", {}).values()), 1),
        "budget_s": settings.get("budget_s"),
        "complete": bool(state.get("complete")),
        "seeds": seeds,
        "pooled": pool,
        "p": {
            name: {
                **{s: (r["tests"][name] or {}).get("p") for s, r in seeds.items()},
                "pooled": pool["tests"][name]["p"],
            }
            for name in TESTS
        },
        "verdict": verdict if pool["n_seeds"] else None,
        "curves": runs,
        "timings": {"phases": state.get("phases", {}), "rl_step_s": step_s, "plan": settings.get("plan")},
        "settings": settings,
    }


def print_report(result: dict) -> None:
    print("\n==== gpu_scale ====")
    print(
        f"device: {result['device']}   commit: {result['commit']}   wall: {result['wall_s']:.0f} s"
        + ("" if result["complete"] else "   (not complete: the result so far)")
    )
    head = ("warm-up", "PASR", "control", "PASR vs warm-up", "PASR vs control", "fix / break (w, P, c)")
    print(f"{'':<8}" + "".join(f"  {h:>22}" for h in head))

    def test(t):
        return "-" if not t else f"{t['wins']} / {t['losses']}, p {t['p']:.3g}"

    for name, s in result["seeds"].items():
        r = s["rows"]
        acc = [fmt(r[k]["acc"]) if r[k] else "-" for k in ROWS]
        acc[1] += f" ({s['steps']['pasr']})"
        acc[2] += f" ({s['steps']['control']})"
        fix = " ".join(
            f"{fmt(r[k]['refine_fix_rate'])}/{fmt(r[k]['refine_break_rate'])}" if r[k] else "-" for k in ROWS
        )
        cells = [*acc, test(s["tests"]["pasr_vs_warmup"]), test(s["tests"]["pasr_vs_control"]), fix]
        print(f"{name:<8}" + "".join(f"  {c:>22}" for c in cells))
    pool = result["pooled"]
    if pool["n_seeds"]:
        acc = [fmt(pool["rows"][k]["acc"]) for k in ROWS]
        cells = [*acc, test(pool["tests"]["pasr_vs_warmup"]), test(pool["tests"]["pasr_vs_control"]), ""]
        print(f"{'pooled':<8}" + "".join(f"  {c:>22}" for c in cells))
    for name, s in [*result["seeds"].items(), ("pooled", result["pooled"])]:
        sampled_rows.print_report(s.get("sampled"), f"{name}: ")
    print(f"verdict: {result['verdict']}")
    print(
        f"timings: {json.dumps(result['timings']['phases'])}; RL step s: {json.dumps(result['timings']['rl_step_s'])}"
    )


PLOT_CURVES = (
    ("pasr/acc_refine", "sampled refine-rollout accuracy"),
    ("pasr/refine_fix_rate", "sampled refine-fix rate"),
    ("pasr/refine_break_rate", "sampled refine-break rate"),
)


def _pair(test: dict | None) -> str:
    """A paired sign test as a plot prints it: wins/losses, p."""
    return f"{test['wins']}/{test['losses']}, p {test['p']:.2g}" if test else "-"


def plot_scale(result: dict, path: Path) -> Path:
    """One column a seed: PASR's and the control's sampled curves (the training signal), and at
    the bottom the three held-out rows with the paired tests (what the signal did to the model)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    seeds = list(result["seeds"])
    fig, axes = plt.subplots(
        len(PLOT_CURVES) + 1, len(seeds), figsize=(4.2 * len(seeds), 10), constrained_layout=True, squeeze=False
    )
    for col, name in enumerate(seeds):
        for row, (key, title) in enumerate(PLOT_CURVES):
            ax = axes[row][col]
            for arm, style in (("pasr", "-o"), ("control", "--s")):
                c = result["curves"].get(f"{name}/{arm}") or {}
                pts = [(s, v) for s, v in zip(c.get("step", []), c.get(key, [])) if v is not None]
                if pts:
                    ax.plot(*zip(*pts), style, ms=3, label="PASR" if arm == "pasr" else "control (refine term 0)")
            ax.set_title(f"{name}: {title}", fontsize=9)
            ax.set_xlabel("RL step")
            ax.set_ylim(0, 1)
            if ax.has_data():
                ax.legend(fontsize=7)
        ax = axes[-1][col]
        rows = result["seeds"][name]["rows"]
        labels = [k for k in ROWS if rows.get(k)]
        accs = [rows[k]["acc"] for k in labels]
        bars = ax.bar(labels, accs, color=["0.6", "tab:blue", "tab:orange"][: len(labels)])
        ax.bar_label(bars, labels=[f"{a:.3f}" for a in accs], fontsize=8)
        lo = min(accs, default=0)
        ax.set_ylim(max(0.0, lo - 0.15), min(1.0, max(accs, default=1) + 0.08))
        t = result["seeds"][name]["tests"]
        ax.set_title(
            f"{name}: held-out greedy accuracy (n={rows[labels[0]]['n'] if labels else 0})\n"
            f"PASR vs warm-up {_pair(t.get('pasr_vs_warmup'))}; vs control {_pair(t.get('pasr_vs_control'))}",
            fontsize=9,
        )
    pt = result.get("pooled", {}).get("tests", {})

    steps = sorted({v for s in result["seeds"].values() for v in s["steps"].values() if v is not None})
    fig.suptitle(
        f"gpu_scale on {result['device']} ({'/'.join(map(str, steps))} RL steps, commit "
        f"{(result.get('commit') or '?')[:7]}): pooled PASR vs warm-up {_pair(pt.get('pasr_vs_warmup'))}, "
        f"PASR vs control {_pair(pt.get('pasr_vs_control'))}",
        fontsize=11,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------- running
def rl_step(run: WatchedRun, root: Path) -> int:
    """The last RL step ``run`` logged (its run directory's ``metrics.jsonl``)."""
    return max((m["step"] for m in metric_lines(root / run.name) if m.get("phase") == "pasr"), default=0)


def side_by_side(runs: list[WatchedRun], deadline: float, stop_at: float | None = None, root: Path | None = None):
    """Start ``runs`` together and wait for them. From ``stop_at``, each RL run still going gets
    SIGINT during the same step T (the one the furthest run is in), so all stop after step T
    with its checkpoint (the local trainer's own stop) and PASR and its control are compared
    at the same step. At ``deadline``, SIGTERM; ten seconds later, SIGKILL."""
    for run in runs:
        run.start()

    def going() -> list[WatchedRun]:
        return [r for r in runs if r.proc.poll() is None]

    while going() and time.monotonic() < (stop_at or deadline):
        time.sleep(0.5)
    if stop_at is not None and going():
        target = max(rl_step(r, root) for r in runs) + 1
        print(f"gpu_scale: stopping the RL runs after step {target}", flush=True)
        pending = going()
        while pending and time.monotonic() < deadline:
            for run in [r for r in pending if r.proc.poll() is not None or rl_step(r, root) >= target - 1]:
                run.signal(signal.SIGINT)  # during step target: the trainer ends it, saves it, exits
                pending.remove(run)
            time.sleep(0.5)
    while going() and time.monotonic() < deadline:
        time.sleep(0.5)
    for run in going():
        run.signal(signal.SIGTERM)
    for run in runs:
        run.wait(deadline + 10.0, grace_s=0.0)


def prepare_root(root: Path) -> None:
    """A fresh run directory; one that holds something else than this benchmark's is refused."""
    if root.exists() and any(root.iterdir()):
        if not (root / "settings.json").is_file():
            raise SystemExit(
                f"gpu_scale: {root} is not empty and not a gpu_scale run directory: choose another --run-dir"
            )
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)


def run(args, cfg, root: Path, cmds: dict[str, list[str]], the_plan: dict) -> dict:
    prepare_root(root)
    settings = {
        "device": device_name(args.device),
        "commit": args.commit or git_commit(),
        "seeds": args.seeds,
        "steps": args.steps,
        "preset": args.preset,
        "reward": args.reward,
        "queries_per_step": cfg.rollout.queries_per_step,
        "n_refine": cfg.pasr.n_refine,
        "n_plain": cfg.pasr.n_plain,
        "warmup_steps": cfg.warmup.steps,
        "eval_size": args.eval_size,
        "budget_s": args.budget_s,
        "eval_reserve_s": args.eval_reserve_s,
        "plan": the_plan,
        "commands": {name: cmd_overrides(cmd) for name, cmd in cmds.items()},
    }
    (root / "settings.json").write_text(json.dumps(settings, indent=1) + "\n")
    # gpu_check's Progress: phase times and findings in state.json, this benchmark's result after every phase
    progress = Progress(root, "all", Path(args.out), args.budget_s, name="gpu_scale", build=build_result)
    print(f"gpu_scale: {settings['device']}; commit {settings['commit']}; run directory {root}", flush=True)
    print_plan(the_plan, args)
    deadline = progress.deadline

    def watched(name: str, cmd: list[str]) -> WatchedRun:
        return WatchedRun(name, cmd, root / f"{name.replace('/', '_')}.log")

    t = time.monotonic()
    warmups = [watched(f"seed_{s}/warmup", cmds[f"seed_{s}/warmup"]) for s in args.seeds]
    side_by_side(warmups, deadline - args.eval_reserve_s)
    progress.phase("warmups", t)

    t = time.monotonic()
    started = [
        watched(f"seed_{s}/{arm}", cmds[f"seed_{s}/{arm}"])
        for s in args.seeds
        if (warmup_checkpoint(root, s, cfg) / "trainer_state.json").is_file()
        for arm in ARMS
    ]
    side_by_side(started, deadline, stop_at=deadline - args.eval_reserve_s, root=root)
    progress.phase("rl", t)

    from runtime.model_loading import checkpoint_named_by

    t = time.monotonic()
    evals = []
    for r in started:
        pointer = root / r.name / "checkpoints" / "latest"
        ckpt = checkpoint_named_by(pointer) if pointer.is_file() else None
        if not (root / r.name / "eval" / "final.jsonl").is_file() and ckpt is not None:
            evals.append(watched(f"{r.name}_eval", stopped_eval_cmd(args, root, r.name, ckpt)))
    side_by_side(evals, deadline + args.eval_grace_s)
    progress.phase("evals", t, complete=True)
    return progress.save()


# --------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gpu_scale", description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--run-dir", default="runs/gpu-scale", help="everything the benchmark writes (cleared first)")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="warmup.seed = trainer.seed of each run")
    p.add_argument("--steps", type=int, default=100, help="RL steps asked (the budget may stop them sooner)")
    p.add_argument("--queries-per-step", type=int, default=16)
    p.add_argument("--n-refine", type=int, default=8, help="refine rollouts a query (the paper's group)")
    p.add_argument("--n-plain", type=int, default=8, help="plain rollouts a query (the refine reward's baseline)")
    p.add_argument(
        "--reward",
        choices=("preset", "paper"),
        default="preset",
        help="PASR's reward, the control's too less its refine term: preset (the --preset's, margin and tie 0 from "
        "the cpu preset) or paper (benchmarks.learning_signal.PAPER_EXACT)",
    )
    p.add_argument(
        "--gen-batch-size",
        type=int,
        default=256,
        help="rollout.gen_batch_size: one generate call for a step's 256 rollouts (a decode step of a 135M model "
        "on a GPU costs about the same for 256 rows as for 64)",
    )
    p.add_argument("--save-every", type=int, default=10, help="trainer.save_every of the RL runs (a stop saves anyway)")
    p.add_argument("--eval-size", type=int, default=300, help="held-out problems (data.eval_size)")
    sampled_rows.add_option(p)
    p.add_argument("--preset", default="demo", help="local preset: its warm-up (100 steps, nearly always refining)")
    p.add_argument("--device", default="cuda", help="model.device of every run")
    p.add_argument("--budget-s", type=float, default=420.0, help="wall-clock budget of the whole command")
    p.add_argument(
        "--eval-reserve-s",
        type=float,
        default=60.0,
        help="this long before the budget ends the RL runs still going stop after the step the furthest is in "
        "(SIGINT during it): time for that step, the laggards' catching up to it, its checkpoint and its evaluation",
    )
    p.add_argument(
        "--eval-grace-s",
        type=float,
        default=30.0,
        help="how far past the budget the evaluations of stopped runs may run (H100: a start 16 s, an evaluation "
        "5 s); with the budget and 10 s for a kill, the command's longest wall time",
    )
    p.add_argument(
        "--side-by-side",
        type=float,
        default=1.0,
        help="the plan's slowdown of an RL step against the measured basis (six runs sharing an H200); "
        "e.g. about 2 on an H100 or with twice the runs (assumed, not measured)",
    )
    p.add_argument(
        "--step-s",
        type=float,
        default=None,
        help="the plan's RL step time with the runs side by side, once measured (a result's timings.rl_step_s)",
    )
    p.add_argument("--local-override", action="append", default=[], help="extra override for every run")
    p.add_argument("--out", default="benchmarks/results/gpu_scale.json")
    p.add_argument("--report", metavar="RUN_DIR", help="only rebuild the result of RUN_DIR and write it to --out")
    p.add_argument("--dry-run", action="store_true", help="print every command and the plan; run nothing")
    p.add_argument(
        "--commit",
        default=None,
        help="the commit the benchmark runs (default: git rev-parse HEAD; a lent machine's copy of .git may be "
        "older than the tree it was sent)",
    )
    p.add_argument("--plot", metavar="PNG", help="with --report: each seed's PASR and control curves and held-out rows")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    out = Path(args.out)
    if args.report:
        try:
            result = rebuild(args.report, "gpu_scale", build_result, print_report)
        except ReportError as exc:
            print(f"gpu_scale: {exc}", file=sys.stderr)
            return 2
        write_result(result, out)
        if args.plot:
            print(f"gpu_scale: wrote {plot_scale(result, Path(args.plot))}")
        return 0
    root = (ROOT / args.run_dir).resolve() if not Path(args.run_dir).is_absolute() else Path(args.run_dir)
    cfg = local_settings(run_args(args, args.seeds[0], 1))  # the sizes and the warm-up every run shares
    cmds = commands(args, root, cfg)
    check_configs(args, cmds)
    the_plan = plan(args, cfg)
    if args.dry_run:
        for name, cmd in cmds.items():
            print(f"{name + ':':<16} {' '.join(cmd)}")
        example = f"seed_{args.seeds[0]}/pasr"
        print(f"{'stopped run:':<16} {' '.join(stopped_eval_cmd(args, root, example, Path('<its last checkpoint>')))}")
        print_plan(the_plan, args)
        return 0
    result = run(args, cfg, root, cmds, the_plan)
    print_report(result)
    print(f"gpu_scale: wrote {out}; logs in {root}")
    return 0 if result["complete"] and result["pooled"]["n_seeds"] == len(args.seeds) else 1


if __name__ == "__main__":
    raise SystemExit(main())
