"""One flag vocabulary for every ``pasr`` subcommand, and the hidden aliases of old spellings.

The same concept is spelled the same way in every subcommand (docs/development.md, "CLI flag
vocabulary"): ``--dataset``, ``--out DIR`` (always a folder), ``--progress {auto,on,off}``,
``--difficulty``, ``--judge-base-url`` (the config key ``pasr.judge.base_url``), ... An old
spelling stays accepted for one release as a *hidden alias*: ``help=argparse.SUPPRESS`` (absent
from ``--help`` and the usage line), the canonical flag's ``dest``, and a one-line deprecation
note on stderr when it is used. :func:`add_alias` adds one; :func:`legacy_out_file` is the same
note for an ``--out`` given a file where a folder is now expected.

This module lives in ``data/`` beside :mod:`data.cli_errors` (the lowest layer with a
subcommand), so every subcommand can import it without reaching a layer above its own.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

REMOVED_IN = "the next release"
_NO_VALUE = object()


def deprecation_note(prog: str, old: str, new: str) -> str:
    """The one line printed when an old spelling is used."""
    return f"{prog}: warning: {old} is deprecated and will be removed in {REMOVED_IN}; use {new}"


def warn_deprecated(prog: str, old: str, new: str) -> None:
    print(deprecation_note(prog, old, new), file=sys.stderr, flush=True)


class DeprecatedAlias(argparse.Action):
    """A hidden old spelling of a flag: stores into the canonical flag's ``dest`` (its value as
    given, or ``value`` for an alias that takes none, e.g. ``--no-progress`` = ``--progress off``)
    and prints :func:`deprecation_note`."""

    def __init__(self, option_strings, dest, canonical: str, value=_NO_VALUE, **kwargs):
        if value is not _NO_VALUE:
            kwargs["nargs"] = 0
        kwargs["default"] = argparse.SUPPRESS  # the canonical flag's default stands
        kwargs["help"] = argparse.SUPPRESS
        super().__init__(option_strings, dest, **kwargs)
        self.canonical = canonical
        self.value = value

    @property
    def replacement(self) -> str:
        """What to type instead: the canonical flag, with the value an argument-less alias means."""
        return self.canonical if self.value is _NO_VALUE else f"{self.canonical} {self.value}"

    def __call__(self, parser, namespace, values, option_string=None):
        warn_deprecated(parser.prog, option_string or self.option_strings[0], self.replacement)
        setattr(namespace, self.dest, values if self.value is _NO_VALUE else self.value)


def add_alias(container, old: str, canonical: argparse.Action, value=_NO_VALUE) -> argparse.Action:
    """Add ``old`` as a hidden alias of the ``canonical`` action (what ``add_argument`` returned)
    to ``container`` (the parser or argument group holding it). Without ``value`` the alias takes
    the canonical flag's arguments (same ``nargs``, ``type``, ``choices``); with one it takes none
    and stores ``value``."""
    kwargs = {}
    if value is _NO_VALUE:
        kwargs.update(nargs=canonical.nargs, type=canonical.type, choices=canonical.choices, metavar=canonical.metavar)
    return container.add_argument(
        old,
        action=DeprecatedAlias,
        dest=canonical.dest,
        canonical=canonical.option_strings[0],
        value=value,
        **kwargs,
    )


def legacy_out_file(prog: str, out: str, suffixes: Sequence[str], writes: str) -> bool:
    """Whether ``--out`` names a file in the old way (a path ending in one of ``suffixes`` that is
    not an existing directory), printing the deprecation note if so; ``writes`` says what the
    folder form writes into the folder. ``--out`` is a folder in every subcommand; the file form
    keeps working for one release."""
    path = Path(out).expanduser()
    if path.suffix.lower() not in suffixes or path.is_dir():
        return False
    warn_deprecated(prog, f"--out with a file ({out})", f"--out DIR (a folder; it gets {writes})")
    return True
