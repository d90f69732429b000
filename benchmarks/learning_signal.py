"""Does PASR teach the embedded default something? Base, warm-up, PASR and a control, paired.

1. Warm-up run: evaluate the base model, run the supervised warm-up (refine- and plain-prompt
   traces), evaluate the warm-up checkpoint (refine prompt and plain prompt).
2. From that checkpoint, at the same time on the two cores (one torch thread each):
   * **PASR** with the recipe's default reward (``--pasr`` overrides);
   * **control**: the supervised warm-up continued (its optimizer state too) until the PASR
     phase ends, so both get the same wall time on the same machine under the same load. If
     PASR beats this, the gain is not just "more training". With ``warmup.lr_schedule=cosine``
     (an override for every run) the warm-up ends at rate zero and the control stays there, so it
     is the warm-up itself, and PASR's row against it is free of what a constant warm-up rate
     leaves for a lower RL rate to settle (docs/results/demo.md).
3. **PASR, paper-exact reward** (``--paper`` overrides: tie -0.5, float-equality ties, empty
   refines credited like any refine) from the same checkpoint, alone (both cores).
4. Every policy is evaluated greedily on the same held-out problems with the refine prompt.
   Paired two-sided sign tests on per-question correctness; one table on stdout and
   ``benchmarks/results/learning_signal.json``.

Took 51 minutes on a 2-core AVX2-only x86 in fp32, timed whole (warm-up stage 24 min with its two
evaluations, the PASR / control pair 15, the paper row 12): the default RL phase is 10 steps, which
held what 20 and 30 steps did (docs/results/learning_signal.md; three trajectories in results/pasr_steps_seeds.json).
With 30 steps it took 94 minutes, 137 before the local engine generated with grouped-query attention, ran
the warm-up's loss without padding and prefilled shared prompt prefixes once
(benchmarks/local_eval_speed, warmup_speed, prompt_prefill_speed). The control's greedy answers tip
between refining and not as its steps go (refining at step 330, not at 223 nor 352), so the PASR /
control comparison depends on where its step count lands. Stages alone on the machine pin every core
(:func:`~benchmarks.training_stages.alone_threads`).
A CPU with bf16 matmuls is faster.

On one GPU (``model.device=auto`` takes it) the benchmark with 30 PASR steps took about 6 minutes
(an H200, three seeds at once: ``trainer.seed=N``, which changes the RL phase's sampling, not the
warm-up). There the control is not the CPU's: supervised steps are cheap beside generation on a GPU,
so in the PASR phase's wall time it ran about 500 steps where the CPU's ran 170-192.
``--report-only`` rebuilds the table and JSON from a run directory brought back from such a machine
(``machine.json`` in the run directory says where it ran).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from statistics import fmean

from benchmarks.training_stages import (
    EVAL_AT_WARMUP,
    alone_threads,
    can_reuse_warmup,
    fmt,
    join,
    load,
    machine_info,
    method_and_control,
    phase_steps,
    prepare_dirs,
    run_method,
    spawn,
    trends,
    warmup_stage,
    warmup_stage_wall_s,
)
from eval.significance import paired_counts, sign_test

# The recipe's default PASR setup for the embedded model (no overrides: the cpu preset's reward,
# tie 0, margin, restating refines count as no refine; lr 1e-5 ramped over 10 steps), and the
# paper's reward. Both start from the same warm-up checkpoint and differ only in these keys.
PASR_DEFAULT: list[str] = []
PAPER_EXACT = ["pasr.tie_value=-0.5", "pasr.zeta=0.0", "pasr.empty_refine_value=null", "pasr.refine_compare=sign"]
ROWS = ("base", "warm-up", "PASR", "PASR (paper reward)", "control")
COLS = ("format", "acc", "refine_rate", "empty_refine_rate", "refine_fix_rate", "tokens", "n")
PAIR_FILE = "pair.json"  # the PASR / control pair's wall time, written when the pair ends
MACHINE = "machine.json"  # where a run was trained and evaluated (machine_info), written when it starts


def eval_row(path: Path) -> dict:
    """The table row of one evaluation dump (refine-prompt records; plain ones when present).

    Rates with no defined denominator (no refine span at all) are None, not 0: "no refine was
    empty" and "there was no refine" are different findings.
    """
    from data.records import PLAIN, REFINE, iter_records
    from recipe.metrics import refine_quality_rates
    from rewards.refine_quality import is_correct

    records = list(iter_records(path))
    refine = [r for r in records if r.variant == REFINE]
    plain = [r for r in records if r.variant == PLAIN]
    rates = refine_quality_rates(refine)
    row = {
        "format": fmean(r.format_ok for r in refine),
        "acc": fmean(is_correct(r.acc) for r in refine),
        "refine_rate": fmean(r.n_refine > 0 for r in refine),
        "empty_refine_rate": rates.empty,
        "refine_fix_rate": rates.fix,
        "refine_break_rate": rates.breaks,
        "draft_acc": rates.draft,  # is the first attempt holding up?
        "tokens": fmean(r.response_tokens for r in refine),
        "n": len(refine),
    }
    if plain:
        row["plain_format"] = fmean(r.format_ok for r in plain)
        row["plain_acc"] = fmean(is_correct(r.acc) for r in plain)
    return row


def correct_by_query(path: Path) -> dict[str, bool]:
    from data.records import REFINE, iter_records
    from rewards.refine_quality import is_correct

    return {r.query_id: is_correct(r.acc) for r in iter_records(path) if r.variant == REFINE}


def pair_done(root: Path, pair_file: Path) -> bool:
    """Whether ``root`` holds a finished PASR / control pair: both evaluated, its wall time kept."""
    done = all(
        p.exists()
        for p in (pair_file, root / "pasr" / "eval" / "final.jsonl", root / "control" / "eval" / "control.jsonl")
    )
    if not done:
        print(f"no finished PASR / control pair in {root}: running it")
    return done


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    method = argparse.ArgumentParser(add_help=False)
    method.add_argument("--method", choices=("pasr", "rrr"), default="pasr")
    picked, rest = method.parse_known_args(argv)
    if picked.method == "rrr":  # Reflect, Retry, Reward has its own rows and columns
        from benchmarks.learning_signal_rrr import main as rrr_main

        return rrr_main(rest)

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--method",
        choices=("pasr", "rrr"),
        default="pasr",
        help="pasr (this script) or rrr (benchmarks/learning_signal_rrr.py, its own options)",
    )
    parser.add_argument("--run-dir", default="runs/bench-learning-signal")
    parser.add_argument("--preset", default="default", help="local engine preset for every run (default: default)")
    parser.add_argument("--eval-size", type=int, default=300, help="held-out problems, paired across rows")
    parser.add_argument("--pasr", nargs="*", default=PASR_DEFAULT, help="overrides of the default PASR row")
    parser.add_argument("--paper", nargs="*", default=PAPER_EXACT, help="overrides of the paper-exact PASR row")
    parser.add_argument("--out", default="benchmarks/results/learning_signal.json")
    parser.add_argument(
        "--reuse-warmup",
        action="store_true",
        help="keep the finished stage 1 (base eval, warm-up, warm-up eval) of an earlier run in "
        "--run-dir and rerun only what follows it",
    )
    parser.add_argument(
        "--reuse-pair",
        action="store_true",
        help="with --reuse-warmup: also keep the finished PASR / control pair (both evaluated, "
        "its wall time in pair.json) and rerun only the paper-exact row",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="train nothing: rebuild the table and --out from the finished run in --run-dir (e.g. "
        "one brought back from a GPU machine, where the device returns files, not results)",
    )
    parser.add_argument("overrides", nargs="*", help="key=value overrides for every run")
    args = parser.parse_args(argv)
    if args.reuse_pair and not args.reuse_warmup:
        parser.error("--reuse-pair keeps a pair trained from a kept warm-up: add --reuse-warmup")

    start = time.perf_counter()
    common = [f"data.eval_size={args.eval_size}", *args.overrides]
    root = Path(args.run_dir)
    cfg = load(args.preset, [*common, *EVAL_AT_WARMUP, f"model.threads={alone_threads()}"])
    config = {"preset": args.preset, "common": common, "pasr": args.pasr, "paper": args.paper}
    if args.report_only:
        timing = {"wall_s": None, "wall_s_warmup_stage": warmup_stage_wall_s(root / "warmup")}
        write_report(summarize(root, timing, config), Path(args.out))
        return 0
    reused = can_reuse_warmup(args.reuse_warmup, root / "warmup", cfg)
    pair_file = root / PAIR_FILE
    pair_reused = reused and args.reuse_pair and pair_done(root, pair_file)
    keep = ("warmup", "pasr", "control") if pair_reused else ("warmup",) if reused else ()
    dirs = prepare_dirs(root, ("warmup", "pasr", "paper", "control"), keep=keep)
    (root / MACHINE).write_text(json.dumps(machine_info(cfg)) + "\n")

    # 1. base -> warm-up (one process, this one)
    ckpt, t_warmup = warmup_stage(cfg, dirs["warmup"], reuse=reused)

    # 2. PASR and the control side by side, one core each
    if pair_reused:
        print(f"reusing the PASR / control pair in {root}")  # its wall time stays in pair.json
    else:
        pair_file.unlink(missing_ok=True)
        t_pair = method_and_control(
            args.preset, args.pasr, common, dirs["pasr"], dirs["control"], ckpt, root / "pasr_phase_done"
        )
        pair_file.write_text(json.dumps({"wall_s": t_pair}) + "\n")

    # 3. the paper-exact reward, alone
    join(spawn(run_method, args.preset, [*common, *args.paper], str(dirs["paper"]), ckpt, None, alone_threads()))

    timing = {
        "wall_s": time.perf_counter() - start,
        "wall_s_warmup_stage": t_warmup,
        "warmup_stage_reused": reused,
        "pair_reused": pair_reused,
    }
    result = summarize(root, timing, config)
    write_report(result, Path(args.out))
    return 0


def summarize(root: Path, timing: dict, config: dict) -> dict:
    """The benchmark's result from the finished run directory ``root``: rows, paired sign
    tests, the PASR phase's trends, and where it ran (``--report-only`` rebuilds it from a
    directory brought back from another machine, e.g. a GPU's)."""
    dirs = {name: root / name for name in ("warmup", "pasr", "paper", "control")}
    dumps = {
        "base": dirs["warmup"] / "eval" / "base.jsonl",
        "warm-up": dirs["warmup"] / "eval" / "warmup.jsonl",
        "PASR": dirs["pasr"] / "eval" / "final.jsonl",
        "PASR (paper reward)": dirs["paper"] / "eval" / "final.jsonl",
        "control": dirs["control"] / "eval" / "control.jsonl",
    }
    rows = {name: eval_row(path) for name, path in dumps.items()}
    correct = {name: correct_by_query(path) for name, path in dumps.items()}

    def p_value(a: str, b: str) -> dict:
        wins, losses = paired_counts(correct[b], correct[a])  # a right & b wrong, b right & a wrong
        return {"wins": wins, "losses": losses, "p": sign_test(wins, losses)}

    pasr_steps = phase_steps(dirs["pasr"], "pasr")
    control_steps = len(phase_steps(dirs["control"], "control"))
    pasr_trends = trends(
        pasr_steps,
        ("pasr/refine_rate", "pasr/acc_refine", "pasr/acc_plain", "pasr/refine_fix_rate", "pasr/empty_refine_rate"),
    )
    t_pair = json.loads((root / PAIR_FILE).read_text())["wall_s"]
    return {
        "rows": rows,
        "p_pasr_vs_warmup": p_value("PASR", "warm-up")["p"],
        "p_pasr_vs_control": p_value("PASR", "control")["p"],
        "p_paper_vs_warmup": p_value("PASR (paper reward)", "warm-up")["p"],
        "pairs": {
            f"{a} vs {b}": p_value(a, b)
            for a, b in (
                ("PASR", "warm-up"),
                ("PASR", "control"),
                ("PASR (paper reward)", "warm-up"),
                ("PASR", "PASR (paper reward)"),
            )
        },
        "pasr_phase": {
            "steps": len(pasr_steps),
            "wall_s": t_pair,
            "control_steps": control_steps,
            "trends": pasr_trends,
        },
        **timing,
        # where it ran (None: a run from before the machine was recorded)
        **(json.loads((root / MACHINE).read_text()) if (root / MACHINE).exists() else {"cpu": None, "gpu": None}),
        "config": config,
    }


def write_report(result: dict, out: Path) -> None:
    """``result`` as JSON at ``out`` and as a table on stdout."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    rows, phase = result["rows"], result["pasr_phase"]
    wall = f"total {result['wall_s'] / 60:.1f} min" if result.get("wall_s") is not None else "total not timed"
    print(
        f"\nheld-out problems: {rows['PASR']['n']}; "
        f"PASR phase {phase['steps']} steps in {phase['wall_s'] / 60:.1f} min;"
        f" control: {phase['control_steps']} more warm-up steps in the same time; {wall}\n"
    )
    print(f"{'row':<20} " + " ".join(f"{c:>17}" for c in COLS) + f" {'plain acc':>10}")
    for name, row in rows.items():
        print(f"{name:<20} " + " ".join(f"{fmt(row[c]):>17}" for c in COLS) + f" {fmt(row.get('plain_acc')):>10}")
    for pair, v in result["pairs"].items():
        print(f"{pair:<36} wins {v['wins']:>3}  losses {v['losses']:>3}  sign test p = {v['p']:.4f}")
    for key, v in phase["trends"].items():
        print(f"{key:<26} first third {v['first_third']:.3f} -> last third {v['last_third']:.3f}")
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
