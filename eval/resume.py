"""The run directory of ``pasr eval``: finished samples, and the settings they were made with.

``samples.jsonl`` gets each finished batch appended at once, so an interrupted run loses at
most the batch in flight. On restart the finished samples, keyed by (dataset, query id,
sample index), are skipped; samples whose *judge* failed are re-judged (their generation is
kept), and the file is rewritten with one record per key. One run at a time holds the
directory (``.lock``, an ``flock``): two runs into one ``--out`` would both append every
sample. ``run.json`` holds the settings that decide *how* a sample is
produced and scored and their fingerprint: the model's identity (its training step and a digest
of its weights, :mod:`eval.identity`, not the ``--model`` text), method, backend, the runtime the
backend decided (dtype, threads, device), sampling, prompts (by their text's hash), judge. A
restart with other settings is refused with what differs, since mixing them would make the
summary meaningless; a runtime setting left to ``auto`` takes the run's recorded choice
(:func:`adopt_runtime`), so a probe that decides otherwise today does not block a resume.
Settings that only decide *which* samples exist (``--dataset``, ``--limit``, ``--samples``) may
change between restarts: the run is extended (or summarised on a subset). ``run.json`` also
records where each dataset was read from: one label read from another file (``a/test.jsonl``,
then ``b/test.jsonl``) is refused. Rows of the same file that changed since their samples were
made are found by content (:func:`changed_rows`): a changed question is answered again, a
changed gold answer judged again.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from data.atomic_write import replace_text
from data.records import RecordFormatError, RolloutRecord, iter_records, write_records
from recipe.run_lock import DirectoryInUse, RunLock

SAMPLES_FILE = "samples.jsonl"
RUN_FILE = "run.json"

Key = tuple[str, str, int]


def record_key(rec: RolloutRecord) -> Key:
    return (rec.dataset or rec.data_source, rec.query_id, int(rec.sample_index))


def is_generation_error(rec: RolloutRecord) -> bool:
    return bool(rec.extra.get("error"))


def is_judge_error(rec: RolloutRecord) -> bool:
    """A generated sample whose judge failed: it can be re-judged without regenerating."""
    return rec.judge_error is not None and not is_generation_error(rec)


def fingerprint(settings: dict[str, Any]) -> str:
    blob = json.dumps(settings, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


class ResumeError(ValueError):
    """The directory holds a run that cannot be resumed with these settings (one line)."""


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def differences(saved: dict[str, Any], now: dict[str, Any], prefix: str = "") -> list[str]:
    """``key: X there, Y now`` for each setting that differs, nested keys spelt ``model.step``."""
    out = []
    for k in sorted(set(saved) | set(now)):
        a, b = saved.get(k), now.get(k)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            out += differences(a, b, f"{prefix}{k}.")
        else:
            out.append(f"{prefix}{k}: {_short(a)} there, {_short(b)} now")
    return out


RUNTIME_AUTO = (None, "auto", 0)  # a runtime setting the backend decides


def adopt_runtime(asked: dict[str, Any], saved_settings: dict[str, Any] | None) -> dict[str, Any]:
    """The runtime settings to resume with: each one asked for (``--dtype``, ``--threads``,
    ``--device``) as asked, each one left to ``auto`` as the run decided it at its start (the
    probes may decide otherwise on a busier machine, and a resume must answer as the run began)."""
    saved = (saved_settings or {}).get("runtime") or {}
    return {k: saved[k] if v in RUNTIME_AUTO and saved.get(k) not in RUNTIME_AUTO else v for k, v in asked.items()}


def changed_rows(selection, done: dict[Key, RolloutRecord]) -> tuple[list, list]:
    """Of the finished samples of ``selection`` (items with a ``key`` and an ``example``), those
    whose row changed in the data since they were made: (question changed: to be answered again;
    only the gold answer changed: to be judged again). A record keeps the question and gold it
    was made with (``prompt``, ``gold``)."""
    asked, judged = [], []
    for it in selection:
        rec = done.get(it.key)
        if rec is None:
            continue
        if rec.prompt != it.example.question:
            asked.append(it)
        elif rec.gold != it.example.answer:
            judged.append(it)
    return asked, judged


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.samples_path = self.path / SAMPLES_FILE
        self.run_path = self.path / RUN_FILE
        self._lock = RunLock(self.path, "pasr eval")

    def lock(self) -> None:
        """Hold the directory for this process until :meth:`unlock` (or exit;
        :mod:`recipe.run_lock`). The directory must exist. Raises :class:`ResumeError` when
        another run holds it."""
        try:
            self._lock.acquire()
        except DirectoryInUse as exc:
            raise ResumeError(f"{exc}; wait for it to finish or choose another --out") from None

    def unlock(self) -> None:
        self._lock.release()

    def _saved(self) -> dict[str, Any] | None:
        if not self.run_path.is_file():
            return None
        try:
            saved = json.loads(self.run_path.read_text(encoding="utf-8"))
            if not isinstance(saved["settings"], dict) or not isinstance(saved.get("datasets", {}), dict):
                raise TypeError
            return saved
        except (OSError, ValueError, KeyError, TypeError):
            raise ResumeError(
                f"{self.run_path} is corrupt; delete it (and {SAMPLES_FILE}) or use another --out"
            ) from None

    def saved_settings(self) -> dict[str, Any] | None:
        saved = self._saved()
        return None if saved is None else saved["settings"]

    def check(self, settings: dict[str, Any], sources: dict[str, str] | None = None) -> bool:
        """True when this is a resume. Raises :class:`ResumeError` when the directory holds
        another run's samples: other settings, or a dataset of the same name read from another
        file (``sources``: dataset label -> where it was read from)."""
        saved = self._saved()
        if saved is None:
            if self.samples_path.is_file() and self.samples_path.stat().st_size > 0:
                raise ResumeError(
                    f"{self.path} has {SAMPLES_FILE} but no {RUN_FILE}, so its settings are unknown; "
                    "use another --out or delete the directory"
                )
            return False
        if "runtime" not in saved["settings"]:
            raise ResumeError(
                f"{self.path} was written by an older pasr eval, which did not record what decided its answers "
                "(the checkpoint's content, the dtype decided); choose another --out (or delete it to start over)"
            )
        if fingerprint(saved["settings"]) != fingerprint(settings):
            raise ResumeError(
                f"{self.path} holds answers made with other settings "
                f"({'; '.join(differences(saved['settings'], settings))}); "
                "rerun with those settings to resume, or choose another --out (or delete it to start over)"
            )
        for label, source in (sources or {}).items():
            before = saved.get("datasets", {}).get(label)
            if before is not None and before != source:
                raise ResumeError(
                    f"{self.path} holds answers to dataset {label!r} read from {before}, not {source}; "
                    "choose another --out for this one (or rename the file)"
                )
        return True

    def save_settings(self, settings: dict[str, Any], sources: dict[str, str] | None = None) -> None:
        """Write ``run.json``: the settings, their fingerprint, and where each dataset was read
        from (added to those already recorded)."""
        saved = self._saved() if self.run_path.is_file() else None
        datasets = {**((saved or {}).get("datasets") or {}), **(sources or {})}
        doc = {"fingerprint": fingerprint(settings), "settings": settings, "datasets": datasets}
        replace_text(self.run_path, json.dumps(doc, indent=2, sort_keys=True) + "\n")

    def _repair_tail(self) -> None:
        """Drop a half-written last line (a run killed mid-write), so appends start clean."""
        if not self.samples_path.is_file():
            return
        with self.samples_path.open("rb+") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            if size == 0:
                return
            fh.seek(size - 1)
            if fh.read(1) == b"\n":
                return
            data = self.samples_path.read_bytes()
            fh.truncate(data.rfind(b"\n") + 1)

    def load(self, retry_errors: bool = False) -> tuple[dict[Key, RolloutRecord], list[RecordFormatError]]:
        """Finished samples by key (the last record of a key wins) and any corrupt lines.
        ``retry_errors`` removes generation-error records from the file so they are redone.
        A key written more than once (a re-judged sample, see :meth:`append`) is compacted to
        its last record, so readers of the file (``pasr stats``) see each sample once."""
        self._repair_tail()
        if not self.samples_path.is_file():
            return {}, []
        errors: list[RecordFormatError] = []
        done: dict[Key, RolloutRecord] = {}
        n_lines = 0
        for rec in iter_records(self.samples_path, errors=errors):
            done[record_key(rec)] = rec
            n_lines += 1
        rewrite = n_lines != len(done)
        if retry_errors and any(is_generation_error(r) for r in done.values()):
            done = {k: r for k, r in done.items() if not is_generation_error(r)}
            rewrite = True
        if rewrite:
            self.rewrite(done.values())
        return done, errors

    def append(self, records: list[RolloutRecord]) -> None:
        """Append finished records; a record for a key already in the file supersedes it."""
        write_records(self.samples_path, records, append=True)

    def rewrite(self, records) -> None:
        """Replace the file with ``records`` (written beside it, then renamed: all or nothing)."""
        write_records(self.samples_path, records, append=False)
