"""The one question/answer row every loader returns, and the errors loaders raise.

``Example.answer`` is the normalised gold answer the judges compare against: the text after
``####`` for GSM8K (commas removed), the ``answer`` field for MATH-500, the integer as text
for AIME; for generic instruction data it is the reference output as given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Example:
    id: str  # stable: "<dataset>:<split>:<row index>" or "<dataset>:<the row's own id>"
    data_source: str  # "gsm8k" | "math500" | "aime24" | "synthetic" | a file's stem or a given name
    question: str
    answer: str
    # Source-specific extras (split, solution, subject, level, url, difficulty, ...). Not
    # part of the hash, so examples stay usable as dict keys and set members.
    extra: dict[str, Any] = field(default_factory=dict, hash=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "data_source": self.data_source,
            "question": self.question,
            "answer": self.answer,
            "extra": dict(self.extra),
        }


class DatasetError(ValueError):
    """A data set cannot be used: unknown name, unknown split, missing file, hub failure."""


class DataFormatError(DatasetError):
    """One row of a data file is malformed. The message names the file and the line (for
    text files) or row (parquet, hub), and the problem, e.g.
    ``data.jsonl:3: bad JSON (Expecting ',' delimiter at column 17)``."""

    def __init__(self, problem: str, path: str | Path | None = None, line: int | None = None, unit: str = "line"):
        self.problem = problem
        self.path = None if path is None else str(path)
        self.line = line
        self.unit = unit
        where = self.path or "<data>"
        if line is not None:
            where = f"{where}:{line}" if unit == "line" else f"{where}:{unit} {line}"
        super().__init__(f"{where}: {problem}")
