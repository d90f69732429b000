"""The one rollout record format: written by both engines and ``pasr eval``, read by ``pasr stats``.

One JSON object per line. Add fields freely (readers ignore unknown ones and default missing
ones); never rename a field without migrating the readers. A change of what a field means bumps
:data:`RECORD_VERSION`: readers skip (and count) records of a version they do not know, and
``--strict`` ones refuse them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from data.atomic_write import appending, replacing

try:  # a dependency of verl (via tensordict); about 3x faster than json on record lines
    import orjson

    _fast_loads = orjson.loads
except ImportError:  # pragma: no cover
    _fast_loads = json.loads

RECORD_VERSION = 1

# variants
REFINE = "refine"
PLAIN = "plain"
# Reflect, Retry, Reward (recipe/rrr_step.py): the first attempt, a reflection on a failed one
# (response = the reflection text, acc = its retry's success, the reflection's reward), and the
# retry written with that reflection in context (sample_index = the reflection's)
ATTEMPT = "attempt"
REFLECTION = "reflection"
RETRY = "retry"
# Self-Refine passes are "self_refine:answer", "self_refine:feedback:1", "self_refine:refine:1", ...


@dataclass
class RolloutRecord:
    run_id: str
    query_id: str
    data_source: str
    variant: str  # refine | plain | attempt | reflection | retry | self_refine:<pass>
    prompt: str  # the user question (system prompt is recorded by version in `prompt_version`)
    response: str
    response_tokens: int
    format_ok: bool
    format_reason: str
    n_refine: int
    extracted_answer: str | None
    gold: str
    acc: float | None  # None = judge error
    judge_error: str | None = None
    refine_reward: float | None = None  # None for plain rollouts and eval records
    refine_outcome: str | None = None  # better | worse | tie | empty | none | no_baseline | judge_error
    total_reward: float | None = None
    step: int | None = None  # training step; None for eval
    dataset: str | None = None  # eval dataset name; None for training
    sample_index: int = 0  # index within the query's group (or eval sample k)
    engine: str = "local"  # local | verl | eval
    prompt_version: str | None = None
    finish_reason: str | None = None  # stop | length
    extra: dict[str, Any] = field(default_factory=dict)
    version: int = RECORD_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> RolloutRecord:
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in obj.items() if k in known}
        extra = dict(kwargs.get("extra") or {})
        extra.update({k: v for k, v in obj.items() if k not in known})
        kwargs["extra"] = extra
        return cls(**kwargs)


# What an error keeps of its reason: a reason may quote the line (a schema version is shown as
# written), and a reader keeps its errors, so a 200 MB line must not become a 200 MB message.
MAX_REASON_CHARS = 300
ERRORS_KEPT = 50  # errors an :class:`ErrorSample` keeps by default (all are counted)


def _shorten(text: str, limit: int = MAX_REASON_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


class RecordFormatError(ValueError):
    """A corrupt line in a rollout dump, with its file and line number (the reason cut to
    :data:`MAX_REASON_CHARS`)."""

    def __init__(self, path: str | Path, line_no: int, reason: str):
        reason = _shorten(reason)
        super().__init__(f"{path}:{line_no}: {reason}")
        self.path, self.line_no, self.reason = str(path), line_no, reason


class UnknownRecordVersion(ValueError):
    """Raised by :func:`validate_record` for a record whose ``version`` is not :data:`RECORD_VERSION`."""

    def __init__(self, version: Any):
        self.version = version
        super().__init__(
            f"record schema version {_shorten(repr(version), 40)} is unknown to this pasr, which reads version "
            f"{RECORD_VERSION} (written by a newer pasr?)"
        )


class RecordVersionError(RecordFormatError):
    """A line holding a record of a schema version this reader does not know. Not corrupt, but
    not readable either: a version is bumped when a field changes meaning, so reading it as the
    current one would count silently wrong. ``version`` is the value as written (its repr, cut
    short, when that is long)."""

    def __init__(self, path: str | Path, line_no: int, exc: UnknownRecordVersion):
        super().__init__(path, line_no, str(exc))
        text = repr(exc.version)
        self.version = exc.version if len(text) <= 40 else _shorten(text, 40)


@dataclass
class ErrorSample:
    """What a reader keeps of the bad lines it skipped: every one counted, the first ``keep``
    kept. A list of them all grows with the input (a 200 MB random blob beside a good dump made
    about half a GB of errors in ``pasr stats``); this stays the same size. Takes errors through
    ``append``, as a list would."""

    keep: int = ERRORS_KEPT
    count: int = 0  # every error, of unknown versions too
    unknown_version: int = 0  # those of records of an unknown schema version
    first: list[RecordFormatError] = field(default_factory=list)
    first_unknown_version: RecordVersionError | None = None  # kept even when ``first`` is full of others

    def append(self, err: RecordFormatError) -> None:
        self.count += 1
        if isinstance(err, RecordVersionError):
            self.unknown_version += 1
            if self.first_unknown_version is None:
                self.first_unknown_version = err
        if len(self.first) < self.keep:
            self.first.append(err)


def write_records(path: str | Path, records: Iterable[RolloutRecord], append: bool = True) -> int:
    """Append records as JSONL (``append=False``: replace the file with them); returns how many
    were written. All of them or none (:mod:`data.atomic_write`): a failed write, a full disk
    included (:class:`~data.atomic_write.DiskFullError`), leaves the file as it was."""
    n = 0
    with (appending if append else replacing)(path) as fh:
        for rec in records:
            fh.write(rec.to_json() + "\n")
            n += 1
    return n


# Fields whose type readers rely on (numbers summed, strings used as counter keys), in the order
# they are checked: (name, the classes JSON gives an accepted value, what the error calls it).
# Exact classes, not isinstance: JSON values are exactly these, and bool (an int subclass) is not
# a count. One set lookup per field keeps this cheap on the millions of lines ``pasr stats`` reads.
_STRING, _INTEGER, _NUMBER = ({str}, "a string"), ({int}, "an integer"), ({int, float}, "a number")
_TYPED_FIELDS: tuple[tuple[str, frozenset[type], str], ...] = tuple(
    (name, frozenset(classes | ({type(None)} if nullable else set())), what + (" or null" if nullable else ""))
    for name, (classes, what), nullable in (
        ("response", _STRING, False),
        ("acc", _NUMBER, True),
        ("step", _INTEGER, True),
        ("response_tokens", _INTEGER, False),
        ("n_refine", _INTEGER, False),
        ("sample_index", _INTEGER, False),
        ("variant", _STRING, False),
        ("dataset", _STRING, True),
        ("format_reason", _STRING, True),
        ("refine_outcome", _STRING, True),
        ("engine", _STRING, True),
        ("finish_reason", _STRING, True),
        ("refine_reward", _NUMBER, True),
    )
)
_REQUIRED = frozenset(f.name for f in fields(RolloutRecord) if f.default is MISSING and f.default_factory is MISSING)


def validate_record(obj: Any) -> dict[str, Any]:
    """``obj`` if it is a rollout record, else ValueError / TypeError naming what is wrong.

    A record has every field without a default, and the fields that readers count with have
    their declared types (``acc`` a number or null, ``n_refine`` an integer, ``variant`` a
    string, ...; ``true`` is not an integer here). Without these checks a wrong type would crash
    a reader or count silently wrong; with them it is one reported corrupt line. Unknown fields
    are allowed (they land in ``extra``). A ``version`` other than :data:`RECORD_VERSION` is
    :class:`UnknownRecordVersion` (a ValueError); a record without one is of the current version.
    """
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    version = obj.get("version", RECORD_VERSION)
    if version != RECORD_VERSION or version.__class__ is not int:  # bool is not a version: True == 1
        raise UnknownRecordVersion(version)
    if not _REQUIRED <= obj.keys():
        raise TypeError("missing field(s) " + ", ".join(sorted(_REQUIRED - obj.keys())))
    for name, classes, what in _TYPED_FIELDS:
        if name in obj and obj[name].__class__ not in classes:
            raise TypeError(f"field {name!r} is not {what}")
    return obj


def _loads(raw: bytes) -> Any:
    try:
        return _fast_loads(raw)
    except ValueError:  # what json accepts and orjson does not (NaN, huge integers), or the real error
        return json.loads(raw)


# No rollout record comes near this (a response at its token limit is kilobytes); a longer line
# is corrupt input (a binary blob, a runaway write), and reading it whole cost over three times
# its size (a 200 MB line: 722 MB), so it is read past in chunks instead.
MAX_LINE_BYTES = 16 << 20


def line_too_long() -> str:
    """What a reader says of a line :func:`iter_lines` did not read whole."""
    return f"line longer than {MAX_LINE_BYTES} bytes"


def iter_lines(fh: BinaryIO) -> Iterator[tuple[int, bytes | None, int]]:
    """``(line number, line, bytes)`` for every line of a binary file; the line is None when it
    is longer than :data:`MAX_LINE_BYTES`, which is then read past a chunk at a time, never held
    whole. ``bytes`` counts what was read, a skipped line's included."""
    line_no = 0
    while raw := fh.readline(MAX_LINE_BYTES):
        line_no += 1
        if len(raw) < MAX_LINE_BYTES or raw.endswith(b"\n"):
            yield line_no, raw, len(raw)
            continue
        size = len(raw)
        while (raw := fh.readline(1 << 20)) and not raw.endswith(b"\n"):
            size += len(raw)
        yield line_no, None, size + len(raw)


_T = TypeVar("_T")
ErrorSink = list[RecordFormatError] | ErrorSample  # where a reader puts the lines it skips


def _read(
    path: str | Path,
    build: Callable[[Any], _T],
    strict: bool,
    errors: ErrorSink | None,
    on_bytes: Callable[[int], None] | None,
) -> Iterator[_T]:
    """``build(parsed line)`` for every non-blank line of a dump. Reads bytes, so that a line that
    is not UTF-8 is a corrupt line like any other, and progress can be counted in bytes."""
    pending = 0
    with Path(path).open("rb") as fh:
        for line_no, raw, size in iter_lines(fh):
            if on_bytes is not None:
                pending += size
                if pending >= 1 << 20:
                    on_bytes(pending)
                    pending = 0
            if raw is None:
                err = RecordFormatError(path, line_no, line_too_long() + ": not a rollout record")
            elif not raw.strip():
                continue
            else:
                try:
                    item = build(_loads(raw))
                except (ValueError, TypeError) as exc:  # UnicodeDecodeError and JSONDecodeError included
                    if isinstance(exc, UnknownRecordVersion):
                        err = RecordVersionError(path, line_no, exc)
                    else:
                        err = RecordFormatError(path, line_no, f"corrupt rollout record ({exc})")
                else:
                    yield item
                    continue
            if strict:
                raise err
            if errors is not None:
                errors.append(err)
    if on_bytes is not None and pending:
        on_bytes(pending)


def _to_record(obj: Any) -> RolloutRecord:
    return RolloutRecord.from_dict(validate_record(obj))


def iter_records(path: str | Path, strict: bool = False, errors: ErrorSink | None = None) -> Iterator[RolloutRecord]:
    """Stream records from a JSONL dump. Corrupt lines (not JSON, not a record, see
    :func:`validate_record`) and records of an unknown schema version (:class:`RecordVersionError`)
    raise (``strict``) or are collected in ``errors`` (a list, or an :class:`ErrorSample` to keep
    memory bounded) and skipped, each naming its file and line."""
    return _read(path, _to_record, strict, errors, None)


def iter_record_dicts(
    path: str | Path,
    strict: bool = False,
    errors: ErrorSink | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> Iterator[dict[str, Any]]:
    """:func:`iter_records` without building a :class:`RolloutRecord` per line: the validated
    dicts, as read (missing optional fields stay missing). For readers that stream millions of
    lines (``pasr stats``); ``on_bytes`` is called with the bytes read, about every MiB."""
    return _read(path, validate_record, strict, errors, on_bytes)
