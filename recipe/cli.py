"""``pasr``: one command line for the recipe.

Each subcommand lives in the module that owns it and exposes ``build_parser(parser)`` and
``run(args) -> int``; this file only wires them together, so ``pasr --help`` stays fast
(modules import torch, verl or ray inside ``run``, not at import time).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from data.atomic_write import DiskFullError, is_disk_full
from data.cli_errors import CliError, why_mkdir_failed  # noqa: F401  (re-exported: every subcommand raises CliError)

# name -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "data": ("data.prepare", "prepare datasets: verl RL parquet, synthetic arithmetic, previews"),
    "train": ("recipe.local_engine.cli", "train with PASR on this machine (CPU/one GPU, local engine)"),
    "submit": ("recipe.submit", "submit PASR training to a Ray cluster as a Ray job"),
    "jobs": ("recipe.jobs", "manage submitted Ray jobs: status, logs, stop"),
    "eval": ("eval.cli", "evaluate a model on GSM8K / MATH-500 / AIME24 / Countdown: plain, pasr, self-refine, reflect-retry"),
    "stats": ("eval.stats.cli", "refine-tag usage statistics and plots from rollout dumps"),
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
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        module = importlib.import_module(module_name)
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
