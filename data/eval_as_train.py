"""Is a data file an evaluation set? Asked before ``pasr data prepare --split train`` writes it as
training data, which would make every later score on that set a training score.

A known set's splits say it themselves (``DatasetSpec.use_of``; ``math500`` and ``aime24`` have no
train split to ask for). A file is read for the signs a careful person would look at, the first
one found named: its name (``gsm8k_test.jsonl``, ``math500.jsonl``: a word of
:data:`EVAL_WORDS` or a known evaluation-only set), its rows' own split (a ``split`` field, a verl
row's ``extra_info.split``, MATH-500's ``unique_id`` under ``test/``), and its questions: any of
them in a local copy of a known evaluation split (``$PASR_DATA_DIR``; the hub is never asked).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from data.examples import DatasetError, Example

# words of a file name or a row's split that mark held-out data
EVAL_WORDS = frozenset(
    "test tests testing eval evals evaluation val valid validation dev heldout holdout held_out".split()
)
# known sets that exist only as evaluation sets, as a file name may spell them
EVAL_ONLY_NAMES = frozenset("math500 math_500 aime24 aime2024 aime_2024".split())


def _name_reason(path: Path) -> str | None:
    stem = path.stem.lower()
    words = set(re.split(r"[^a-z0-9]+", stem))
    if found := sorted(words & EVAL_WORDS):
        return f"its name says {found[0]!r}"
    if hit := next((n for n in sorted(EVAL_ONLY_NAMES) if n in stem.replace("-", "_") or n in words), None):
        return f"its name says {hit!r}, an evaluation-only set"
    return None


def _row_split(row: dict) -> str | None:
    info = row.get("extra_info")
    for value in (row.get("split"), info.get("split") if isinstance(info, dict) else None):
        if isinstance(value, str) and value.strip().lower() in EVAL_WORDS:
            return value.strip()
    return None


def _rows_reason(path: Path) -> str | None:
    from data.file_rows import _iter_file

    for line, row in _iter_file(path):
        if split := _row_split(row):
            return f"its rows say split {split!r} (line {line})"
        uid = row.get("unique_id")
        if isinstance(uid, str) and uid.startswith("test/"):
            return f"its rows are MATH's test split, as MATH-500 (line {line}: unique_id {uid!r})"
    return None


def _key(question: str) -> str:
    return " ".join(question.split()).lower()


def eval_questions() -> Iterable[tuple[str, Path, set[str]]]:
    """``(set and split, local file, its questions)`` of every known evaluation split whose local
    copy is here (never the hub: this check must not need a network)."""
    from data.dataset_specs import DATASETS, GENERATED, local_file
    from data.loaders import load_file

    for spec in DATASETS.values():
        if spec.name in GENERATED:
            continue  # their test splits share no question with train by construction
        for split in spec.splits:
            if spec.use_of(split) != "eval" or (path := local_file(spec.name, split)) is None:
                continue
            try:
                rows = load_file(path, split=split, shape=spec.name, data_source=spec.name)
            except DatasetError:
                continue  # a broken local copy is its own command's problem
            yield f"{spec.name} {split}", path, {_key(e.question) for e in rows}


def _overlap_reason(examples: Sequence[Example]) -> str | None:
    keys = [_key(e.question) for e in examples]
    for name, path, questions in eval_questions():
        shared = sum(k in questions for k in keys)
        if shared:
            return f"{shared} of its {len(keys)} questions are in {name} ({path})"
    return None


def eval_set_reason(dataset: str, examples: Sequence[Example]) -> str | None:
    """Why ``dataset`` (a ``--dataset`` value whose rows are ``examples``) is an evaluation set,
    or None. A known set or a generated one is never one here: its split was asked for by name."""
    from data.dataset_specs import get_dataset

    try:
        get_dataset(dataset)  # a known name wins over a file of that name, as in the loaders
        return None
    except DatasetError:
        pass
    path = Path(dataset).expanduser()
    if not path.is_file():
        return None
    return _name_reason(path) or _rows_reason(path) or _overlap_reason(examples)
