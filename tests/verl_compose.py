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


def _script_overrides(path: Path, env: dict[str, str] | None = None) -> list[str]:
    """The Hydra overrides a run script passes to recipe.main_pasr: the script run (its check
    skipped, NO_CHECK=1) with ``python3`` stubbed to record its arguments, the data files,
    checkpoint folder and model given as ``/x`` (no data preparation) and the node's GPUs as 8,
    unless ``env`` says otherwise."""
    import os
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "calls"
        stub = Path(tmp) / "python3"
        stub.write_text(f'#!/bin/sh\nprintf "%s\\037" "$@" >> {log}\necho >> {log}\n')
        stub.chmod(0o755)
        full = {
            **{k: v for k, v in os.environ.items() if k not in ("DRY_RUN", "WANDB_API_KEY", "SETUP")},
            "PATH": f"{tmp}:{os.environ['PATH']}",
            "NO_CHECK": "1",
            "MODEL_PATH": "/x",
            "EXP_NAME": "x",
            "TRAIN_FILE": "/x",
            "VAL_FILE": "/x",
            "CKPT_DIR": "/x",
            "DATA_DIR": str(Path(tmp) / "data"),
            "NODE_GPUS": "8",
            **(env or {}),
        }
        proc = subprocess.run(["bash", str(path)], env=full, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        calls = [line.split("\037")[:-1] for line in log.read_text().splitlines() if line]
    train = [c for c in calls if "recipe.main_pasr" in c]
    assert len(train) == 1, calls
    return train[0][train[0].index("recipe.main_pasr") + 1 :]
