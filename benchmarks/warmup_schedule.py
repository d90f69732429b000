"""Is the demo's PASR gain its warm-up's learning rate? Constant-rate and decayed warm-ups, seed by seed.

The demo's warm-up holds ``warmup.lr`` (5e-5) to its last step; its RL phase then trains at most
1e-5. Lowering a learning rate at the end of training is by itself known to raise accuracy
(the reason SFT trainers decay it), so a gain measured from a constant-rate warm-up can be the lower
rate's rather than PASR's reward's. ``warmup.lr_schedule=cosine`` runs the same warm-up (same
traces in the same order: ``warmup.seed``) with the rate decayed to zero, which separates the two.

Reads two sets of finished ``benchmarks.demo_seeds`` run directories, ``--constant`` and
``--cosine`` (``seed_S/eval/warmup.jsonl`` and ``final.jsonl`` each, on the same held-out
problems), and prints per seed the four greedy accuracies and three paired sign tests: the
decayed warm-up alone against the constant warm-up (the decay's effect), against the constant
warm-up plus PASR (the demo), and PASR from the decayed warm-up against that warm-up. Writes
``--out`` (JSON).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.demo_seeds import write_result
from benchmarks.learning_signal import correct_by_query
from eval.significance import paired_counts, sign_test

ROWS = (
    ("constant_warmup", "constant", "warmup"),
    ("constant_pasr", "constant", "final"),
    ("cosine_warmup", "cosine", "warmup"),
    ("cosine_pasr", "cosine", "final"),
)
# (label, baseline, challenger): the challenger's wins and losses against the baseline
TESTS = (
    ("decay_vs_constant_warmup", "constant_warmup", "cosine_warmup"),
    ("decay_vs_constant_warmup_plus_pasr", "constant_pasr", "cosine_warmup"),
    ("pasr_from_decayed_warmup", "cosine_warmup", "cosine_pasr"),
)


def seed_comparison(dirs: dict[str, Path], seed: int) -> dict:
    """Accuracies and paired tests of one seed (see the module docstring)."""
    correct = {
        label: correct_by_query(dirs[kind] / f"seed_{seed}" / "eval" / f"{tag}.jsonl") for label, kind, tag in ROWS
    }
    row: dict = {"seed": seed, "n": len(correct["cosine_warmup"])}
    row.update({f"{label}_acc": sum(c.values()) / len(c) for label, c in correct.items()})
    for name, base, challenger in TESTS:
        wins, losses = paired_counts(correct[base], correct[challenger])
        row[name] = {"wins": wins, "losses": losses, "p": sign_test(wins, losses)}
    return row


def table(rows: list[dict]) -> str:
    head = ["seed", *(f"{label} acc" for label, _, _ in ROWS), *(name for name, _, _ in TESTS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [str(r["seed"]), *(f"{r[f'{label}_acc']:.3f}" for label, _, _ in ROWS)]
        cells += [f"{r[n]['wins']} / {r[n]['losses']}, p {r[n]['p']:.2g}" for n, _, _ in TESTS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--constant", required=True, help="demo_seeds runs directory of the constant-rate warm-ups")
    p.add_argument(
        "--cosine", required=True, help="demo_seeds runs directory of the same runs with warmup.lr_schedule=cosine"
    )
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--out", help="JSON result (default: print only)")
    p.add_argument("--note", default="", help="what the runs were (settings, machine, commit), kept in the JSON")
    args = p.parse_args(argv)
    dirs = {"constant": Path(args.constant), "cosine": Path(args.cosine)}
    rows = [seed_comparison(dirs, s) for s in args.seeds]
    print(table(rows))
    if args.out:
        write_result(args.out, {"note": args.note, "runs": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
