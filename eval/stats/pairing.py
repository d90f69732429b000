"""Paired evaluations for ``pasr stats``: which questions one system got right that another got wrong.

Accuracy alone hides churn: refining can fix some answers and break others. Each system keeps one
correctness flag per sample, a few bytes per sample (evaluations are small), so that any two can
be matched sample by sample into the wrong->right / right->right / wrong->wrong / right->wrong
matrix. A system is a ``pasr eval`` run's method, keyed by (dataset, query id, sample index), or
one in-training evaluation of a training run (the local engine's ``eval/<tag>.jsonl``, verl's
``val_step_*``: its dataset or tag and step), keyed by (data source, query id, sample index), so
that a run's warm-up and final evaluations of the same questions match.

Which one is BEFORE is never taken from the order of the arguments: ``--pair BEFORE AFTER``, or
what the runs record (:meth:`PairedOutcomes.auto_pairs`): a plain run is the baseline; two
``pasr eval`` runs of checkpoints of one training run are in step order (their ``summary.json``);
a training run's in-training evaluations are in step order. Anything else is left unpaired, with
a note that says so. Every pair carries the reason for its order, and systems are labelled by
their run directory (:mod:`eval.stats.runs`), not by a run id that many runs share.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from data.records import PLAIN
from eval.significance import sign_test
from eval.stats import StatsInputError
from eval.stats.counting import rate
from eval.stats.groups import TAG_ORDER
from eval.stats.runs import RunInfo, display, read_run

TRANSITION_CELLS = ("wrong->right", "right->right", "wrong->wrong", "right->wrong")
MAX_CHAINED = 3  # a run's in-training evaluations paired one after another up to this many; more: first vs last

SampleKey = tuple[str, str, int]  # (dataset or data source, query id, sample index)


class System(NamedTuple):
    """One table of answers: a ``pasr eval`` run's method, or one in-training evaluation."""

    run_id: str
    method: str  # the eval method; an in-training evaluation's: pasr (refine rollouts) or plain
    dataset: str | None = None  # in-training evaluation: its dataset or tag (base, warmup, final)
    step: int | None = None  # in-training evaluation: the training step it was made at
    where: str | None = None  # the run directory the records came from (resolved), when known

    @property
    def in_training(self) -> bool:
        return self.step is not None


@dataclass(frozen=True)
class Pairing:
    before: System
    after: System
    why: str  # why this one is BEFORE, in words


def _base_name(s: System, run: str) -> str:
    return f"{run}/{s.dataset}@{s.step}:{s.method}" if s.in_training else f"{run}:{s.method}"


class PairedOutcomes:
    def __init__(self) -> None:
        self.tables: dict[System, dict[SampleKey, bool | None]] = defaultdict(dict)
        self.duplicate_keys = 0  # a sample seen twice for one system: the later record wins
        self._runs: dict[str, RunInfo] = {}

    def add(self, system: System, key: SampleKey, correct: bool | None) -> None:
        table = self.tables[system]
        if key in table:
            self.duplicate_keys += 1
        table[key] = correct

    # ------------------------------------------------------------------ names and labels

    def run_info(self, s: System) -> RunInfo | None:
        if s.where is None:
            return None
        info = self._runs.get(s.where)
        if info is None:
            info = self._runs[s.where] = read_run(s.where)
        return info

    def names(self) -> dict[System, str]:
        """What ``--pair`` accepts for each system: ``RUN_ID:METHOD`` (in-training:
        ``RUN_ID/TAG@STEP:METHOD``); a run id that two directories share is replaced by the directory."""
        base = {s: _base_name(s, s.run_id) for s in self.tables}
        seen = defaultdict(int)
        for n in base.values():
            seen[n] += 1
        return {s: _base_name(s, display(s.where)) if seen[n] > 1 and s.where else n for s, n in base.items()}

    def label(self, s: System) -> str:
        """A system for people: its run directory, method and the step of its weights when known."""
        info = self.run_info(s)
        where = info.label if info else s.run_id
        if s.in_training:
            return f"{where} · {s.dataset} evaluation at step {s.step} ({s.method})"
        ckpt = info.checkpoint_words() if info else ""
        return f"{where} ({s.method}, {ckpt})" if ckpt else f"{where} ({s.method})"

    def systems(self) -> list[str]:
        """The ``pasr eval`` systems' names (stats.json ``eval_runs``)."""
        names = self.names()
        return [names[s] for s in self.tables if not s.in_training]

    def evaluations(self) -> list[str]:
        """The in-training evaluations' names."""
        names = self.names()
        return [names[s] for s in self.tables if s.in_training]

    def resolve(self, name: str) -> System:
        """A system by its name (:meth:`names`), its name without ``:METHOD`` when that leaves
        one, or a ``pasr eval`` run's directory when it has one method."""
        names = self.names()
        exact = [s for s, n in names.items() if n == name]
        if exact:
            return exact[0]
        path = str(Path(name).resolve())
        by_run = [s for s, n in names.items() if n.rsplit(":", 1)[0] == name or (not s.in_training and s.where == path)]
        if len(by_run) == 1:
            return by_run[0]
        listed = ", ".join(names.values()) or "none"
        if by_run:
            raise StatsInputError(f"--pair {name!r} is ambiguous: give NAME:METHOD (runs: {listed})")
        raise StatsInputError(f"--pair {name!r} names no eval run or in-training evaluation (runs: {listed})")

    # ------------------------------------------------------------------ which is BEFORE

    def auto_pairs(self) -> tuple[list[Pairing], list[str]]:
        """The pairs whose order the inputs record (module docstring), ``pasr eval`` ones first,
        and a note for each set of evaluations left unpaired because nothing orders them."""
        pairs: list[Pairing] = []
        notes: list[str] = []
        evals = [s for s in self.tables if not s.in_training]
        names = self.names()
        if len(evals) == 2:
            pairing = self._ordered(*evals)
            if pairing is not None:
                pairs.append(pairing)
            else:
                notes.append(
                    f"eval runs `{names[evals[0]]}` and `{names[evals[1]]}` not compared: nothing they record "
                    "orders them (neither is plain; their summary.json name no two steps of one training run), "
                    "and the order of the arguments is no order; pass --pair BEFORE AFTER"
                )
        elif len(evals) > 2:
            notes.append(
                f"{len(evals)} eval runs ({', '.join(f'`{names[s]}`' for s in evals)}); "
                "pass --pair BEFORE AFTER to compare two"
            )
        pairs += self._in_training_pairs()
        return pairs, notes

    def _ordered(self, a: System, b: System) -> Pairing | None:
        """Two ``pasr eval`` systems in the order they record, or None."""
        plain = [s for s in (a, b) if s.method == PLAIN]
        if len(plain) == 1:
            before = plain[0]
            return Pairing(before, b if before == a else a, "the plain run is the baseline")
        ia, ib = self.run_info(a), self.run_info(b)
        if ia is None or ib is None or ia.checkpoint_step is None or ib.checkpoint_step is None:
            return None
        if (
            ia.checkpoint_run is None
            or ia.checkpoint_run != ib.checkpoint_run
            or ia.checkpoint_step == ib.checkpoint_step
        ):
            return None
        (before, lo), (after, hi) = sorted([(a, ia.checkpoint_step), (b, ib.checkpoint_step)], key=lambda t: t[1])
        return Pairing(
            before,
            after,
            f"checkpoint step {lo} before step {hi} of training run {display(ia.checkpoint_run)} (their summary.json)",
        )

    def _in_training_pairs(self) -> list[Pairing]:
        """Each training run's in-training evaluations of refine rollouts, in step order: one after
        another (up to :data:`MAX_CHAINED`), else the first against the last."""
        by_run: dict[tuple, list[System]] = defaultdict(list)
        for s in self.tables:
            if s.in_training and s.method != PLAIN:
                by_run[(s.run_id, s.where)].append(s)
        pairs = []
        for evals in by_run.values():
            evals.sort(key=lambda s: (s.step, TAG_ORDER.get(s.dataset, len(TAG_ORDER)), s.dataset))
            chain = list(zip(evals, evals[1:])) if len(evals) <= MAX_CHAINED else [(evals[0], evals[-1])]
            for a, b in chain:
                if a.step != b.step:
                    pairs.append(
                        Pairing(a, b, f"in-training evaluations of one run, by step ({a.step} before {b.step})")
                    )
                elif a.dataset in TAG_ORDER and b.dataset in TAG_ORDER:
                    pairs.append(
                        Pairing(
                            a,
                            b,
                            f"in-training evaluations of one run at step {a.step}: "
                            f"{a.dataset} before {b.dataset}, the order the trainer runs them",
                        )
                    )
        return pairs

    def transition(self, pairing: Pairing) -> dict[str, Any]:
        """The transition matrix from ``pairing.before`` to ``pairing.after`` over the samples both
        judged, with the sample ids in each cell, and ``p_sign``: the two-sided exact sign test
        on the discordant cells (wrong->right against right->wrong), so a net gain of a few
        questions is not read as a difference. It treats samples as independent, which
        several samples of one question (``--samples``) are not: there it is indicative only."""
        a, b = pairing.before, pairing.after
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
            "before": self.names()[a],
            "after": self.names()[b],
            "before_label": self.label(a),
            "after_label": self.label(b),
            "order": pairing.why,
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
