"""``gpu_scale``'s result, read from its run directory alone: per seed the held-out rows of the
warm-up, PASR and the control (greedy, and mean@K beside them), the paired tests between them,
the step each RL run was evaluated at and the reward it trained with; the seeds pooled; each RL
run's per-step curves and step time; the printed table and the plot.

Why from files, and a module of its own: a command cut off by the machine must still leave its
figures, so the driver (:mod:`benchmarks.gpu_scale`) rebuilds the result after every phase, and
``--report RUN_DIR`` rebuilds it from a fetched directory; ``pasr_ab`` reads runs the same way
(:func:`evaluated_step`, :func:`reward_of`, :func:`run_config`). The driver re-exports these names.
"""

from __future__ import annotations

import json
from pathlib import Path
from statistics import fmean

from benchmarks import sampled_rows
from benchmarks.gpu_check_report import paired, read_json
from benchmarks.gpu_run_facts import not_evaluated
from benchmarks.learning_signal import eval_row
from benchmarks.training_stages import fmt
from eval.significance import sign_test
from recipe.metrics_file import metric_lines

QUESTION = (
    "Does a ten-times-larger RL phase turn PASR's sampled gains into held-out gains? The embedded model, "
    "three seeds, against the reward without its refine term."
)
ARMS = ("pasr", "control")
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
    rows = {name: row(path) for name, path in dumps.items()}
    state = read_json(seed_dir.parent / "state.json")
    return {
        "rows": rows,
        # a row that is not there says why (not started, stopped before its first checkpoint, ...)
        "missing": {
            name: not_evaluated(seed_dir.parent, f"{seed_dir.name}/{name}", state)
            for name, r in rows.items()
            if r is None
        },
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
        missing = s.get("missing", {})
        acc = [fmt(r[k]["acc"]) if r[k] else missing.get(k, {}).get("status", "-") for k in ROWS]
        acc[1] += f" ({s['steps']['pasr']})" if r["pasr"] else ""
        acc[2] += f" ({s['steps']['control']})" if r["control"] else ""
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
    for name, s in result["seeds"].items():
        for run, why in s.get("missing", {}).items():
            print(f"{name} {run}: {why['status']} ({why['why']})")
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
