"""The run directory of ``pasr eval``: finished samples, and the settings they were made with.

``samples.jsonl`` gets each finished batch appended at once, so an interrupted run loses at
most the batch in flight. On restart the finished samples, keyed by (dataset, query id,
sample index), are skipped; samples whose *judge* failed are re-judged (their generation is
kept), and the file is rewritten with one record per key. One run at a time holds the
directory (``.lock``, an ``flock``): two runs into one ``--out`` would both append every
sample. ``run.json`` holds the settings that decide *how* a sample is
produced and scored (model, method, backend, sampling, prompts, judge) and their fingerprint;
a restart with other settings is refused, since mixing them would make the summary
meaningless. Settings that only decide *which* samples exist (``--dataset``, ``--limit``,
``--samples``) may change between restarts: the run is extended (or summarised on a subset).
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

    def saved_settings(self) -> dict[str, Any] | None:
        if not self.run_path.is_file():
            return None
        try:
            return json.loads(self.run_path.read_text(encoding="utf-8"))["settings"]
        except (ValueError, KeyError, TypeError):
            raise ResumeError(f"{self.run_path} is corrupt; delete it (and {SAMPLES_FILE}) or use another --out") from None

    def check(self, settings: dict[str, Any]) -> bool:
        """True when this is a resume. Raises :class:`ResumeError` when the directory holds
        another run's samples."""
        saved = self.saved_settings()
        if saved is None:
            if self.samples_path.is_file() and self.samples_path.stat().st_size > 0:
                raise ResumeError(
                    f"{self.path} has {SAMPLES_FILE} but no {RUN_FILE}, so its settings are unknown; "
                    "use another --out or delete the directory"
                )
            return False
        if fingerprint(saved) == fingerprint(settings):
            return True
        diffs = [
            f"{k}: {_short(saved.get(k))} there, {_short(settings.get(k))} now"
            for k in sorted(set(saved) | set(settings))
            if saved.get(k) != settings.get(k)
        ]
        raise ResumeError(
            f"{self.path} holds a run made with other settings ({'; '.join(diffs)}); "
            "rerun with the same arguments to resume, or choose another --out"
        )

    def save_settings(self, settings: dict[str, Any]) -> None:
        replace_text(
            self.run_path,
            json.dumps({"fingerprint": fingerprint(settings), "settings": settings}, indent=2, sort_keys=True) + "\n",
        )

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
