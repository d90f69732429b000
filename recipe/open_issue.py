"""Placeholder wiring for subcommands whose issue is still open: they say so and exit non-zero."""

from __future__ import annotations

import argparse
import sys


def placeholder(issue: int, what: str):
    def build_parser(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

    def run(args) -> int:
        print(f"pasr: {what} is not available yet (issue #{issue} is open)", file=sys.stderr)
        return 3

    return build_parser, run
