"""Write examples as verl's RL parquet (the input of ``RLHFDataset`` / ``data.train_files``).

One row per example, in verl's data-preprocess convention:

* ``data_source``: str, the example's data source (``gsm8k``, ``synthetic``, ...)
* ``prompt``: list of chat messages ``{"role", "content"}``: system = the refine system prompt
  text (omitted when empty), user = the question
* ``ability``: str, ``"math"`` by default
* ``reward_model``: ``{"style": "rule", "ground_truth": <gold answer>}``
* ``extra_info``: ``{"index": int, "id": str, "question": str, "split": str}``

verl 0.9.1's ``RLHFDataset`` hands ``prompt`` to the rollout as ``raw_prompt`` (the chat
template is applied in the agent loop) and reads ``extra_info.index``; the reward function gets
``data_source``, ``reward_model.ground_truth`` and ``extra_info``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from data.examples import Example
from prompts import build_chat

COLUMNS = ("data_source", "prompt", "ability", "reward_model", "extra_info")


def _schema():
    import pyarrow as pa

    return pa.schema(
        [
            ("data_source", pa.string()),
            ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
            ("ability", pa.string()),
            ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
            (
                "extra_info",
                pa.struct(
                    [("index", pa.int64()), ("id", pa.string()), ("question", pa.string()), ("split", pa.string())]
                ),
            ),
        ]
    )


def rl_row(
    example: Example, index: int, system_prompt: str | None, ability: str = "math", split: str | None = None
) -> dict[str, Any]:
    """One parquet row for one example."""
    return {
        "data_source": example.data_source,
        "prompt": build_chat(system_prompt, example.question),
        "ability": ability,
        "reward_model": {"style": "rule", "ground_truth": example.answer},
        "extra_info": {
            "index": index,
            "id": example.id,
            "question": example.question,
            "split": split if split is not None else str(example.extra.get("split") or ""),
        },
    }


def write_rl_parquet(
    examples: Iterable[Example],
    path: str | Path,
    system_prompt: str | None,
    ability: str = "math",
    split: str | None = None,
    metadata: dict[bytes, bytes] | None = None,
) -> Path:
    """Write the rows and return the path. ``split`` overrides each example's ``extra["split"]``;
    ``metadata`` goes into the file's schema (:mod:`data.prepared_from` records the source there).
    The file is written beside its target and renamed into place, so a reader never sees half
    a file."""
    import pyarrow as pa

    rows = [rl_row(ex, i, system_prompt, ability, split) for i, ex in enumerate(examples)]
    schema = _schema().with_metadata(metadata) if metadata else _schema()
    return write_table_atomic(pa.Table.from_pylist(rows, schema=schema), path)


def write_table_atomic(table, path: str | Path) -> Path:
    """Write a pyarrow table beside ``path``, then rename it into place: a reader never sees
    half a file. Every parquet this project writes goes through here."""
    import pyarrow.parquet as pq

    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    # A plain per-process name rather than mkstemp: mkstemp creates the file 0600, which
    # the rename would carry over, so a data file meant for a shared cluster would be
    # unreadable to everyone else; created normally, the file follows the umask.
    tmp = str(path.parent / f".{path.name}.{os.getpid()}.tmp")
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def read_rl_parquet(path: str | Path) -> list[dict[str, Any]]:
    """The rows of an RL parquet file as plain dicts (for checks and previews)."""
    import pyarrow.parquet as pq

    return pq.read_table(Path(path).expanduser()).to_pylist()


def rl_file_problem(path: str | Path, prompt_key: str = "prompt", rows: int = 3) -> str | None:
    """Why verl's ``RLHFDataset`` and the PASR rollout cannot train on the parquet ``path``, from
    its schema and first ``rows`` rows, or None. They read ``prompt_key`` (``data.prompt_key``)
    as chat messages (the chat template is applied to them), ``reward_model.ground_truth`` as the
    gold and ``data_source``; a file of another layout (a plain question/answer parquet, DAPO's
    processed text prompts) needs ``pasr data prepare`` first."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(Path(path).expanduser())
    except Exception as exc:  # pyarrow raises several types for a broken file
        return f"not a readable parquet file ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    missing = [c for c in (prompt_key, "reward_model", "data_source") if c not in pf.schema_arrow.names]
    if missing:
        return f"no column {', '.join(missing)}: not a verl RL file (write one with pasr data prepare --dataset FILE)"
    first = next(pf.iter_batches(batch_size=max(1, rows), columns=[prompt_key, "reward_model"]), None)
    for i, row in enumerate(first.to_pylist() if first is not None else [], start=1):
        prompt = row[prompt_key]
        if not isinstance(prompt, list) or not all(
            isinstance(m, dict) and {"role", "content"} <= set(m) for m in prompt
        ):
            return (
                f"row {i}: {prompt_key} is not a list of chat messages {{role, content}} "
                "(pasr data prepare writes them)"
            )
        if not isinstance(row["reward_model"], dict) or row["reward_model"].get("ground_truth") in (None, ""):
            return f"row {i}: reward_model.ground_truth is empty"
    return None


def parquet_rows(path: str | Path) -> int:
    """The row count of a parquet file, from its footer (nothing else is read)."""
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(Path(path).expanduser()).metadata.num_rows)
