"""Does PASR teach the embedded default something? Base, warm-up, PASR and a control, paired.

1. ``pasr train`` (demo preset unless overridden): evaluate the base model, warm up, evaluate
   the warm-up checkpoint, run the PASR phase, evaluate the final policy.
2. Control: from the warm-up checkpoint (weights and optimizer), continue the *supervised*
   warm-up for the same wall time the PASR phase took, then evaluate. If PASR beats this, the
   gain is not just "more training".
3. Print one table (format pass, accuracy, refine rate, empty-refine rate, refine-fix rate,
   mean response tokens) and paired sign tests on per-question correctness (PASR vs warm-up,
   PASR vs control), plus the refine-fix and empty-refine trends over the PASR phase.

All evaluations use the same held-out synthetic problems (``data.eval_size``, 300 by default),
greedy decoding and the refine prompt. May take up to an hour on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from statistics import fmean

from eval.significance import paired_counts, sign_test

COLS = [("eval/format_pass_rate", "format"), ("eval/acc", "acc"), ("eval/refine_rate", "refine"),
        ("eval/empty_refine_rate", "empty-refine"), ("eval/refine_fix_rate", "refine-fix"), ("eval/response_length/mean", "tokens")]


def _correct(path: Path) -> dict[str, bool]:
    out = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        out[r["query_id"]] = r["acc"] is not None and r["acc"] >= 1.0
    return out


def run_control(cfg, run_dir: Path, warmup_ckpt: Path, budget_s: float):
    """Continue the warm-up's supervised training for ``budget_s`` seconds, then evaluate."""
    from recipe.local_engine import checkpoint as ckpt
    from recipe.local_engine.trainer import LocalPasrTrainer

    cfg.model.path = str(warmup_ckpt)
    cfg.trainer.eval_at_start = False
    trainer = LocalPasrTrainer(cfg, run_dir)
    trainer.setup()
    trainer.evals = {}
    trainer.optimizer = trainer._make_optimizer("warmup")
    ckpt.load_trainer_state(warmup_ckpt, trainer.optimizer)
    step, start = cfg.warmup.steps, time.perf_counter()
    while time.perf_counter() - start < budget_s:
        step += 1
        trainer._log(step, "control", trainer.warmup_step(step))
    trainer.step = step
    trainer._evaluate("control")
    return trainer.evals["control"], step - cfg.warmup.steps


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", default="runs/bench-learning-signal")
    parser.add_argument("--preset", default="demo")
    parser.add_argument("--eval-size", type=int, default=300)
    parser.add_argument("overrides", nargs="*", help="extra key=value config overrides for both runs")
    args = parser.parse_args(argv)

    from recipe.local_engine.config import load_config
    from recipe.local_engine.trainer import LocalPasrTrainer, prepare_run_dir

    overrides = [f"data.eval_size={args.eval_size}", "trainer.eval_at_start=true", "trainer.eval_after_warmup=true",
                 "trainer.eval_at_end=true", *args.overrides]
    cfg = load_config(preset=args.preset, overrides=overrides)
    root = Path(args.run_dir)
    pasr_dir, control_dir = root / "pasr", root / "control"
    prepare_run_dir(pasr_dir, resume=False)
    prepare_run_dir(control_dir, resume=False)

    trainer = LocalPasrTrainer(cfg, pasr_dir)
    trainer.setup()
    evals = trainer.fit()
    metrics = [json.loads(x) for x in (pasr_dir / "metrics.jsonl").read_text().splitlines()]
    pasr_steps = [m for m in metrics if m["phase"] == "pasr"]
    pasr_wall = sum(m["timing_s/step"] for m in pasr_steps)

    control, control_steps = run_control(load_config(preset=args.preset, overrides=overrides), control_dir,
                                         pasr_dir / "checkpoints" / f"step_{cfg.warmup.steps:06d}", pasr_wall)
    rows = {"base": evals["base"], "warm-up": evals["warmup"], "PASR": evals["final"], "control": control}

    print(f"\nheld-out synthetic problems: {args.eval_size}; PASR phase {len(pasr_steps)} steps, {pasr_wall / 60:.1f} min;"
          f" control: {control_steps} more warm-up steps in the same time\n")
    print(f"{'checkpoint':<10} " + " ".join(f"{c:>13}" for _, c in COLS))
    for name, m in rows.items():
        print(f"{name:<10} " + " ".join(f"{m[k]:>13.3f}" for k, _ in COLS))

    final = _correct(pasr_dir / "eval" / "final.jsonl")
    for name, path in (("warm-up", pasr_dir / "eval" / "warmup.jsonl"), ("control", control_dir / "eval" / "control.jsonl")):
        wins, losses = paired_counts(_correct(path), final)
        print(f"PASR vs {name:<8}: PASR right/other wrong {wins}, other right/PASR wrong {losses}, sign test p = {sign_test(wins, losses):.4f}")

    third = max(1, len(pasr_steps) // 3)
    for key in ("pasr/refine_fix_rate", "pasr/empty_refine_rate", "pasr/refine_rate", "pasr/acc_refine"):
        first, last = fmean(m[key] for m in pasr_steps[:third]), fmean(m[key] for m in pasr_steps[-third:])
        print(f"{key:<24} first third {first:.3f} -> last third {last:.3f}")
    split = {k: fmean(m[f"timing_s/{k}"] for m in pasr_steps) for k in ("gen", "reward", "update")}
    total = sum(split.values())
    print("mean PASR step: " + ", ".join(f"{k} {v:.1f} s ({v / total:.1%})" for k, v in split.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
