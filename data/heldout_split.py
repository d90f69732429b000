"""A training run's data: its training pool and a held-out set that shares no question with it,
whatever the source, decided by content (never by row position).

* **Two splits** (the seeded generators ``synthetic`` and ``countdown``; a known set trained on
  a split other than ``test``, e.g. GSM8K's ``train``): the training pool from that split
  (generators: ``data.seed``), the held-out set from the ``test`` split (generators: the seed
  :func:`data.generated_sets.heldout_seed` gives). A generated problem's split is a hash of its
  text, so the generators' two splits never share one; every source is checked all the same.
* **One pool** (a data file; a known set trained on its ``test`` split, e.g. MATH-500): the
  held-out set is the ``eval_size`` distinct questions whose normalised text hashes lowest
  (:func:`question_key`), and the training pool every other row, in file order. The same file
  gives the same held-out set on every run, and a row's order in the file does not decide it.

In both cases a training row whose normalised question is a held-out question is dropped from
the training pool, never the held-out row: the held-out problems stay the ones earlier runs
were scored on. :attr:`DataSplit.record` says how the split was made, with the sizes and the
dropped rows; the local trainer writes it to ``RUN/data_split.json``.
"""

from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass

from data.dataset_specs import _ALIASES, DATASETS, GENERATED
from data.examples import DatasetError, Example
from data.generated_sets import heldout_seed
from data.loaders import load_examples

HELDOUT_SPLIT = "test"
_SHOWN_IDS = 20  # dropped rows named in the record; the count is always whole


def question_key(question: str) -> str:
    """What makes two questions the same question: the text with Unicode compatibility forms,
    case and runs of whitespace folded (a copy with another line break is the same problem)."""
    return " ".join(unicodedata.normalize("NFKC", question).split()).casefold()


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", errors="surrogatepass")).digest()


@dataclass(frozen=True)
class DataSplit:
    train: list[Example]
    heldout: list[Example]
    record: dict


def split_train_heldout(
    source: str, *, train_size: int, eval_size: int, split: str = "train", seed: int = 0, difficulty: int = 1
) -> DataSplit:
    """The training pool (at most ``train_size`` rows) and the held-out set (at most
    ``eval_size``) of ``source`` (see the module docstring). Raises :class:`DatasetError` when a
    single pool is too small to hold out ``eval_size`` questions and still train on one."""
    known = _ALIASES.get(str(source).lower())
    if known in GENERATED:
        train = load_examples(source, split="train", limit=train_size, seed=seed, difficulty=difficulty)
        heldout = load_examples(
            source, split=HELDOUT_SPLIT, limit=eval_size, seed=heldout_seed(seed), difficulty=difficulty
        )
        how = (
            f"generated: split train of data.seed={seed}, split {HELDOUT_SPLIT} of seed {heldout_seed(seed)} "
            f"(a problem's split is a hash of its content)"
        )
        return _two_splits(source, train, heldout, how)
    if known is not None and split != HELDOUT_SPLIT and split in DATASETS[known].splits:
        train = load_examples(source, split=split, limit=train_size)
        heldout = load_examples(source, split=HELDOUT_SPLIT, limit=eval_size)
        return _two_splits(source, train, heldout, f"splits: {split} for training, {HELDOUT_SPLIT} held out")
    # one pool of rows: a file (its ``split`` is only a label), or a known set's one split
    pool = load_examples(source, split=split if known is not None else "")
    return _one_pool(source, pool, train_size, eval_size)


def _two_splits(source: str, train: list[Example], heldout: list[Example], how: str) -> DataSplit:
    held = {question_key(e.question) for e in heldout}
    kept = [e for e in train if question_key(e.question) not in held]
    dropped = [e for e in train if question_key(e.question) in held]
    return DataSplit(kept, heldout, _record(source, "splits", how, kept, heldout, dropped))


def _one_pool(source: str, pool: list[Example], train_size: int, eval_size: int) -> DataSplit:
    first: dict[str, Example] = {}  # each distinct question's first row
    for e in pool:
        first.setdefault(question_key(e.question), e)
    if eval_size and first and len(first) <= eval_size:  # (no rows at all: the caller's "holds no rows")
        raise DatasetError(
            f"data.source: {source} holds {len(first)} distinct question{'s' * (len(first) != 1)}, and "
            f"data.eval_size={eval_size} would hold out all of them, leaving none to train on (the held-out "
            f"set shares no question with the training pool); lower data.eval_size or add rows"
        )
    held = set(sorted(first, key=_digest)[:eval_size])
    heldout = [e for key, e in first.items() if key in held]  # in file order
    rest = [e for e in pool if question_key(e.question) not in held]
    # rows of a held-out question beyond its first: dropped from training, as in _two_splits
    chosen = {id(e) for e in heldout}
    dropped = [e for e in pool if question_key(e.question) in held and id(e) not in chosen]
    how = (
        f"one pool of {len(pool)} rows: the {len(heldout)} distinct questions whose normalised text hashes "
        f"lowest (sha256) held out, the other rows trained on in file order"
    )
    return DataSplit(rest[:train_size], heldout, _record(source, "hash", how, rest[:train_size], heldout, dropped))


def _record(
    source: str, method: str, how: str, train: list[Example], heldout: list[Example], dropped: list[Example]
) -> dict:
    heldout_hash = hashlib.sha256()  # of the set of questions: the same set in another order, the same hash
    for digest in sorted(_digest(question_key(e.question)) for e in heldout):
        heldout_hash.update(digest)
    return {
        "source": str(source),
        "method": method,
        "how": how,
        "train": len(train),
        "heldout": len(heldout),
        "dropped_from_train": len(dropped),
        "dropped_ids": [e.id for e in dropped[:_SHOWN_IDS]],
        "heldout_questions_sha256": heldout_hash.hexdigest(),
    }


def describe(record: dict) -> str:
    """One line for the console: the sizes, how the set was split, and what was dropped."""
    line = (
        f"{record['train']} training rows and {record['heldout']} held-out rows of {record['source']} ({record['how']})"
    )
    if record["dropped_from_train"]:
        line += f"; {record['dropped_from_train']} training rows dropped: their question is held out"
    return line
