"""The one pass of ``pasr stats``: every record dict goes through :meth:`Collector.add` once.

Nothing here holds the responses of a dump (see :mod:`eval.stats.counting`). Per record the
work is the parse of its response (:class:`~eval.stats.response_facts.ResponseFacts`) and
counter updates in three places: its group (every record), its step's trend (training and
in-training evaluation records) and its system's outcome table (``pasr eval`` records and
in-training evaluations: :mod:`eval.stats.pairing`).
Reflect, Retry, Reward records (:func:`eval.stats.rrr.is_rrr`) go to :class:`~eval.stats.rrr.RrrStats`
instead of the PASR step trends (``pasr eval`` ones to the outcome table as well).
Records come already validated from :func:`data.records.iter_record_dicts`; no
``RolloutRecord`` is built per line.
"""

from __future__ import annotations

import random
from dataclasses import asdict

from data.records import PLAIN, REFINE, RolloutRecord
from eval.stats.groups import KIND_ORDER, TAG_ORDER, GroupStats, group_key, method_of
from eval.stats.pairing import PairedOutcomes, System
from eval.stats.response_facts import ResponseFacts
from eval.stats.rrr import RrrStats, is_rrr
from eval.stats.trends import Trends
from rewards.refine_quality import CORRECT_AT


class Collector:
    def __init__(self, *, n_examples: int = 3, correct_at: float = CORRECT_AT, seed: int = 0):
        self.n_examples = n_examples
        self.correct_at = correct_at
        self.rng = random.Random(seed)  # one stream for every group's example reservoirs
        self.groups: dict[tuple, GroupStats] = {}
        self.trends = Trends()
        self.pairs = PairedOutcomes()
        self.rrr = RrrStats(n_examples, self.rng)
        self.n_records = 0

    def group(self, kind: str, run_id: str, dataset: str | None, name: str) -> GroupStats:
        key = (kind, run_id, dataset, name)
        g = self.groups.get(key)
        if g is None:
            g = self.groups[key] = GroupStats(kind, run_id, dataset, name, self.n_examples, self.rng, is_rrr(name))
        return g

    def ordered_groups(self) -> list[GroupStats]:
        """Training groups first (refine before plain), then in-training evaluations (the local
        engine's in the order it runs them: base, warmup, final), then eval, then other; stable within."""
        names = {REFINE: 0, "pasr": 0, PLAIN: 1}
        return sorted(
            self.groups.values(),
            key=lambda g: (
                KIND_ORDER[g.kind],
                g.run_id,
                TAG_ORDER.get(g.dataset, len(TAG_ORDER)),
                g.dataset or "",
                names.get(g.name, 2),
                g.name,
            ),
        )

    def add_record(self, rec: RolloutRecord) -> None:
        """Add one :class:`RolloutRecord` (tests, in-process callers)."""
        self.add(asdict(rec))

    def add(self, rec: dict, where: str | None = None) -> None:
        """Add one record dict (as :func:`data.records.iter_record_dicts` reads it); ``where``: the
        run directory of its file (:func:`eval.stats.discovery.run_dir`), which names its system."""
        self.n_records += 1
        key = group_key(rec)
        facts = ResponseFacts(rec, self.correct_at)
        g = self.group(*key)
        g.add(rec, facts)
        kind, run_id, dataset, name = key
        if kind == "eval":
            self.pairs.add(
                System(run_id, name, where=where),
                (dataset, str(rec["query_id"]), rec.get("sample_index", 0)),
                facts.correct,
            )
        elif kind == "val" and not g.rrr:
            self.pairs.add(
                System(run_id, method_of(name), dataset, rec["step"], where),
                (rec["data_source"], str(rec["query_id"]), rec.get("sample_index", 0)),
                facts.correct,
            )
        if g.rrr:
            self.rrr.add(kind, rec)
        elif kind != "eval":
            self.trends.add(kind, rec, facts)
