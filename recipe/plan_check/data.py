"""The run's data files: there, verl RL parquet, read through the loaders, rows to train on, and
validation files that are not the training files."""

from __future__ import annotations

import os
from pathlib import Path

from recipe.plan_check.compose import select
from recipe.plan_check.report import Report, short

KEYS = ("data.train_files", "data.val_files")


def data_files(config, key: str) -> list[str] | None:
    """The files of ``key`` (a name or a list); None when it is unset."""
    value = select(config, key)
    if value is None:
        return None
    if isinstance(value, str):
        return [value] if value else []
    return [str(v) for v in value]


def _same_file(a: str, b: str) -> bool:
    pa, pb = Path(os.path.expanduser(a)), Path(os.path.expanduser(b))
    try:
        return pa.resolve() == pb.resolve() or (pa.exists() and pb.exists() and pa.samefile(pb))
    except OSError:
        return False


def check_data(config, report: Report, rows: int, here: bool = True, batch: int | None = None) -> int | None:
    """Each of ``data.train_files`` / ``data.val_files``: there, a verl RL parquet, its first rows
    read through the loaders, some rows in it; no validation file that is a training file (its
    scores would be the training rows'); at least ``batch`` training rows (verl drops a partial
    batch). With ``here`` false (the run is a job elsewhere) a file not on this machine is a note.
    Returns the training rows (None when unknown)."""
    from data.examples import DatasetError
    from data.loaders import load_file
    from data.verl_parquet import parquet_rows, rl_file_problem

    prompt_key = str(select(config, "data.prompt_key", "prompt"))
    train_rows: int | None = 0
    files = {key: data_files(config, key) for key in KEYS}
    for key, names in files.items():
        if not names:
            report.fail(
                "data",
                f"{key}={select(config, key)}: no file, so no row to "
                + ("train on" if key == "data.train_files" else "validate on")
                + "; name the parquet `pasr data prepare` wrote",
            )
            train_rows = None if key == "data.train_files" else train_rows
    for val in files["data.val_files"] or []:
        same = next((t for t in files["data.train_files"] or [] if _same_file(t, val)), None)
        if same is not None:
            report.fail(
                "data",
                f"data.val_files={val} is also in data.train_files ({same}): validation would score the rows the "
                "run trains on; validate on a held-out split (pasr data prepare --split test)",
            )
    for key, names in files.items():
        split = "train" if key == "data.train_files" else "test"
        for name in names or []:
            path = Path(os.path.expanduser(name))
            if not path.is_file():
                if not here and not path.exists():
                    report.note("data", f"{key}={name}: not on this machine (the job reads it there); not checked")
                    train_rows = None if key == "data.train_files" else train_rows
                    continue
                report.fail(
                    "data",
                    f"{key}={name}: no such file here; `pasr data prepare --dataset NAME_OR_FILE --split {split} "
                    "--out DIR` writes DIR/<name>_" + split + ".parquet (or run pasr check where the file is)",
                )
                train_rows = None if key == "data.train_files" else train_rows
                continue
            if path.suffix.lower() != ".parquet":
                report.fail(
                    "data",
                    f"{key}={name}: verl reads parquet; write one with `pasr data prepare --dataset {name} --out DIR`",
                )
                train_rows = None if key == "data.train_files" else train_rows
                continue
            why = rl_file_problem(path, prompt_key, rows)
            first = []
            if why is None:
                try:
                    first = load_file(path, limit=rows)
                except DatasetError as exc:
                    why = str(exc)
            n = parquet_rows(path) if why is None else 0
            if why is None and n == 0:
                why = f"0 rows: nothing to {'train on' if split == 'train' else 'validate on'}"
            if why:
                report.fail("data", f"{key}={name}: {why}")
                train_rows = None if key == "data.train_files" else train_rows
                continue
            if key == "data.train_files" and train_rows is not None:
                train_rows += n
            sample = first[0] if first else None
            shown = f'; row 1: "{short(sample.question, 60)}" -> gold {short(sample.answer, 30)}' if sample else ""
            report.ok("data", f"{key}={name}: {n} rows, read through the loaders{shown}")
    if train_rows is not None and batch is not None and train_rows < batch:
        report.fail(
            "data",
            f"data.train_files hold {train_rows} rows, fewer than data.train_batch_size={batch}: verl's loader "
            "drops a partial batch, so there is no step to train",
        )
    return train_rows


def first_golds(config, rows: int) -> list[str]:
    """The golds of the first training rows (what ``hybrid`` sends to the LLM judge)."""
    from data.examples import DatasetError
    from data.loaders import load_file

    golds = []
    for name in data_files(config, "data.train_files") or []:
        try:
            golds += [e.answer for e in load_file(os.path.expanduser(name), limit=max(rows, 20))]
        except (DatasetError, OSError):
            pass
    return golds
