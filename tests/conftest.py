"""Shared fixtures. The benchmark data sets live in ../shared/data beside the checkout (read-only,
never copied into the repo); tests that need them skip with a clear reason when absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("PASR_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED_DATA / "gsm8k_test.jsonl").is_file():
        pytest.skip(f"shared data sets not found at {SHARED_DATA}")
    return SHARED_DATA
