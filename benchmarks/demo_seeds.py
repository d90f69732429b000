"""Does `make demo` learn on more than one seed? Whole demo runs, each from the base model.

Each seed is a whole ``pasr train --preset demo`` run: ``warmup.seed`` (which traces the warm-up
sees and in what order) and ``trainer.seed`` (the RL phase's sampling and query order) both set
to the seed, so no two runs share a warm-up. For each run: greedy accuracy of the warm-up and of
the final checkpoint on the same held-out problems, the paired two-sided sign test between them,
and the final checkpoint's refine and refine-fix rates (beside the warm-up's). One table on stdout
and ``benchmarks/results/demo_seeds.json``::

    {"cpu": {"model", "capability", "cores", "dtype"}, "runs": [{"seed", "wall_s", "warmup_acc",
     "final_acc", "p", "refine_rate", "refine_fix_rate", ...}, ...]}

A run directory that already holds a finished run is read, not rerun (``--runs-dir``), so seeds
can be run on several machines (or beside each other, ``-- model.threads=1``) and gathered here.
Extra ``key=value`` overrides after ``--`` go to every run (e.g. ``model.rollout_dtype=float32
algo.bf16_autocast=false`` for the fp32 figure on a CPU with bf16 matmuls).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from statistics import fmean

from benchmarks.learning_signal import correct_by_query, eval_row
from benchmarks.training_stages import fmt
from eval.significance import paired_counts, sign_test

WALL_FILE = "demo_wall.json"  # the run's wall time, written by this script beside the run


def seed_overrides(seed: int) -> list[str]:
    """A whole run's seed: the warm-up's traces and order, and the RL phase's."""
    return [f"warmup.seed={seed}", f"trainer.seed={seed}"]


def run_seed(run_dir: Path, seed: int, overrides: list[str], preset: str = "demo") -> float:
    """``pasr train --preset PRESET`` for one seed, in a process of its own; its wall time."""
    cmd = [
        sys.executable,
        "-m",
        "recipe",
        "train",
        "--preset",
        preset,
        "--run-dir",
        str(run_dir),
        *seed_overrides(seed),
        *overrides,
    ]
    print("+", " ".join(cmd), flush=True)
    t0 = time.monotonic()
    subprocess.run(cmd, check=True)
    wall = time.monotonic() - t0
    (run_dir / WALL_FILE).write_text(json.dumps({"wall_s": wall, "overrides": overrides}))
    return wall


def run_wall(run_dir: Path) -> float | None:
    """The wall time :func:`run_seed` kept beside the run; None for a run made otherwise."""
    return json.loads((run_dir / WALL_FILE).read_text())["wall_s"] if (run_dir / WALL_FILE).is_file() else None


def seed_row(run_dir: Path, seed: int) -> dict:
    """The table row of a finished demo run (eval/warmup.jsonl and eval/final.jsonl)."""
    warm_path, final_path = run_dir / "eval" / "warmup.jsonl", run_dir / "eval" / "final.jsonl"
    warm, final = eval_row(warm_path), eval_row(final_path)
    wins, losses = paired_counts(correct_by_query(warm_path), correct_by_query(final_path))
    wall = run_wall(run_dir)
    return {
        "seed": seed,
        "wall_s": wall,
        "n": final["n"],
        "warmup_acc": warm["acc"],
        "final_acc": final["acc"],
        "wins": wins,
        "losses": losses,
        "p": sign_test(wins, losses),
        "refine_rate": final["refine_rate"],
        "refine_fix_rate": final["refine_fix_rate"],
        "warmup_refine_rate": warm["refine_rate"],
        "warmup_refine_fix_rate": warm["refine_fix_rate"],
        "format": final["format"],
        "run_dir": str(run_dir),
    }


def seed_rows(runs_dir: str | Path, seeds: list[int], overrides: list[str], row, preset: str = "demo") -> list[dict]:
    """``row(run_dir, seed)`` of each seed's run in ``RUNS_DIR/seed_S``: a finished run is read,
    a missing one is run first (``pasr train --preset PRESET``), an unfinished one is refused."""
    rows = []
    for seed in seeds:
        run_dir = Path(runs_dir) / f"seed_{seed}"
        if not (run_dir / "eval" / "final.jsonl").is_file():
            if run_dir.exists():
                sys.exit(f"{run_dir} holds an unfinished run: finish it (pasr train --resume {run_dir}) or remove it")
            run_seed(run_dir, seed, overrides, preset=preset)
        rows.append(row(run_dir, seed))
    return rows


def write_result(out: str | Path, result: dict) -> None:
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"-> {out}")


def cpu_info(overrides: list[str], dtype: str | None = None) -> dict:
    """The JSON's ``cpu`` (:func:`benchmarks.training_stages.cpu_info`) with the compute dtype
    the runs used: given, forced by ``model.rollout_dtype=`` in the overrides, or this CPU's
    measured choice."""
    from benchmarks.training_stages import cpu_info as measured

    info = measured()
    forced = next((o.split("=", 1)[1] for o in overrides if o.startswith("model.rollout_dtype=")), None)
    info["dtype"] = dtype or (forced if forced not in (None, "auto") else info["dtype"])
    return info


def learned(row: dict, alpha: float = 0.05) -> bool:
    """The demo's claim for one seed: above the warm-up with p < alpha, refining fixing more."""
    fix, warm_fix = row["refine_fix_rate"], row["warmup_refine_fix_rate"]
    return (
        row["final_acc"] > row["warmup_acc"]
        and row["p"] < alpha
        and fix is not None
        and (warm_fix is None or fix > warm_fix)
    )


def table(rows: list[dict]) -> str:
    cols = (
        "seed",
        "wall_s",
        "warmup_acc",
        "final_acc",
        "wins",
        "losses",
        "p",
        "refine_rate",
        "warmup_refine_fix_rate",
        "refine_fix_rate",
    )
    lines = ["| " + " | ".join(cols) + " | learned |", "|---" * (len(cols) + 1) + "|"]
    for r in rows:
        cells = [fmt(r[c]) if c != "wall_s" or r[c] is None else f"{r[c] / 60:.1f} min" for c in cols]
        lines.append("| " + " | ".join(cells) + f" | {'yes' if learned(r) else 'no'} |")
    return "\n".join(lines)


def pooled(results: dict[str, list[dict]], alpha: float = 0.05) -> str:
    """Many settings' seeds in one table: per result file, how many runs ended above or below their
    warm-up and how many of those significantly, then the totals. Why: one setting's three seeds
    cannot tell a setting that does not learn from an unlucky draw; the pool over every setting
    tried from the same kind of warm-up can."""
    cols = ("runs", "mean change", "up", "down", f"up, p < {alpha}", f"down, p < {alpha}")
    lines = ["| result | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]

    def counts(rows: list[dict]) -> list:
        diffs = [r["final_acc"] - r["warmup_acc"] for r in rows]
        return [
            len(rows),
            f"{fmean(diffs):+.3f}",
            sum(d > 0 for d in diffs),
            sum(d < 0 for d in diffs),
            sum(d > 0 and r["p"] < alpha for d, r in zip(diffs, rows)),
            sum(d < 0 and r["p"] < alpha for d, r in zip(diffs, rows)),
        ]

    for name, rows in results.items():
        lines.append(f"| {name} | " + " | ".join(str(c) for c in counts(rows)) + " |")
    every = [r for rows in results.values() for r in rows]
    lines.append("| **all** | " + " | ".join(f"**{c}**" for c in counts(every)) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument(
        "--runs-dir", default="runs/demo-seeds", help="seed S runs in RUNS_DIR/seed_S (read if finished)"
    )
    parser.add_argument("--out", default="benchmarks/results/demo_seeds.json")
    parser.add_argument(
        "--dtype",
        default=None,
        help="the compute dtype the runs used, for the JSON (default: this CPU's measured choice, or the one forced by "
        "the overrides)",
    )
    parser.add_argument(
        "--note", default=None, help="how the runs were made (threads, what else ran), kept in the JSON"
    )
    parser.add_argument(
        "--pool",
        nargs="+",
        metavar="JSON",
        default=None,
        help="instead of running: pool the seeds of result files this script wrote (per file and in all: runs above / "
        "below their warm-up, and significantly)",
    )
    parser.add_argument("overrides", nargs="*", help="key=value overrides for every run (after --)")
    args = parser.parse_args(argv)
    if args.pool:
        print(pooled({Path(f).stem: json.loads(Path(f).read_text())["runs"] for f in args.pool}))
        return 0
    rows = seed_rows(args.runs_dir, args.seeds, args.overrides, seed_row)
    result = {"cpu": cpu_info(args.overrides, args.dtype), "overrides": args.overrides, "note": args.note, "runs": rows}
    print(table(rows))
    print(f"\n{sum(learned(r) for r in rows)} of {len(rows)} seeds learned (p < 0.05, refine-fix above the warm-up's)")
    write_result(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
