"""Where the recipe keeps what it builds once and reuses: the embedded model converted from its
GGUF (``models/``) and verl checkpoints merged into Hugging Face folders (``verl_merged/``).

``$PASR_CACHE``, else ``~/.cache/pasr``. A module of its own, below both users
(:mod:`runtime.model_loading` and :mod:`runtime.hf_export`), so that neither has to
import the other for it.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    return Path(os.environ.get("PASR_CACHE", Path.home() / ".cache" / "pasr"))
