"""Does Reflect, Retry, Reward learn on the embedded model, seed after seed? Whole RRR runs.

The RRR counterpart of :mod:`benchmarks.demo_seeds`: each seed is a whole ``pasr train --preset
rrr`` run from the base model (``warmup.seed`` and ``trainer.seed`` set to the seed), with the
overrides after ``--`` (e.g. ``data.source=synthetic pasr.judge.kind=rule`` for the synthetic
arithmetic, where the warm-up's first attempts are right about half the time and every error is
an arithmetic one a reflection can name). For each run, the warm-up and the final checkpoint are
evaluated as RRR evaluates (:func:`recipe.local_engine.rrr.evaluate_rrr`: a greedy first
attempt, and for each failure one reflection and one retry) on the same held-out problems, and
paired two-sided sign tests compare them at the first attempt and at the final answer. RRR's
claim is the final answer's: **learned** means final accuracy above the warm-up's with
p < 0.05 while the first attempt is not significantly worse. One table on stdout and
``benchmarks/results/learning_signal_rrr_seeds.json``::

    {"cpu": {...}, "overrides": [...], "runs": [{"seed", "wall_s", "rows": {"warm-up", "RRR"},
     "pairs": {"first", "final"}, "p_rrr_vs_warmup_first_attempt", "p_rrr_vs_warmup_final",
     "rrr_phase": {"steps", "trends"}, "learned"}, ...]}

A run directory that already holds a finished run is read, not rerun (``--runs-dir``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.demo_seeds import cpu_info, run_wall, seed_rows, write_result
from benchmarks.learning_signal_rrr import correct_by_query, eval_row
from benchmarks.training_stages import fmt, phase_steps, trends
from eval.significance import paired_counts, sign_test

TREND_KEYS = (
    "rrr/first_attempt_acc",
    "rrr/retry_acc",
    "rrr/recovered_rate",
    "rrr/reflection_length/mean",
    "rrr/trained_rows",
)


def seed_row(run_dir: Path, seed: int, alpha: float = 0.05) -> dict:
    """The row of a finished RRR run (eval/warmup.jsonl and eval/final.jsonl)."""
    warm_path, final_path = run_dir / "eval" / "warmup.jsonl", run_dir / "eval" / "final.jsonl"
    warm, final = correct_by_query(warm_path), correct_by_query(final_path)
    pairs = {}
    for which in ("first", "final"):
        wins, losses = paired_counts(warm[which], final[which])  # RRR right & warm-up wrong, the reverse
        pairs[which] = {"wins": wins, "losses": losses, "p": sign_test(wins, losses)}
    rows = {"warm-up": eval_row(warm_path), "RRR": eval_row(final_path)}
    steps = phase_steps(run_dir, "rrr")
    wall = run_wall(run_dir)
    first_worse = (
        rows["RRR"]["first_attempt_acc"] < rows["warm-up"]["first_attempt_acc"] and pairs["first"]["p"] < alpha
    )
    learned = rows["RRR"]["acc"] > rows["warm-up"]["acc"] and pairs["final"]["p"] < alpha and not first_worse
    return {
        "seed": seed,
        "wall_s": wall,
        "rows": rows,
        "pairs": pairs,
        "p_rrr_vs_warmup_first_attempt": pairs["first"]["p"],
        "p_rrr_vs_warmup_final": pairs["final"]["p"],
        "rrr_phase": {"steps": len(steps), "trends": trends(steps, TREND_KEYS)},
        "learned": learned,
        "run_dir": str(run_dir),
    }


def table(runs: list[dict]) -> str:
    head = (
        "seed",
        "warm-up first",
        "RRR first",
        "first W/L",
        "p first",
        "warm-up final",
        "RRR final",
        "final W/L",
        "p final",
        "learned",
    )
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for r in runs:
        w, f, pf, pl = r["rows"]["warm-up"], r["rows"]["RRR"], r["pairs"]["first"], r["pairs"]["final"]
        cells = (
            r["seed"],
            w["first_attempt_acc"],
            f["first_attempt_acc"],
            f"{pf['wins']}/{pf['losses']}",
            pf["p"],
            w["acc"],
            f["acc"],
            f"{pl['wins']}/{pl['losses']}",
            pl["p"],
            "yes" if r["learned"] else "no",
        )
        lines.append("| " + " | ".join(fmt(c) if not isinstance(c, str) else c for c in cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--runs-dir", default="runs/rrr-seeds", help="seed S runs in RUNS_DIR/seed_S (read if finished)"
    )
    parser.add_argument("--preset", default="rrr")
    parser.add_argument("--out", default="benchmarks/results/learning_signal_rrr_seeds.json")
    parser.add_argument(
        "--note", default=None, help="how the runs were made (threads, what else ran), kept in the JSON"
    )
    parser.add_argument("overrides", nargs="*", help="key=value overrides for every run (after --)")
    args = parser.parse_args(argv)
    runs = seed_rows(args.runs_dir, args.seeds, args.overrides, seed_row, preset=args.preset)
    result = {
        "cpu": cpu_info(args.overrides),
        "preset": args.preset,
        "overrides": args.overrides,
        "note": args.note,
        "runs": runs,
    }
    print(table(runs))
    print(
        f"\n{sum(r['learned'] for r in runs)} of {len(runs)} seeds learned (final above the warm-up's, p < 0.05,"
        " first attempt not significantly worse)"
    )
    write_result(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
