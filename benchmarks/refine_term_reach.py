"""How often PASR's refine term reaches GRPO's advantages (issue 61), side by side.

Two uses:

* ``python -m benchmarks.refine_term_reach``: random groups (``--groups``, ``--group-size``
  rollouts, the same number of plain rollouts) under the paper's reward (sign, tie -0.5) and the
  ``cpu`` preset's (margin, tie 0): every rollout refining with a 0/1 judge, 10% not refining, and
  a graded judge; the share of groups whose advantages the term changes by more than 1e-4.
* ``python -m benchmarks.refine_term_reach --run RUN_DIR [--reward paper|cpu|run]``: the same
  per step of a finished run, rebuilt from its rollout dumps (``rollouts/step_*.jsonl``, either
  engine), under the run's own reward (``run``: the reward recorded in each record) or another.

Writes ``--out`` (JSON) when given. The measure is :func:`recipe.refine_term.refine_term_effect`,
the one both engines log as ``pasr/refine_term/*``.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

from data.records import PLAIN, REFINE, RolloutRecord, iter_records
from recipe.pasr_config import load_pasr_config
from recipe.refine_term import refine_term_effect
from recipe.scoring import group_scores

REWARDS = {
    "paper": {},  # sign, tie -0.5, empty refines paid as any refine
    "cpu": {"refine_compare": "margin", "tie_value": 0.0},
}
REFINED = "<think>17+4=20<refine>no: 17+4=21</refine></think><answer>21</answer>"
UNREFINED = "<think>17+4=21</think><answer>21</answer>"


def record(query: str, variant: str, text: str, acc: float) -> RolloutRecord:
    from rewards.format import check_format

    fmt = check_format(text)
    return RolloutRecord(
        run_id="bench",
        query_id=query,
        data_source="synthetic",
        variant=variant,
        prompt="q",
        response=text,
        response_tokens=1,
        format_ok=fmt.ok,
        format_reason=fmt.reason,
        n_refine=fmt.n_refine,
        extracted_answer="21",
        gold="21",
        acc=acc,
        extra={"format_reward": fmt.reward},
    )


def random_groups(n: int, size: int, *, no_refine: float, graded: bool, seed: int) -> list[RolloutRecord]:
    """``n`` query groups of ``size`` refine and ``size`` plain rollouts with random accuracies."""
    rng = random.Random(seed)
    records = []
    for q in range(n):
        p = rng.random()  # the query's difficulty

        def acc(p: float = p) -> float:
            return min(1.0, max(0.0, rng.gauss(p, 0.25))) if graded else float(rng.random() < p)

        for _ in range(size):
            text = UNREFINED if rng.random() < no_refine else REFINED
            records.append(record(f"q{q}", REFINE, text, acc()))
        records += [record(f"q{q}", PLAIN, "plain", acc()) for _ in range(size)]
    return records


def effect(records, reward: dict, size: int, norm_adv_by_std: bool = True) -> dict:
    cfg = load_pasr_config({"n_refine": size, "n_plain": size, **reward})
    scores, mask = group_scores(records, cfg)
    e = refine_term_effect(records, scores, mask, cfg.weights.refine, norm_adv_by_std=norm_adv_by_std)
    return {
        "groups": e.groups,
        "live_groups": e.live_groups,
        "live_share": round(e.live_share, 4),
        "mixed_share": round(e.mixed_share, 4),
        "adv_change": round(e.adv_change, 4),
    }


def synthetic_table(groups: int, size: int, seed: int) -> list[dict]:
    rows = []
    cases = (
        ("0/1 judge, every rollout refines", 0.0, False),
        ("0/1 judge, 10% do not refine", 0.1, False),
        ("graded judge, every rollout refines", 0.0, True),
    )
    for name, no_refine, graded in cases:
        records = random_groups(groups, size, no_refine=no_refine, graded=graded, seed=seed)
        for reward in REWARDS:
            rows.append({"case": name, "reward": reward, **effect(records, REWARDS[reward], size)})
    return rows


def run_steps(run_dir: Path, reward: str) -> list[dict]:
    """Per step of a run: the term's reach, rebuilt from its rollout dumps."""
    files = sorted((run_dir / "rollouts").glob("step_*.jsonl"))
    if not files:
        raise SystemExit(f"refine_term_reach: no rollouts/step_*.jsonl under {run_dir}")
    out = []
    for f in files:
        records = [r for r in iter_records(f) if r.variant in (REFINE, PLAIN)]
        if not any(r.variant == REFINE for r in records):
            continue
        size = max(1, sum(r.variant == REFINE for r in records) // len({r.query_id for r in records}))
        if reward == "run":  # the reward the run paid: weights from its config are not in the records
            scores = [r.total_reward if r.total_reward is not None else 0.0 for r in records]
            mask = [r.variant == REFINE and r.total_reward is not None for r in records]
            e = refine_term_effect(records, scores, mask, 1.0)
            row = {"groups": e.groups, "live_share": round(e.live_share, 4), "mixed_share": round(e.mixed_share, 4)}
            row["adv_change"] = round(e.adv_change, 4)
        else:
            row = effect(records, REWARDS[reward], size)
        refine = [r for r in records if r.variant == REFINE]
        row["refine_rate"] = round(sum(r.n_refine > 0 for r in refine) / len(refine), 4)
        out.append({"step": int(f.stem.split("_")[1]), **row})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=2000, help="random groups per case (default 2000)")
    ap.add_argument("--group-size", type=int, default=8, help="refine (and plain) rollouts a group (default 8)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--run", type=Path, help="a run directory: its steps' reach from rollouts/step_*.jsonl")
    ap.add_argument("--reward", choices=[*REWARDS, "run"], default="run", help="with --run: the reward to form")
    ap.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = ap.parse_args(argv)
    if args.run:
        rows = run_steps(args.run, args.reward)
        print(f"{'step':>5} {'groups':>6} {'live':>6} {'mixed':>6} {'adv_change':>10} {'refine_rate':>11}")
        for r in rows:
            print(
                f"{r['step']:>5} {r['groups']:>6} {r['live_share']:>6.3f} {r['mixed_share']:>6.3f} "
                f"{r['adv_change']:>10.4f} {r['refine_rate']:>11.3f}"
            )
        live = sum(r["live_share"] * r["groups"] for r in rows)
        total = sum(r["groups"] for r in rows)
        print(f"all steps: {live:.0f} of {total} groups live ({live / total if total else 0:.1%})")
        result = {"run": str(args.run), "reward": args.reward, "steps": rows}
    else:
        rows = synthetic_table(args.groups, args.group_size, args.seed)
        print(f"{args.groups} random groups of {args.group_size} refine + {args.group_size} plain rollouts")
        print(f"{'case':<38} {'reward':<6} {'live':>7} {'mixed':>7} {'adv_change':>10}")
        for r in rows:
            shares = f"{r['live_share']:>7.1%} {r['mixed_share']:>7.1%}"
            print(f"{r['case']:<38} {r['reward']:<6} {shares} {r['adv_change']:>10.4f}")
        result = {"groups": args.groups, "group_size": args.group_size, "seed": args.seed, "rows": rows}
    if args.out:
        from benchmarks.training_stages import cpu_model

        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        result = {"commit": commit or None, "device": cpu_model(), **result}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
