"""Where the recipe keeps what it builds once and reuses: the embedded model converted from its
GGUF (``models/``) and verl checkpoints merged into Hugging Face folders (``verl_merged/``).

``$PASR_CACHE``, else ``~/.cache/pasr``. A module of its own, below both users
(:mod:`runtime.model_loading` and :mod:`runtime.hf_export`), so that neither has to
import the other for it.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "PASR_CACHE"


class CacheDirError(OSError):
    """The cache folder cannot be made or written; the message is one line naming the folder
    and the environment variable that moves it."""


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "pasr")


def cache_subdir(name: str) -> Path:
    """``cache_root() / name``, made if missing; a :class:`CacheDirError` when it cannot be made
    or written (``HOME`` read-only or not a folder, a ``PASR_CACHE`` on a read-only disk), which
    otherwise surfaced as a traceback from deep inside the model conversion."""
    from data.cli_errors import why_mkdir_failed

    path = cache_root() / name
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CacheDirError(_cannot(path, why_mkdir_failed(path, exc))) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise CacheDirError(_cannot(path, "not writable"))
    return path


def _cannot(path: Path, why: str) -> str:
    where = (
        f"{CACHE_ENV}={os.environ[CACHE_ENV]}"
        if os.environ.get(CACHE_ENV)
        else f"{CACHE_ENV} unset, so under HOME={Path.home()}"
    )
    return f"cannot write the pasr cache folder {path} ({why}; {where}): set {CACHE_ENV} to a writable folder"
