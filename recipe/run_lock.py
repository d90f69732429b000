"""One process at a time in a run directory: ``pasr train``'s run directory, ``pasr eval``'s ``--out``.

Both append to files there (metrics, rollouts, samples) and rename temporary files into place,
so two processes in one directory write every step or sample twice, or remove each other's
half-written checkpoint. The lock is an ``flock`` on ``.lock`` in the directory: the kernel
drops it with its process, so a killed run leaves no stale lock and nothing to clean up. The
file holds the holder's pid and command, for the refusal; it is never deleted (deleting it would
let a third process lock a new file while the second still holds the old one).
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

LOCK_FILE = ".lock"


class DirectoryInUse(Exception):
    """Another process holds the directory; the message names the directory and the holder."""

    def __init__(self, path: Path, holder: str):
        super().__init__(f"{path} is in use by another {holder}")
        self.path = path


class RunLock:
    """``acquire`` holds ``path`` for this process until ``release`` (or exit); ``owner`` (the
    command, e.g. ``pasr train``) is what a refused process is told holds it."""

    def __init__(self, path: str | Path, owner: str):
        self.path = Path(path)
        self.owner = owner
        self._fd: int | None = None

    def acquire(self) -> None:
        """The directory must exist. Raises :class:`DirectoryInUse` when another process holds it."""
        fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            pid, _, owner = os.read(fd, 200).decode("utf-8", "replace").strip().partition(" ")
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                raise
            raise DirectoryInUse(self.path, (owner or "run") + (f" (pid {pid})" if pid else "")) from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()} {self.owner}\n".encode())
        except OSError:  # a full disk: the lock holds all the same, only the refusal lacks the pid
            pass
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the flock; the file stays (see the module docstring)
            self._fd = None
