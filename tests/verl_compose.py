"""The verl engine's Hydra config in tests: composed from overrides (``_compose``, the ``config``
fixture) or from the overrides a run script passes to ``recipe.main_pasr`` (``_script_overrides``)."""

from __future__ import annotations

from pathlib import Path

import pytest


def _compose(overrides=()):
    from recipe.verl_engine.config import compose_config

    return compose_config(overrides)


@pytest.fixture(scope="module")
def config():
    return _compose()


def _script_overrides(path: Path) -> list[str]:
    """The Hydra overrides a run script passes to recipe.main_pasr, shell variables filled in
    with stand-ins of the right type."""
    text = path.read_text()
    block = text[text.index("python3 -m recipe.main_pasr") :].splitlines()[1:]
    integer_keys = ("batch_size", "_freq", "n_gpus_per_node", "total_epochs", "parallel_size")
    out = []
    for line in block:
        item = line.strip().rstrip("\\").strip()
        if not item or item.startswith("${JUDGE_ARGS") or item == '"$@"':
            continue
        key, _, value = item.partition("=")
        if value.lstrip('"').startswith("$"):
            if key == "trainer.logger":
                value = '["console"]'
            elif key.endswith(integer_keys):
                value = "8"
            else:
                value = "/x"
        out.append(f"{key}={value}")
    return out
