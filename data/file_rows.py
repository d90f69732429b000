"""Rows of a local data file, each with its line (or row) number: ``.jsonl`` streamed line by
line, ``.json`` (a top-level array, or one object a line under a ``.json`` name), ``.parquet``
by record batch. A file that is not UTF-8, not valid JSON, or JSON holding text no UTF-8 can
hold (a lone surrogate escape) raises :class:`data.examples.DataFormatError` with the line it
fails on. A JSON number that no float can hold (``1e400``, ``1e-400``) is kept as its text, not
read as ``inf`` or ``0.0`` (a gold answer ``1e400`` was written as "inf")."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path

from data.dataset_specs import FILE_SUFFIXES
from data.examples import DataFormatError, DatasetError
from data.row_shapes import Row


def _not_utf8(data: bytes, pos: int) -> tuple[str, int]:
    """(problem, line number) for the undecodable byte at offset ``pos`` of ``data``."""
    line_start = data.rfind(b"\n", 0, pos) + 1
    column = pos - line_start + 1
    return f"not UTF-8 text (byte 0x{data[pos]:02x} at column {column}); save the file as UTF-8", data.count(
        b"\n", 0, pos
    ) + 1


def _json_float(text: str) -> float | str:
    """A JSON number with a fraction or exponent: a float, unless the float would change its
    value beyond rounding (overflow to ``inf``, a non-zero underflowing to ``0.0``): then its text,
    which the row parsers read as text (a gold answer stays the number the file wrote)."""
    value = float(text)
    if math.isinf(value) or (value == 0.0 and any(c in "123456789" for c in text.lower().partition("e")[0])):
        return text
    return value


def _bad_json(exc: json.JSONDecodeError) -> str:
    """The problem of a line json could not parse. Some of json's messages already end in "at"
    ("Unterminated string starting at", "Invalid control character at"); the column follows
    them without a second one."""
    return f"bad JSON ({exc.msg.removesuffix(' at')} at column {exc.colno})"


# a \uXXXX escape of a UTF-16 surrogate: the only way valid UTF-8 JSON can hold text that no
# UTF-8 can (a lone one); a paired one is an ordinary character once parsed
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _lone_surrogate(value: object, field: str = "") -> tuple[str, str] | None:
    """``(field, character)`` of the first lone surrogate in a parsed row's strings (keys
    included), or None."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return field, value[exc.start]
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        name = f"{field}.{key}" if field else str(key)
        found = _lone_surrogate(key, name) if isinstance(key, str) else None
        if found := found or _lone_surrogate(item, name):
            return found
    return None


def _check_text(row: Row, text: str, path: Path, lineno: int) -> None:
    """Refuse a row holding text that is valid JSON but cannot be written as UTF-8 (a lone
    ``\\ud800``): it failed only when written or printed, after the work on it (``pasr eval``
    lost the chunk it was in on every rerun; train and ``pasr data`` crashed)."""
    if not _SURROGATE_ESCAPE.search(text):  # the common case: no escape to look at
        return
    found = _lone_surrogate(row)
    if found is not None:
        field, char = found
        raise DataFormatError(
            f"field {field!r} holds a lone UTF-16 surrogate (\\u{ord(char):04x}): valid JSON, but not text "
            "that can be written as UTF-8; fix or remove that escape",
            path,
            lineno,
        )


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
                row = json.loads(line, parse_float=_json_float)
            except json.JSONDecodeError as exc:
                raise DataFormatError(_bad_json(exc), path, lineno) from None
            if not isinstance(row, dict):
                raise DataFormatError(f"expected a JSON object, got {type(row).__name__}", path, lineno)
            _check_text(row, line, path, lineno)
            yield lineno, row


def _iter_json_array(path: Path, text: str) -> Iterator[tuple[int, Row]]:
    """Elements of a top-level JSON array, each with the line it starts on."""
    decoder = json.JSONDecoder(parse_float=_json_float)
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
        _check_text(row, text[pos:end], path, line_of(pos))
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
