"""Paired eval runs for ``pasr stats``: which questions one system got right that another got wrong.

Accuracy alone hides churn: refining can fix some answers and break others. Each ``pasr eval``
system (run id and method) keeps one correctness flag per (dataset, query id, sample index), a
few bytes per sample (eval sets are small), so that any two can be matched sample by sample
into the wrong->right / right->right / wrong->wrong / right->wrong matrix.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from data.records import PLAIN
from eval.stats import StatsInputError
from eval.significance import sign_test
from eval.stats.counting import rate

TRANSITION_CELLS = ("wrong->right", "right->right", "wrong->wrong", "right->wrong")

System = tuple[str, str]  # (run id, method)
SampleKey = tuple[str, str, int]  # (dataset, query id, sample index)


class PairedOutcomes:
    def __init__(self) -> None:
        self.tables: dict[System, dict[SampleKey, bool | None]] = defaultdict(dict)
        self.duplicate_keys = 0  # a sample seen twice for one system: the later record wins

    def add(self, system: System, key: SampleKey, correct: bool | None) -> None:
        table = self.tables[system]
        if key in table:
            self.duplicate_keys += 1
        table[key] = correct

    def systems(self) -> list[str]:
        return [f"{r}:{m}" for r, m in self.tables]

    def resolve(self, name: str) -> System:
        """``run_id:method`` or a bare ``run_id`` that has exactly one eval method."""
        keys = list(self.tables)
        exact = [k for k in keys if f"{k[0]}:{k[1]}" == name]
        if exact:
            return exact[0]
        by_run = [k for k in keys if k[0] == name]
        if len(by_run) == 1:
            return by_run[0]
        listed = ", ".join(self.systems()) or "none"
        if by_run:
            raise StatsInputError(f"--pair {name!r} is ambiguous: give run_id:method (eval runs: {listed})")
        raise StatsInputError(f"--pair {name!r} names no eval run (eval runs: {listed})")

    def auto_pairs(self) -> list[tuple[System, System]]:
        """Exactly two eval runs: compare them, the plain one (if any) as the 'before'."""
        keys = list(self.tables)
        if len(keys) != 2:
            return []
        a, b = keys
        if b[1] == PLAIN and a[1] != PLAIN:
            a, b = b, a
        return [(a, b)]

    def transition(self, a: System, b: System) -> dict[str, Any]:
        """The transition matrix from system ``a`` (before) to ``b`` (after) over the samples both
        judged, with the sample ids in each cell, and ``p_sign``: the two-sided exact sign test
        on the discordant cells (wrong->right against right->wrong), so a net gain of a few
        questions is not read as a difference. It treats samples as independent, which
        several samples of one question (``--samples``) are not: there it is indicative only."""
        ta, tb = self.tables[a], self.tables[b]
        cells: dict[str, list[str]] = {c: [] for c in TRANSITION_CELLS}
        by_dataset: dict[str, dict[str, int]] = {}
        unjudged: list[str] = []
        for k in sorted(set(ta) & set(tb), key=lambda k: (k[0], k[1], k[2])):
            qid = f"{k[0]}/{k[1]}#{k[2]}"
            ca, cb = ta[k], tb[k]
            if ca is None or cb is None:
                unjudged.append(qid)
                continue
            cell = f"{'right' if ca else 'wrong'}->{'right' if cb else 'wrong'}"
            cells[cell].append(qid)
            ds = by_dataset.setdefault(k[0], {c: 0 for c in TRANSITION_CELLS})
            ds[cell] += 1
        n_pairs = sum(len(v) for v in cells.values())
        return {
            "before": f"{a[0]}:{a[1]}",
            "after": f"{b[0]}:{b[1]}",
            "counts": {c: len(v) for c, v in cells.items()},
            "query_ids": cells,
            "by_dataset": by_dataset,
            "n_pairs": n_pairs,
            "unjudged": unjudged,
            "only_before": len(set(ta) - set(tb)),
            "only_after": len(set(tb) - set(ta)),
            "acc_before": rate(len(cells["right->right"]) + len(cells["right->wrong"]), n_pairs),
            "acc_after": rate(len(cells["right->right"]) + len(cells["wrong->right"]), n_pairs),
            "net_gain": len(cells["wrong->right"]) - len(cells["right->wrong"]),
            "p_sign": sign_test(len(cells["wrong->right"]), len(cells["right->wrong"])),
        }
