"""Rows into :class:`data.examples.Example`: the shapes a question/answer row comes in (GSM8K,
MATH-500, AIME, or plain question + answer with an optional field mapping), detected from the
first row's fields, and the parsing of a stream of rows where a malformed one raises
:class:`data.examples.DataFormatError` naming the file and line (or hub row), never skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from data.examples import DataFormatError, Example
from rewards.extract import gsm8k_gold

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


# ---------------------------------------------------------------- rows to examples


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
