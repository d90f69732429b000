"""One install line everywhere (issue 64 item 7): every hint that names the ``gpu`` extra, in
code, scripts and docs, is the line the docs give, ``pip install -e '.[gpu]'`` (the eval error
used to say ``pip install 'pasr-recipe[gpu]'``, a package that is not on PyPI)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SKIP = {".git", "runs", "outputs", "checkpoints", "wandb", "node_modules", "__pycache__", ".venv", "build", "dist"}
INSTALL_LINE = "pip install -e '.[gpu]'"


def _text_files():
    for path in REPO.rglob("*"):
        rel = path.relative_to(REPO)
        parts = rel.parts[:-1]
        if any(p in SKIP or p.startswith(".") or p.endswith(".egg-info") for p in parts) or not path.is_file():
            continue
        if path.suffix in (".py", ".md", ".sh", ".yaml", ".txt") or path.name == "Makefile":
            yield rel, path.read_text(errors="replace")


def test_every_gpu_extra_hint_is_the_docs_install_line():
    odd = []
    for rel, text in _text_files():
        if rel == Path("tests/test_install_hints.py"):
            continue
        for m in re.finditer(r"\[gpu\]", text):
            line = text[text.rfind("\n", 0, m.start()) + 1 : text.find("\n", m.end())]
            if INSTALL_LINE not in line:
                odd.append(f"{rel}: {line.strip()}")
        if "pasr-recipe[" in text:
            odd.append(f"{rel}: names the distribution pasr-recipe[...]")
    assert not odd, "\n".join(odd)


def test_the_vllm_backend_error_names_the_install_line():
    import builtins

    import pytest

    from eval.backends import BackendError, VLLMBackend

    real_import = builtins.__import__

    def no_vllm(name, *args, **kwargs):
        if name == "vllm":
            raise ImportError("no vllm here")
        return real_import(name, *args, **kwargs)

    backend = VLLMBackend.__new__(VLLMBackend)
    backend._vllm = None
    builtins.__import__ = no_vllm
    try:
        with pytest.raises(BackendError, match=re.escape(INSTALL_LINE)):
            backend._import()
    finally:
        builtins.__import__ = real_import
