"""Which source a file ``pasr data prepare`` wrote came from, kept in the parquet's own metadata.

``--out DIR`` names a file by its source's stem and split (``DIR/<stem>_<split>.parquet``), so two
sources with one stem (``a/train.jsonl`` and ``b/train.jsonl``) map to one file, and the second
prepare used to replace the first without a word. Each prepared file now records its source
(:data:`KEY`: a data file's absolute path, a known set's name); preparing a *different* source
onto it is refused, naming both, while preparing the same source again replaces it (a rerun, a
job that prepares its data every time). A file without the record (written before it existed,
or not by ``pasr data prepare``) is replaced as before.
"""

from __future__ import annotations

from pathlib import Path

KEY = b"pasr.prepared_from"


def source_identity(dataset: str) -> str:
    """What a ``--dataset`` value names: a known set by its canonical name (``openai/gsm8k`` is
    ``gsm8k``), a data file by its absolute path."""
    from data.dataset_specs import get_dataset
    from data.examples import DatasetError

    try:
        return get_dataset(dataset).name  # a known name wins over a file of that name, as in the loaders
    except DatasetError:
        return str(Path(dataset).expanduser().resolve())


def recorded_source(path: Path) -> str | None:
    """The source recorded in the prepared file ``path``, None when it has none (or is no
    readable parquet)."""
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(path).metadata or {}
    except Exception:  # pyarrow raises several types for a broken file: nothing recorded
        return None
    value = meta.get(KEY)
    return value.decode("utf-8", "replace") if value else None


def replace_problem(out: Path, dataset: str) -> str | None:
    """Why preparing ``dataset`` must not replace ``out``, or None."""
    if not out.is_file():
        return None
    before = recorded_source(out)
    now = source_identity(dataset)
    if before is None or before == now:
        return None
    return (
        f"{out} holds the rows of {before}; {now} has the same name there ({out.name}), so writing it would "
        f"replace them: prepare it into another --out folder, or delete {out} first"
    )
