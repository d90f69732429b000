"""The known data sets: their names and aliases, splits, local file names and hub paths
(:data:`DATASETS`), and where their local copies are looked for (:func:`data_dir`:
``$PASR_DATA_DIR`` when set, else ``../shared/data`` beside the repository).

Only facts about the sets live here; reading a file is :mod:`data.file_rows`, turning its rows
into examples :mod:`data.row_shapes`, and choosing between them :mod:`data.loaders`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from data.examples import DatasetError

REPO = Path(__file__).resolve().parents[1]
FILE_SUFFIXES = (".jsonl", ".json", ".parquet")


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    description: str
    files: dict[str, str] = field(default_factory=dict)  # split -> file name in the data folder
    hub_path: str | None = None
    hub_config: str | None = None
    hub_splits: dict[str, str] = field(default_factory=dict)  # our split -> the hub's split name
    default_split: str = "test"
    aliases: tuple[str, ...] = ()

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(self.hub_splits or self.files)

    @staticmethod
    def use_of(split: str) -> str:
        """``train`` for a split meant to train on (every set's ``train`` split), else ``eval``:
        the test splits, and the sets that have no other (MATH-500, AIME 2024), are held out."""
        return "train" if split == "train" else "eval"


DATASETS: dict[str, DatasetSpec] = {
    "gsm8k": DatasetSpec(
        name="gsm8k",
        description="GSM8K grade-school math word problems (gold: the number after ####)",
        files={"train": "gsm8k_train.jsonl", "test": "gsm8k_test.jsonl"},
        hub_path="openai/gsm8k",
        hub_config="main",
        hub_splits={"train": "train", "test": "test"},
        aliases=("openai/gsm8k",),
    ),
    "math500": DatasetSpec(
        name="math500",
        description="MATH-500 competition math (PRM800K subset of the MATH test set; LaTeX answers)",
        files={"test": "math500_test.jsonl"},
        hub_path="HuggingFaceH4/MATH-500",
        hub_splits={"test": "test"},
        aliases=("math-500", "HuggingFaceH4/MATH-500"),
    ),
    "aime24": DatasetSpec(
        name="aime24",
        description="AIME 2024 I and II, 30 problems (integer answers 0-999)",
        files={"test": "aime24.jsonl"},
        hub_path="HuggingFaceH4/aime_2024",
        hub_splits={"test": "train"},  # the hub set has one split, called train
        aliases=("aime", "aime2024", "HuggingFaceH4/aime_2024"),
    ),
    "math": DatasetSpec(
        name="math",
        description="MATH competition math, 7500 train / 5000 test (gold: the solution's last \\boxed{}; "
        "MATH-500 is drawn from its test split, not from train)",
        files={"train": "math_train.jsonl", "test": "math_test.jsonl"},
        hub_path="DigitalLearningGmbH/MATH-lighteval",
        hub_splits={"train": "train", "test": "test"},
        aliases=("hendrycks_math", "competition_math", "DigitalLearningGmbH/MATH-lighteval"),
    ),
    "synthetic": DatasetSpec(
        name="synthetic",
        description="seeded synthetic arithmetic word problems (CPU default; options seed, difficulty)",
        default_split="train",
        hub_splits={"train": "train", "test": "test"},
    ),
    "countdown": DatasetSpec(
        name="countdown",
        description="seeded Countdown equations (Reflect, Retry, Reward; judge countdown; options seed, difficulty)",
        default_split="train",
        hub_splits={"train": "train", "test": "test"},
    ),
}
GENERATED = ("synthetic", "countdown")  # made by a seeded generator, not read from a file

_ALIASES = {alias.lower(): name for name, spec in DATASETS.items() for alias in (name, *spec.aliases)}


def get_dataset(name: str) -> DatasetSpec:
    """The spec for a known name or alias; :class:`DatasetError` listing the names otherwise."""
    key = _ALIASES.get(name.lower())
    if key is None:
        raise DatasetError(
            f"unknown dataset {name!r}: use one of {', '.join(DATASETS)} or a path to a {'/'.join(FILE_SUFFIXES)} file"
        )
    return DATASETS[key]


def data_dir() -> Path:
    """Where local copies of the known sets are looked for."""
    env = os.environ.get("PASR_DATA_DIR")
    return Path(env).expanduser() if env else (REPO.parent / "shared" / "data")


def local_file(name: str, split: str) -> Path | None:
    """The local copy of a known set's split, or None when the data folder lacks it."""
    spec = get_dataset(name)
    filename = spec.files.get(split)
    if filename is None:
        return None
    path = data_dir() / filename
    return path if path.is_file() else None
