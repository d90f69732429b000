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
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data.examples import DataFormatError, DatasetError, Example
from rewards.extract import gsm8k_gold

REPO = Path(__file__).resolve().parents[1]
FILE_SUFFIXES = (".jsonl", ".json", ".parquet")

Row = dict[str, Any]
# (row, index, split) -> Example; raises _RowError for a malformed row
RowParser = Callable[[Row, int, str], Example]


class _RowError(Exception):
    """A row-level problem; the caller adds file and line."""


class _ShapeError(_RowError):
    """The first row's fields match no known shape."""


class UnknownShapeError(DataFormatError):
    """A file whose fields match no known shape. The fix is a field mapping, which each
    command offers differently (``pasr data`` has flags for it, ``pasr eval`` does not), so
    the message names none and the caller adds its own hint."""


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


def dataset_names() -> list[str]:
    return list(DATASETS)


def get_dataset(name: str) -> DatasetSpec:
    """The spec for a known name or alias; :class:`DatasetError` listing the names otherwise."""
    key = _ALIASES.get(name.lower())
    if key is None:
        raise DatasetError(
            f"unknown dataset {name!r}: use one of {', '.join(DATASETS)} or a path to a "
            f"{'/'.join(FILE_SUFFIXES)} file"
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


# ---------------------------------------------------------------- field helpers


def _text(row: Row, key: str, what: str | None = None) -> str:
    if key not in row or row[key] is None:
        raise _RowError(f"missing field {key!r}" + (f" ({what})" if what else ""))
    value = row[key]
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise _RowError(f"field {key!r} must be text, got {type(value).__name__}")
    text = str(value).strip()
    if not text:
        raise _RowError(f"empty {what or key}" + ("" if what is None else f" (field {key!r})"))
    return text


def _first_present(row: Row, keys: Iterable[str]) -> str:
    keys = tuple(keys)
    for key in keys:
        if key in row and row[key] is not None:
            return key
    raise _RowError("missing field " + " or ".join(repr(k) for k in keys))


def _integer_text(value: str, field_name: str) -> str:
    try:
        return str(int(str(value).strip()))
    except ValueError:
        raise _RowError(f"field {field_name!r} must be an integer, got {value!r}") from None


def _row_id(row: Row, key: str) -> str:
    value = row.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise _RowError(f"missing field {key!r}")
    return str(value).strip()


# ---------------------------------------------------------------- row parsers per shape


def _gsm8k_row(name: str) -> RowParser:
    def parse(row: Row, index: int, split: str) -> Example:
        question = _text(row, "question", "question")
        solution = _text(row, "answer", "answer")
        if "####" not in solution:
            raise _RowError("field 'answer' has no '#### <answer>' line")
        gold = gsm8k_gold(solution)
        if not gold:
            raise _RowError("empty answer after '####'")
        rid = f"{name}:{split}:{index}" if split else f"{name}:{index}"
        return Example(rid, name, question, gold, {"split": split, "solution": solution})

    return parse


def _math_row(name: str) -> RowParser:
    def parse(row: Row, index: int, split: str) -> Example:
        question = _text(row, _first_present(row, ("problem", "question")), "question")
        answer = _text(row, "answer", "answer")
        uid = _row_id(row, "unique_id")
        extra = {"split": split, "unique_id": uid}
        for key in ("subject", "level", "solution"):
            if row.get(key) is not None:
                extra[key] = row[key]
        return Example(f"{name}:{uid}", name, question, answer, extra)

    return parse


def _aime_row(name: str) -> RowParser:
    def parse(row: Row, index: int, split: str) -> Example:
        question = _text(row, _first_present(row, ("problem", "question")), "question")
        answer = _integer_text(_text(row, "answer", "answer"), "answer")
        rid = _row_id(row, "id")
        extra = {"split": split}
        for key in ("url", "year"):
            if row.get(key) is not None:
                extra[key] = row[key]
        return Example(f"{name}:{rid}", name, question, answer, extra)

    return parse


def _generic_row(
    name: str,
    question_field: str = "question",
    answer_field: str = "answer",
    id_field: str | None = None,
    input_field: str | None = None,
) -> RowParser:
    def parse(row: Row, index: int, split: str) -> Example:
        question = _text(row, question_field, "question")
        if input_field and row.get(input_field) not in (None, ""):
            question = f"{question}\n\n{_text(row, input_field)}"
        answer = _text(row, answer_field, "answer")
        rid = _row_id(row, id_field) if id_field else str(index)
        return Example(f"{name}:{rid}", name, question, answer, {"split": split})

    return parse


_SHAPES = {"gsm8k": _gsm8k_row, "math500": _math_row, "aime24": _aime_row}


def detect_shape(row: Row) -> str:
    """``gsm8k`` | ``math500`` | ``aime24`` | ``generic`` (question + answer), from a row's fields."""
    has_q = "question" in row or "problem" in row
    if has_q and "answer" in row and "unique_id" in row:
        return "math500"
    if "question" in row and isinstance(row.get("answer"), str) and "####" in row["answer"]:
        return "gsm8k"
    if "problem" in row and "answer" in row and "id" in row:
        return "aime24"
    if "question" in row and "answer" in row:
        return "generic"
    raise _ShapeError(
        f"cannot tell the data format from the fields {sorted(row)} (expected question + answer, "
        "problem + answer + unique_id, or problem + answer + id)"
    )


# ---------------------------------------------------------------- row readers


def _not_utf8(data: bytes, pos: int) -> tuple[str, int]:
    """(problem, line number) for the undecodable byte at offset ``pos`` of ``data``."""
    line_start = data.rfind(b"\n", 0, pos) + 1
    column = pos - line_start + 1
    return f"not UTF-8 text (byte 0x{data[pos]:02x} at column {column}); save the file as UTF-8", data.count(b"\n", 0, pos) + 1


def _bad_json(exc: json.JSONDecodeError) -> str:
    """The problem of a line json could not parse. Some of json's messages already end in "at"
    ("Unterminated string starting at", "Invalid control character at"); the column follows
    them without a second one."""
    return f"bad JSON ({exc.msg.removesuffix(' at')} at column {exc.colno})"


def _iter_jsonl(path: Path) -> Iterator[tuple[int, Row]]:
    # Bytes, decoded line by line: a file that is not UTF-8 fails on the line that is not,
    # with its number, instead of a UnicodeDecodeError from deep inside the text reader.
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataFormatError(_not_utf8(raw, exc.start)[0], path, lineno) from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataFormatError(_bad_json(exc), path, lineno) from None
            if not isinstance(row, dict):
                raise DataFormatError(f"expected a JSON object, got {type(row).__name__}", path, lineno)
            yield lineno, row


def _iter_json_array(path: Path, text: str) -> Iterator[tuple[int, Row]]:
    """Elements of a top-level JSON array, each with the line it starts on."""
    decoder = json.JSONDecoder()
    pos = text.index("[") + 1
    n = len(text)

    def skip_ws(i: int) -> int:
        while i < n and text[i] in " \t\r\n":
            i += 1
        return i

    def line_of(i: int) -> int:
        return text.count("\n", 0, i) + 1

    pos = skip_ws(pos)
    if pos < n and text[pos] == "]":
        return
    while True:
        pos = skip_ws(pos)
        try:
            row, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise DataFormatError(_bad_json(exc), path, exc.lineno) from None
        if not isinstance(row, dict):
            raise DataFormatError(f"expected a JSON object, got {type(row).__name__}", path, line_of(pos))
        yield line_of(pos), row
        pos = skip_ws(end)
        if pos < n and text[pos] == ",":
            pos += 1
            continue
        if pos < n and text[pos] == "]":
            return
        raise DataFormatError("bad JSON (expected ',' or ']' after an array element)", path, line_of(pos))


def _iter_json(path: Path) -> Iterator[tuple[int, Row]]:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        problem, lineno = _not_utf8(data, exc.start)
        raise DataFormatError(problem, path, lineno) from None
    if text.lstrip().startswith("["):
        yield from _iter_json_array(path, text)
    else:  # one object a line, under a .json name
        yield from _iter_jsonl(path)


def _iter_parquet(path: Path) -> Iterator[tuple[int, Row]]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for a broken file
        raise DataFormatError(f"not a readable parquet file ({_one_line(exc)})", path) from None
    rowno = 0
    for batch in pf.iter_batches(batch_size=1024):
        for row in batch.to_pylist():
            rowno += 1
            yield rowno, row


def _iter_file(path: Path) -> Iterator[tuple[int, Row]]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _iter_jsonl(path)
    if suffix == ".json":
        return _iter_json(path)
    if suffix == ".parquet":
        return _iter_parquet(path)
    raise DatasetError(f"unsupported data file {path}: expected one of {', '.join(FILE_SUFFIXES)}")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


# ---------------------------------------------------------------- public API


def _parse_rows(
    rows: Iterable[tuple[int, Row]],
    parser_for: Callable[[Row], RowParser],
    split: str,
    limit: int | None,
    where: str,
    unit: str,
) -> list[Example]:
    out: list[Example] = []
    parser: RowParser | None = None
    if limit is not None and limit <= 0:
        return out
    for index, (lineno, row) in enumerate(rows):
        try:
            if parser is None:
                parser = parser_for(row)
            out.append(parser(row, index, split))
        except _RowError as exc:
            error = UnknownShapeError if isinstance(exc, _ShapeError) else DataFormatError
            raise error(str(exc), where, lineno, unit) from None
        if limit is not None and len(out) >= limit:
            break
    return out


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
            return _generic_row(
                name, question_field or "question", answer_field or "answer", id_field, input_field
            )
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


def _load_generated(name: str, split: str, limit: int | None, options: dict[str, Any]) -> list[Example]:
    """``synthetic`` or ``countdown``: both seeded generators take ``seed``, ``difficulty`` and ``n``."""
    if name == "countdown":
        from data.countdown import generate_problems
    else:
        from data.synthetic import generate_problems

    unknown = set(options) - {"seed", "difficulty", "n"}
    if unknown:
        raise DatasetError(f"unknown option(s) for {name}: {', '.join(sorted(unknown))} (use seed, difficulty, n)")
    n = options.get("n")
    n = n if n is not None else (limit if limit is not None else 1000)
    if limit is not None:
        n = min(n, limit)
    try:
        problems = generate_problems(
            int(n), seed=int(options.get("seed") or 0), difficulty=int(options.get("difficulty") or 1), split=split
        )
    except ValueError as exc:
        raise DatasetError(str(exc)) from None
    return [p.as_example() for p in problems]


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
            rows.append({"name": spec.name, "split": split, "source": where, "description": spec.description})
    return rows
