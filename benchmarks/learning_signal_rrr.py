"""Does Reflect, Retry, Reward teach the embedded model something? Base, warm-up, RRR and a control, paired.

The RRR counterpart of :mod:`benchmarks.learning_signal` (both run the stages of :mod:`benchmarks.training_stages`):

1. Warm-up run (``--preset rrr``): evaluate the base model, run the supervised warm-up on
   Countdown traces with the attempt prompt, evaluate the warm-up checkpoint.
2. From that checkpoint, at the same time on the two cores (one torch thread each):
   * **RRR**: ``trainer.steps`` RRR steps (reflections on failed attempts, rewarded by their
     retries, trained on the reflection tokens only);
   * **control**: the supervised warm-up continued (its optimizer state too) until the RRR
     phase ends, so both get the same wall time on the same machine under the same load. If
     RRR beats this, the gain is not just "more training".
3. Every policy is evaluated greedily on the same held-out Countdown problems: a first attempt,
   and for each failure one reflection and one retry. Paired two-sided sign tests on
   per-problem correctness of the first attempt and of the final answer (the retry's where
   the first attempt failed); one table on stdout and ``benchmarks/results/learning_signal_rrr.json``.

RRR's claim is about the final answer: a better reflection makes a better retry. A policy
trained only on reflections can still move the first attempt (the weights are shared), so
both are reported.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from benchmarks.training_stages import (
    EVAL_AT_WARMUP,
    alone_threads,
    can_reuse_warmup,
    fmt,
    load,
    machine_info,
    method_and_control,
    phase_steps,
    prepare_dirs,
    trends,
    warmup_stage,
)
from eval.significance import paired_counts, sign_test

ROWS = ("base", "warm-up", "RRR", "control")
COLS = ("first_attempt_acc", "retry_acc", "acc", "recovered", "retried", "reflection_tokens", "tokens", "n")
PAIRS = (("RRR", "warm-up"), ("RRR", "control"), ("control", "warm-up"))


def eval_row(path: Path) -> dict:
    """The table row of one RRR evaluation dump (:func:`recipe.local_engine.rrr.eval_metrics`)."""
    from data.records import iter_records
    from recipe.local_engine.rrr import eval_metrics

    records = list(iter_records(path))
    m = eval_metrics(records)
    return {
        "first_attempt_acc": m["eval/first_attempt_acc"],
        "retry_acc": m["eval/retry_acc"],
        "acc": m["eval/acc"],
        "recovered": int(m["eval/recovered"]),
        "retried": int(m["eval/retried"]),
        "reflection_tokens": m["eval/reflection_length/mean"],
        "tokens": m["eval/tokens"],
        "attempt_tokens": m["eval/response_length/mean"],
        "judge_errors": int(m["eval/judge_errors"]),
        "n": len({r.query_id for r in records}),
    }


def correct_by_query(path: Path) -> dict[str, dict[str, bool]]:
    """``{"first": {query: right at the first attempt}, "final": {query: right after the retry}}``
    (queries whose verifier failed are left out)."""
    from data.records import iter_records
    from recipe.local_engine.rrr import query_outcomes

    outcomes = query_outcomes(list(iter_records(path)))
    return {
        "first": {q: o.first_correct for q, o in outcomes.items() if o.first_correct is not None},
        "final": {q: o.final_correct for q, o in outcomes.items() if o.final_correct is not None},
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", default="runs/bench-learning-signal-rrr")
    parser.add_argument("--preset", default="rrr", help="local engine preset for every run (default: rrr)")
    parser.add_argument("--eval-size", type=int, default=200, help="held-out problems, paired across rows")
    parser.add_argument("--rrr", nargs="*", default=[], help="overrides of the RRR row only")
    parser.add_argument("--out", default="benchmarks/results/learning_signal_rrr.json")
    parser.add_argument(
        "--reuse-warmup",
        action="store_true",
        help="keep the finished stage 1 (base eval, warm-up, warm-up eval) of an earlier run in "
        "--run-dir and rerun only the RRR / control pair",
    )
    parser.add_argument("overrides", nargs="*", help="key=value overrides for every run")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    common = [f"data.eval_size={args.eval_size}", *args.overrides]
    root = Path(args.run_dir)
    cfg = load(args.preset, [*common, *EVAL_AT_WARMUP, f"model.threads={alone_threads()}"])
    if cfg.method != "rrr":
        raise SystemExit(f"preset {args.preset} trains method={cfg.method}; this benchmark needs method=rrr")
    reused = can_reuse_warmup(args.reuse_warmup, root / "warmup", cfg)
    dirs = prepare_dirs(root, ("warmup", "rrr", "control"), keep=("warmup",) if reused else ())

    # 1. base -> warm-up (one process, this one)
    ckpt, t_warmup = warmup_stage(cfg, dirs["warmup"], reuse=reused)

    # 2. RRR and the control side by side, one core each (the RL run trains whatever method the
    # preset names: RRR here; the control continues the preset's warm-up: Countdown traces)
    t_pair = method_and_control(
        args.preset, args.rrr, common, dirs["rrr"], dirs["control"], ckpt, root / "rrr_phase_done"
    )

    dumps = {
        "base": dirs["warmup"] / "eval" / "base.jsonl",
        "warm-up": dirs["warmup"] / "eval" / "warmup.jsonl",
        "RRR": dirs["rrr"] / "eval" / "final.jsonl",
        "control": dirs["control"] / "eval" / "control.jsonl",
    }
    rows = {name: eval_row(path) for name, path in dumps.items()}
    correct = {name: correct_by_query(path) for name, path in dumps.items()}

    def paired(a: str, b: str, which: str) -> dict:
        wins, losses = paired_counts(correct[b][which], correct[a][which])  # a right & b wrong, b right & a wrong
        return {"wins": wins, "losses": losses, "p": sign_test(wins, losses)}

    pairs = {f"{a} vs {b}": {which: paired(a, b, which) for which in ("first", "final")} for a, b in PAIRS}
    rrr_steps = phase_steps(dirs["rrr"], "rrr")
    control_steps = len(phase_steps(dirs["control"], "control"))
    rrr_trends = trends(
        rrr_steps,
        (
            "rrr/first_attempt_acc",
            "rrr/retry_acc",
            "rrr/recovered_rate",
            "rrr/reflection_length/mean",
            "rrr/trained_rows",
        ),
    )
    result = {
        "rows": rows,
        "p_rrr_vs_warmup_first_attempt": pairs["RRR vs warm-up"]["first"]["p"],
        "p_rrr_vs_warmup_final": pairs["RRR vs warm-up"]["final"]["p"],
        "p_rrr_vs_control_first_attempt": pairs["RRR vs control"]["first"]["p"],
        "p_rrr_vs_control_final": pairs["RRR vs control"]["final"]["p"],
        "pairs": pairs,
        "rrr_phase": {
            "steps": len(rrr_steps),
            "wall_s": t_pair,
            "control_steps": control_steps,
            "trained_rows": sum(m.get("rrr/trained_rows", 0) for m in rrr_steps),
            "trends": rrr_trends,
        },
        "wall_s": time.perf_counter() - start,
        "wall_s_warmup_stage": t_warmup,
        "warmup_stage_reused": reused,
        **machine_info(cfg),
        "config": {"preset": args.preset, "common": common, "rrr": args.rrr},
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")

    print(
        f"\nheld-out problems: {args.eval_size}; RRR phase {len(rrr_steps)} steps in {t_pair / 60:.1f} min;"
        f" control: {control_steps} more warm-up steps in the same time; total {result['wall_s'] / 60:.1f} min\n"
    )
    print(f"{'row':<10} " + " ".join(f"{c:>17}" for c in COLS))
    for name, row in rows.items():
        print(f"{name:<10} " + " ".join(f"{fmt(row[c]):>17}" for c in COLS))
    for pair, v in pairs.items():
        for which, w in v.items():
            print(f"{pair:<20} {which:<6} wins {w['wins']:>3}  losses {w['losses']:>3}  sign test p = {w['p']:.4f}")
    for key, v in rrr_trends.items():
        print(f"{key:<28} first third {v['first_third']:.3f} -> last third {v['last_third']:.3f}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
