"""The one-line error of every ``pasr`` subcommand, and the reason a directory cannot be made.

``pasr_cli`` prints a :class:`CliError` as one line and exits with status 2. The class lives
here, in ``data/`` (the lowest layer that has a subcommand, ``pasr data``), so that no module
imports a layer above its own for it (``pasr_cli``, at the top, re-exports both names).
"""

from __future__ import annotations

from pathlib import Path


class CliError(Exception):
    """An expected failure: printed as one line, exit code 2, no stack trace."""


def why_mkdir_failed(path: Path, exc: OSError) -> str:
    """The reason ``path.mkdir(parents=True)`` failed, in words a user can act on: when a
    parent is a regular file, mkdir says "File exists" (about that parent), which reads as if
    the directory itself were the problem."""
    for parent in [*reversed(path.parents), path]:
        if parent.exists() and not parent.is_dir():
            return f"{parent} is a file, not a directory"
    return exc.strerror or str(exc)
