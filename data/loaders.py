"""Load question/answer rows as :class:`data.examples.Example` from a known data set, a local
file, or the Hugging Face hub.

``load_examples(source, split=None, limit=None, **options)``; ``source`` is

* a known name (:data:`DATASETS`: ``gsm8k``, ``math500``, ``aime24``, ``synthetic``,
  ``countdown``, or a
  hub name such as ``openai/gsm8k``). The local copy is used when the data folder holds it:
  ``$PASR_DATA_DIR`` when set, else ``../shared/data`` beside the repository. Otherwise the set
  comes from the hub through ``datasets.load_dataset`` (needs internet);
* a path to a ``.jsonl``, ``.json`` (an array, or one object a line) or ``.parquet`` file. Its
  shape is detected from the first row's fields: GSM8K (question + answer with ``####``),
  MATH-500 (problem/question + answer + unique_id), AIME (problem + answer + id), or plain
  question + answer. Instruction data with other field names (the paper trains on
  alpaca-evol-instruct: ``instruction`` / ``output``) takes a mapping:
  ``question_field="instruction", answer_field="output"`` (and optionally ``id_field``,
  ``input_field`` appended to the question, ``data_source``).

``options`` for ``synthetic`` and ``countdown``: ``seed`` (default 0), ``difficulty`` (1-3, default 1) and ``n``
(default ``limit`` or 1000); ``split`` "train" (default) or "test" (held out, disjoint).

Rows are parsed one at a time (JSONL streams line by line, parquet by record batch); a
malformed row raises :class:`DataFormatError` naming the file and line, never skipped. Only
the first ``limit`` rows are read. Ids are stable: ``gsm8k:test:0``, ``math500:<unique_id>``,
``aime24:<id>``, ``<file stem>:<row id or index>``.

The pieces live beside this module: the known sets in :mod:`data.dataset_specs`, the row shapes
and row-numbered parsing in :mod:`data.row_shapes`, the file readers in :mod:`data.file_rows`,
the generated sets in :mod:`data.generated_sets`; this module chooses between them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

# The registry, the row shapes and the file readers live in their own modules; their names are
# imported here too, so ``from data.loaders import ...`` keeps working for each of them.
from data.dataset_specs import (  # noqa: F401  (re-exported)
    _ALIASES,
    DATASETS,
    FILE_SUFFIXES,
    GENERATED,
    REPO,
    DatasetSpec,
    data_dir,
    get_dataset,
    local_file,
)
from data.examples import DataFormatError, DatasetError, Example  # noqa: F401  (re-exported)
from data.file_rows import _iter_file, _one_line
from data.generated_sets import _load_generated
from data.row_shapes import (  # noqa: F401  (re-exported)
    _SHAPES,
    Row,
    RowParser,
    UnknownShapeError,
    _generic_row,
    _parse_rows,
    detect_shape,
)

# ---------------------------------------------------------------- public API


def load_file(
    path: str | Path,
    limit: int | None = None,
    *,
    split: str = "",
    shape: str | None = None,
    data_source: str | None = None,
    question_field: str | None = None,
    answer_field: str | None = None,
    id_field: str | None = None,
    input_field: str | None = None,
) -> list[Example]:
    """Examples from one local file. ``shape`` (``gsm8k``/``math500``/``aime24``/``generic``)
    skips detection; a field mapping implies ``generic``."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise DatasetError(f"data file not found: {path}")
    name = data_source or path.stem
    mapped = question_field or answer_field or id_field or input_field
    if mapped:
        shape = "generic"

    def parser_for(first_row: Row) -> RowParser:
        chosen = shape or detect_shape(first_row)
        if chosen == "generic":
            return _generic_row(name, question_field or "question", answer_field or "answer", id_field, input_field)
        if chosen not in _SHAPES:
            raise DatasetError(f"unknown data shape {chosen!r}: use one of {', '.join([*_SHAPES, 'generic'])}")
        return _SHAPES[chosen](name)

    return _parse_rows(_iter_file(path), parser_for, split, limit, str(path), "line")


def _load_hub(spec: DatasetSpec, split: str, limit: int | None) -> list[Example]:
    hub_split = spec.hub_splits[split]
    try:
        import datasets
    except ImportError as exc:  # pragma: no cover - datasets is a dependency
        raise DatasetError(f"loading {spec.hub_path} from the hub needs the datasets package ({exc})") from None
    args = (spec.hub_path, spec.hub_config) if spec.hub_config else (spec.hub_path,)
    try:
        ds = datasets.load_dataset(*args, split=hub_split)
    except Exception as exc:  # network, auth, missing split: one clear line
        hint = spec.files.get(split)
        raise DatasetError(
            f"could not load {spec.hub_path} (split {hub_split}) from the Hugging Face hub ({_one_line(exc)})"
            + (f"; or put a local {hint} in {data_dir()} (or $PASR_DATA_DIR)" if hint else "")
        ) from None
    rows = ((i + 1, dict(row)) for i, row in enumerate(ds))
    parser = _SHAPES[spec.name](spec.name)
    return _parse_rows(rows, lambda _row: parser, split, limit, f"hub:{spec.hub_path}[{hub_split}]", "row")


_FILE_OPTIONS = {"shape", "data_source", "question_field", "answer_field", "id_field", "input_field"}


def looks_like_path(source: str) -> bool:
    return Path(source).suffix.lower() in FILE_SUFFIXES or os.sep in source or source.startswith((".", "~"))


def load_examples(source: str, split: str | None = None, limit: int | None = None, **options: Any) -> list[Example]:
    """Examples from a known data set, a hub name, or a local file (see the module docstring)."""
    if limit is not None and limit < 0:
        raise DatasetError(f"limit must be >= 0, got {limit}")
    source = str(source)
    known = _ALIASES.get(source.lower())
    if known is None:
        if looks_like_path(source) or Path(source).expanduser().is_file():
            unknown = set(options) - _FILE_OPTIONS
            if unknown:
                raise DatasetError(
                    f"unknown option(s) for a data file: {', '.join(sorted(unknown))} "
                    f"(use {', '.join(sorted(_FILE_OPTIONS))})"
                )
            return load_file(source, limit, split=split or "", **options)
        get_dataset(source)  # raises the "unknown dataset" error
    spec = DATASETS[known]
    split = split or spec.default_split
    if split not in spec.splits:
        raise DatasetError(f"dataset {spec.name} has no split {split!r}: use one of {', '.join(spec.splits)}")
    if spec.name in GENERATED:
        return _load_generated(spec.name, split, limit, options)
    if options:
        raise DatasetError(
            f"options {', '.join(sorted(options))} apply to data files, synthetic and countdown, not to {spec.name}"
        )
    path = local_file(spec.name, split)
    if path is not None:
        return load_file(path, limit, split=split, shape=spec.name, data_source=spec.name)
    return _load_hub(spec, split, limit)


def describe_sources() -> list[dict[str, str]]:
    """One line of facts per known set (for ``pasr data list`` and ``pasr eval``)."""
    rows = []
    for spec in DATASETS.values():
        for split in spec.splits:
            if spec.name in GENERATED:
                where = "generated"
            else:
                path = local_file(spec.name, split)
                where = str(path) if path else f"hub {spec.hub_path}"
            rows.append(
                {
                    "name": spec.name,
                    "split": split,
                    "source": where,
                    "description": spec.description,
                    "use": spec.use_of(split),
                }
            )
    return rows
