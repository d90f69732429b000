"""Rows into :class:`data.examples.Example`: the shapes (layouts) a question/answer row comes in,
detected from the first row's fields (:data:`LAYOUTS` describes each), and the parsing of a
stream of rows where a malformed one raises :class:`data.examples.DataFormatError` naming the
file and line (or hub row), never skipped.

The evaluation sets' shapes (GSM8K, MATH-500, AIME) and the common math RL training layouts:
MATH's ``problem`` / ``solution`` (the gold is the last ``\\boxed{}`` of the solution, as MATH
marks its answers), DeepScaleR's ``problem`` / ``answer``, a plain ``prompt`` / ``answer``, and
verl's own RL layout (``prompt`` as chat messages or text, ``reward_model.ground_truth``: DAPO-Math
and the files ``pasr data prepare`` writes); anything else takes a field mapping.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from data.examples import DataFormatError, Example
from rewards.extract import gsm8k_gold, last_boxed

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
    if isinstance(value, float) and not math.isfinite(value):  # JSON's NaN/Infinity, a parquet float column
        raise _RowError(f"field {key!r} is {value}, not a number an answer can equal; write it as text")
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


def _math_solution_row(name: str) -> RowParser:
    """MATH's training layout (``problem``, ``solution``, ``level``, ``type``; no answer field):
    the gold is the content of the solution's last ``\\boxed{}``, the answer MATH marks. The
    whole solution stays in ``extra`` (the rule judge would also take the box from it, but an
    LLM judge would grade against a worked solution instead of an answer)."""

    def parse(row: Row, index: int, split: str) -> Example:
        question = _text(row, "problem", "question")
        solution = _text(row, "solution", "solution")
        gold = last_boxed(solution)
        if not gold:
            raise _RowError("field 'solution' has no \\boxed{...} answer (MATH marks its answer that way)")
        rid = f"{name}:{split}:{index}" if split else f"{name}:{index}"
        extra = {"split": split, "solution": solution}
        for key in ("level", "type", "subject"):
            if row.get(key) is not None:
                extra[key] = row[key]
        return Example(rid, name, question, gold, extra)

    return parse


def _rl_row(name: str) -> RowParser:
    """verl's RL layout: ``prompt`` (chat messages, the question in the last user message; or
    text) and ``reward_model.ground_truth``; the row's id from ``extra_info`` (``id``, else
    ``index``) when it has one. A file ``pasr data prepare`` wrote reads back as its questions."""

    def parse(row: Row, index: int, split: str) -> Example:
        prompt = row.get("prompt")
        if isinstance(prompt, (list, tuple)):
            users = [m.get("content") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
            if not users or not isinstance(users[-1], str) or not users[-1].strip():
                raise _RowError("field 'prompt' has no user message with text")
            question = users[-1].strip()
        else:
            question = _text(row, "prompt", "question")
        reward = row.get("reward_model")
        if not isinstance(reward, dict):
            raise _RowError("missing field 'reward_model' (a mapping with ground_truth)")
        answer = _text(reward, "ground_truth", "answer")
        info = row.get("extra_info") if isinstance(row.get("extra_info"), dict) else {}
        rid = info.get("id") if info.get("id") not in (None, "") else info.get("index", index)
        return Example(f"{name}:{rid}", name, question, answer, {"split": split or str(info.get("split") or "")})

    return parse


_SHAPES: dict[str, Callable[[str], RowParser]] = {
    "gsm8k": _gsm8k_row,
    "math500": _math_row,
    "aime24": _aime_row,
    "math": _math_solution_row,
    "problem_answer": lambda name: _generic_row(name, "problem", "answer"),
    "prompt_answer": lambda name: _generic_row(name, "prompt", "answer"),
    "verl": _rl_row,
}

# shape -> what its rows hold, for `pasr data list` and the messages that name the layouts
LAYOUTS = {
    "gsm8k": "GSM8K: question + answer with a '#### <answer>' line (gold: the text after ####)",
    "math500": "MATH-500: problem + answer + unique_id",
    "aime24": "AIME: problem + answer (an integer) + id",
    "math": "MATH training: problem + solution, no answer field (gold: the solution's last \\boxed{})",
    "problem_answer": "DeepScaleR style: problem + answer (a solution field is ignored)",
    "prompt_answer": "prompt + answer, the prompt as text",
    "verl": "verl RL parquet (DAPO-Math, pasr data prepare's output): prompt + reward_model.ground_truth",
    "generic": "question + answer, or any fields mapped with --question-field/--answer-field",
}


def detect_shape(row: Row) -> str:
    """The shape of a row (a key of :data:`LAYOUTS`), from its fields."""
    has_q = "question" in row or "problem" in row
    if has_q and "answer" in row and "unique_id" in row:
        return "math500"
    if "question" in row and isinstance(row.get("answer"), str) and "####" in row["answer"]:
        return "gsm8k"
    if "problem" in row and "answer" in row and "id" in row:
        return "aime24"
    if "question" in row and "answer" in row:
        return "generic"
    if "problem" in row and "answer" in row:
        return "problem_answer"
    if "problem" in row and "solution" in row:
        return "math"
    if "prompt" in row and isinstance(row.get("reward_model"), dict):
        return "verl"
    if isinstance(row.get("prompt"), str) and "answer" in row:
        return "prompt_answer"
    raise _ShapeError(
        f"cannot tell the data format from the fields {sorted(row)} (expected question + answer, "
        "problem + answer (+ unique_id or id), problem + solution (MATH), prompt + answer, "
        "or prompt + reward_model (verl))"
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
    first_line: dict[str, int] = {}  # id -> the line that gave it first
    for index, (lineno, row) in enumerate(rows):
        try:
            if parser is None:
                parser = parser_for(row)
            example = parser(row, index, split)
        except _RowError as exc:
            error = UnknownShapeError if isinstance(exc, _ShapeError) else DataFormatError
            raise error(str(exc), where, lineno, unit) from None
        if (first := first_line.setdefault(example.id, lineno)) != lineno:
            raise duplicate_id(example, where, first, lineno, unit)
        out.append(example)
        if limit is not None and len(out) >= limit:
            break
    return out


def duplicate_id(example: Example, where: str, first: int, line: int, unit: str) -> DataFormatError:
    """The error of a row whose id an earlier row has: ids key every sample, answer and resume
    (two rows of one id collapsed into one question in ``pasr eval``, and its rerun deleted the
    other's samples), so ``pasr data prepare``, ``pasr eval`` and ``pasr train``, which all read
    rows through :func:`_parse_rows`, refuse it, naming the id and both lines."""
    rid = example.id.removeprefix(f"{example.data_source}:")
    at = f"{where}:{first}" if unit == "line" else f"{where}:{unit} {first}"
    return DataFormatError(
        f"duplicate id {rid!r}, the id of {at} too; give each row its own id (or drop the repeated row)",
        where,
        line,
        unit,
    )
