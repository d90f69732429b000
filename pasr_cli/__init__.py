"""``pasr``: one command line for the recipe, at the top of the import layers.

Each subcommand lives in the module that owns it and exposes ``build_parser(parser)`` and
``run(args) -> int``; this package only wires them together. It imports them directly: it sits
above ``data``, ``recipe`` and ``eval`` (no module below imports it; ``tests/test_import_graph.py``
checks the layers), and ``pasr --help`` stays fast because those modules import torch, verl or
ray inside ``run``, not at import time. ``python -m pasr_cli`` and ``python -m recipe`` run it.
"""

from __future__ import annotations

import argparse
import sys

from data import prepare as data_prepare
from data.atomic_write import DiskFullError, is_disk_full
from data.cli_errors import CliError, why_mkdir_failed  # noqa: F401  (re-exported: every subcommand raises CliError)
from eval import cli as eval_cli
from eval.stats import cli as stats_cli
from recipe import jobs, judge_server, judge_try, plan_check, submit
from recipe.local_engine import cli as train_cli

# a group of actions, each in the module that owns it: action -> (module, one-line help)
JUDGE_ACTIONS = {
    "serve": (
        judge_server,
        "serve an LLM judge with vLLM on GPUs of the Ray cluster, optionally around a training command",
    ),
    "try": (
        judge_try,
        "render the judge prompt for a few rows of a data set and send it to a judge (--dry-run: print it)",
    ),
}

# name -> (module, or a group of actions, one-line help)
SUBCOMMANDS = {
    "data": (data_prepare, "prepare datasets: verl RL parquet, synthetic arithmetic, previews"),
    "train": (train_cli, "train with PASR on this machine (CPU/one GPU, local engine)"),
    "submit": (submit, "submit PASR training to a Ray cluster as a Ray job"),
    "jobs": (jobs, "manage submitted Ray jobs: status, logs, stop"),
    "check": (
        plan_check,
        "check a verl run before GPUs are held: config, data, judge, GPU and batch arithmetic; print the plan",
    ),
    "judge": (
        JUDGE_ACTIONS,
        "an LLM judge: serve it on GPUs of the Ray cluster for a training job; try a judge prompt on a few rows",
    ),
    "eval": (
        eval_cli,
        "evaluate a model on GSM8K / MATH-500 / AIME24 / Countdown: plain, pasr, self-refine, reflect-retry",
    ),
    "stats": (stats_cli, "refine-tag usage statistics and plots from rollout dumps"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pasr",
        description=(
            "PASR: Proactive Self-Refinement. Train a model to refine while it reasons "
            "(<refine> inside <think>), evaluate it, and inspect how it refines."
        ),
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (module, help_text) in SUBCOMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        if isinstance(module, dict):  # a group: pasr judge serve|try
            actions = sp.add_subparsers(dest=f"{name}_command", metavar="ACTION")
            actions.required = True
            for action, (action_module, action_help) in module.items():
                ap = actions.add_parser(action, help=action_help, description=action_help)
                action_module.build_parser(ap)
                ap.set_defaults(_run=action_module.run)
            continue
        module.build_parser(sp)
        sp.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except CliError as exc:
        print(f"pasr {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full disk where no writer named the file (data.atomic_write)
        if not is_disk_full(exc):
            raise
        print(f"pasr {args.command}: error: {DiskFullError(exc.filename)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"pasr {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
