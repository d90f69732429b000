"""Writes that leave a file whole, and a full disk said in one line.

A run stopped mid-write (a kill, a full disk) must not leave a torn JSONL line or half a file
that a resume or ``pasr stats`` then reads as valid. Two shapes of write:

* :func:`replacing` — a whole file, written beside it (``NAME.tmp``) and renamed over it: a
  failed write removes the temporary file and leaves the old file as it was;
* :func:`appending` — lines added to a log (``metrics.jsonl``, ``samples.jsonl``): a failed
  append cuts the file back to its length before it. This assumes one writer, which the run
  directory's lock (:mod:`recipe.run_lock`) ensures.

A full disk in either (or in :func:`naming_full_disk` around a write of one's own) raises
:class:`DiskFullError`: a :class:`~data.cli_errors.CliError` naming the file, so every ``pasr``
command prints one line instead of a traceback.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from data.cli_errors import CliError

_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
# Libraries that write from C++ or Rust lose errno: torch.save reports a short write as
# "[enforce fail at inline_container.cc:...] unexpected pos N vs M", safetensors quotes Rust's
# io error ("No space left on device (os error 28)").
_FULL_MESSAGES = ("unexpected pos", "No space left on device", "os error 28", "Disk quota exceeded", "os error 122")


class DiskFullError(CliError):
    """No space left (or a quota reached) while writing ``path``."""

    def __init__(self, path: str | Path | None):
        super().__init__("no space left on device" + (f" writing {path}" if path else ""))
        self.path = path


def is_disk_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return exc.errno in _FULL_ERRNOS
    return isinstance(exc, Exception) and any(m in str(exc) for m in _FULL_MESSAGES)


@contextlib.contextmanager
def naming_full_disk(path: str | Path) -> Iterator[None]:
    """Turn a full disk inside the block into :class:`DiskFullError` naming ``path``."""
    try:
        yield
    except DiskFullError:
        raise
    except Exception as exc:
        if not is_disk_full(exc):
            raise
        raise DiskFullError(path) from None


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[IO[str]]:
    """A text file to write ``path`` anew: renamed over it when the block ends, removed (and
    ``path`` untouched) when the block or the write fails. Parent folders are made."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with naming_full_disk(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            with tmp.open("w", encoding="utf-8") as fh:
                yield fh
            os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def replace_text(path: str | Path, text: str) -> None:
    """``path`` holds ``text`` afterwards, or what it held before (:func:`replacing`)."""
    with replacing(path) as fh:
        fh.write(text)


@contextlib.contextmanager
def appending(path: str | Path) -> Iterator[IO[str]]:
    """A text file to append to ``path``: all that the block writes, or (when it fails) none of
    it. Parent folders are made."""
    path = Path(path)
    with naming_full_disk(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = path.open("a", encoding="utf-8")
        start = os.fstat(fh.fileno()).st_size
        try:
            yield fh
            fh.close()
        except BaseException:
            with contextlib.suppress(OSError):
                fh.close()  # flushing what is buffered may fail again: it is cut off next
            os.truncate(path, start)
            raise
