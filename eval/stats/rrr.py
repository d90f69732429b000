"""Reflect, Retry, Reward (RRR) records in ``pasr stats``: what an RRR run did, step by step.

RRR (:mod:`recipe.rrr_step`) writes three records per exchange: the first ``attempt``, a
``reflection`` on a failed attempt (its ``acc`` is its reward: whether its retry succeeded) and
the ``retry`` written with that reflection in context. ``pasr eval --method reflect-retry``
writes one record per sample instead: the final answer, with the passes in ``extra["passes"]``
and the first attempt's score in ``extra["first_acc"]`` (:mod:`eval.reflect_retry`). None of
these answers is in PASR's think/answer format, so their groups show PASR's format and refine
columns as not applicable (:func:`is_rrr`, ``GroupStats(rrr=True)``), and what RRR is about is
counted here:

* per training run and step: the trainer's own ``rrr/*`` numbers, computed by the trainer's
  function (:func:`recipe.rrr_step.rrr_metrics`) on the step's records, plus retry lengths;
* per evaluation (an engine's in-training evaluation: run, dataset and step; a ``pasr eval``
  run: run and dataset): first-attempt accuracy, retried, recovered and final accuracy, as
  ``pasr eval``'s summary counts them (:func:`eval.summary.retry_facts`);
* examples: exchanges whose retry succeeded and whose retry failed, each with the failed
  attempt, the reflection and the retry (a reservoir per run and outcome).

A score of None (verifier or judge error) is counted and left out of every rate, never a 0; a
rate with nothing to count is None (``rrr_metrics`` logs 0.0 there, as logging wants a number).

Memory: recovered rates need each query's outcome, so a step keeps a few numbers per RRR record
(query id, tokens, score), not its text. Example texts are held only for the step or evaluation
being read (its failed attempts, and reflections and retries until their exchange is complete);
the engines write a step's records together, so that is one step's worth.
"""

from __future__ import annotations

import random
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from data.records import ATTEMPT, REFLECTION, RETRY
from eval.reflect_retry import METHOD as REFLECT_RETRY
from eval.resume import is_generation_error
from eval.stats.counting import Reservoir, rate
from eval.stats.groups import KIND_ORDER, _short
from eval.summary import retry_facts
from recipe.rrr_step import METRIC_PREFIX, Attempt, Reflection, final_score, is_success, rrr_metrics

RRR_VARIANTS = frozenset((ATTEMPT, REFLECTION, RETRY))
EXAMPLE_CELLS = ("retry_succeeded", "retry_failed")
TRAIN_COLUMNS = (
    "n_queries",
    "first_attempt_acc",
    "failed_queries",
    "n_reflections",
    "retry_acc",
    "n_recovered",
    "recovered_rate",
    "reflection_tokens",
    "n_retries",
    "retry_tokens",
    "verifier_errors",
    "trained_rows",
)


def is_rrr(name: str) -> bool:
    """Whether a group name (a record variant, or a ``pasr eval`` method) is RRR's."""
    return name in RRR_VARIANTS or name == REFLECT_RETRY


@dataclass
class _Sample:
    """One evaluated question as :func:`eval.summary.retry_facts` reads a ``pasr eval`` record:
    the final score and the first attempt's, and whether it was retried."""

    acc: float | None
    extra: dict[str, Any] = field(default_factory=dict)


class _Batch:
    """The RRR records of one training step or one in-training evaluation: per query its first
    attempt's score, per reflection its tokens and reward, per retry its tokens and score."""

    __slots__ = ("attempts", "reflections", "retries", "tokens")

    def __init__(self) -> None:
        self.attempts: dict[str, float | None] = {}  # a query's later attempt record wins
        self.reflections: list[tuple[str, int, int, float | None]] = []  # query, sample index, tokens, reward
        self.retries: list[tuple[str, int, float | None]] = []  # query, tokens, score
        self.tokens = 0  # every pass

    def add(self, rec: dict) -> None:
        qid = sys.intern(str(rec["query_id"]))
        variant, tokens, acc = rec["variant"], rec["response_tokens"], rec["acc"]
        self.tokens += tokens
        if variant == ATTEMPT:
            self.attempts[qid] = acc
        elif variant == REFLECTION:
            self.reflections.append((qid, rec.get("sample_index", 0), tokens, acc))
        elif variant == RETRY:
            self.retries.append((qid, tokens, acc))

    def train_row(self) -> dict[str, Any]:
        """The step's ``rrr/*`` numbers by :func:`rrr_metrics`, from the records: an attempt's
        score is its record's ``acc``; a reflection's retry score is its record's ``acc`` (its
        reward, which is what ``rrr_metrics`` reads of it), its length the record's
        ``response_tokens`` (the ids are not recorded: a range of that length stands in)."""
        attempts = [Attempt(q, "", "", s) for q, s in self.attempts.items()]
        reflections = [Reflection(q, k, [], range(n), reward) for q, k, n, reward in self.reflections]
        m = {k.removeprefix(METRIC_PREFIX + "/"): v for k, v in rrr_metrics(attempts, reflections).items()}
        failed = int(m["failed_queries"])
        scored_retries = sum(reward is not None for *_, reward in self.reflections)
        return {
            "n_queries": len(attempts),
            "first_attempt_acc": m["first_attempt_acc"] if any(a.score is not None for a in attempts) else None,
            "failed_queries": failed,
            "n_reflections": len(reflections),
            "retry_acc": m["retry_acc"] if scored_retries else None,
            "n_recovered": round(m["recovered_rate"] * failed),
            "recovered_rate": m["recovered_rate"] if failed else None,
            "reflection_tokens": m["reflection_length/mean"] if reflections else None,
            "n_retries": len(self.retries),
            "retry_tokens": rate(sum(n for _, n, _ in self.retries), len(self.retries)),
            "verifier_errors": int(m["verifier_errors"]),
            "trained_rows": int(m["trained_rows"]),
        }

    def samples(self) -> list[_Sample]:
        """One :class:`_Sample` per query, as ``pasr eval`` would have recorded the exchange."""
        retried: dict[str, list[float | None]] = defaultdict(list)
        for q, _, score in self.retries:
            retried[q].append(score)
        return [
            _Sample(final_score(first, retried.get(q, [])), {"first_acc": first, "retried": q in retried})
            for q, first in self.attempts.items()
        ]


def eval_row(samples: list[_Sample], tokens: int) -> dict[str, Any]:
    """First-attempt accuracy, retried, recovered and final accuracy of evaluated samples, by
    :func:`eval.summary.retry_facts` (final accuracy: mean score of the scored samples)."""
    generated = [s for s in samples if not is_generation_error(s)]
    facts = retry_facts(generated)
    scored = [s.acc for s in generated if s.acc is not None]
    return {
        "n_samples": len(samples),
        "first_attempt_acc": facts["first_attempt_accuracy"],
        "n_retried": facts["n_retried"],
        "retry_rate": facts["retry_rate"],
        "n_recovered": facts["n_recovered"],
        "retry_acc": facts["recovered_rate"],  # eval.summary's recovered_rate: successful / scored retries
        "final_acc": rate(sum(scored), len(scored)),
        "judge_errors": len(generated) - len(scored),
        "generation_errors": len(samples) - len(generated),
        "mean_tokens": rate(tokens, len(samples)),
    }


class _Exchanges:
    """Texts of the step or evaluation being read, until an exchange (a failed attempt, one of
    its reflections and that reflection's retry) is complete; reset when another begins."""

    def __init__(self) -> None:
        self.batch: tuple | None = None
        self.attempts: dict[str, dict] = {}  # failed attempts by query
        self.parts: dict[str, dict[int, dict[str, dict]]] = defaultdict(dict)  # query -> sample index -> variant -> rec

    def add(self, batch: tuple, rec: dict) -> list[tuple[dict, dict, dict]]:
        """Keep ``rec``; return the (attempt, reflection, retry) records it completes."""
        if batch != self.batch:
            self.batch, self.attempts, self.parts = batch, {}, defaultdict(dict)
        qid, variant = str(rec["query_id"]), rec["variant"]
        if variant == ATTEMPT:
            if rec["acc"] is None or is_success(rec["acc"]):
                return []  # not reflected on
            self.attempts[qid] = rec
            ks = list(self.parts.get(qid, ()))
        else:
            k = rec.get("sample_index", 0)
            self.parts[qid].setdefault(k, {})[variant] = rec
            ks = [k]
        done = []
        attempt = self.attempts.get(qid)
        for k in ks:
            p = self.parts[qid][k]
            if attempt is not None and REFLECTION in p and RETRY in p:
                done.append((attempt, p[REFLECTION], p[RETRY]))
                del self.parts[qid][k]
        return done


class RrrStats:
    """Every RRR number of a ``pasr stats`` run; :meth:`add` takes the RRR records (see
    :func:`is_rrr`) of any kind (``train``, ``val``, ``eval``; others are not counted here)."""

    def __init__(self, n_examples: int, rng: random.Random):
        self.n_examples, self.rng = n_examples, rng
        self.train: dict[str, dict[int, _Batch]] = defaultdict(dict)
        self.val: dict[tuple[str, str, int], _Batch] = {}
        self.eval: dict[tuple[str, str], list[_Sample]] = defaultdict(list)
        self.eval_tokens: dict[tuple[str, str], int] = defaultdict(int)
        self.examples: dict[str, dict[str, Reservoir]] = {}
        self.exchanges = _Exchanges()

    def add(self, kind: str, rec: dict) -> None:
        run_id, dataset, step = str(rec["run_id"]), rec.get("dataset"), rec.get("step")
        if kind == "eval":
            self._add_eval(run_id, dataset, rec)
            return
        if kind == "train":
            table, key = self.train[run_id], step
        elif kind == "val":
            table, key = self.val, (run_id, dataset, step)
        else:
            return
        batch = table.get(key)
        if batch is None:
            batch = table[key] = _Batch()
        batch.add(rec)
        if self.n_examples > 0:
            for attempt, reflection, retry in self.exchanges.add((kind, run_id, dataset, step), rec):
                texts = (attempt["response"], reflection["response"], retry["response"])
                self._offer(f"{kind}/{run_id}", retry, texts, attempt["extracted_answer"])

    def _add_eval(self, run_id: str, dataset: str, rec: dict) -> None:
        extra = rec.get("extra")
        extra = extra if isinstance(extra, dict) else {}
        key = (run_id, dataset)
        self.eval[key].append(_Sample(rec["acc"], {k: extra.get(k) for k in ("first_acc", "retried", "error")}))
        self.eval_tokens[key] += rec["response_tokens"]
        passes = extra.get("passes")
        if self.n_examples > 0 and extra.get("retried") and isinstance(passes, list) and len(passes) == 3:
            texts = tuple(p.get("text", "") if isinstance(p, dict) else "" for p in passes)
            self._offer(f"eval/{run_id}", rec, texts, None)

    def _offer(self, source: str, retry: dict, texts: tuple[str, str, str], attempt_answer: str | None) -> None:
        """Offer an exchange whose retry was scored to its run's reservoir of its outcome."""
        score = retry["acc"]
        if score is None:
            return
        cells = self.examples.get(source)
        if cells is None:
            cells = self.examples[source] = {c: Reservoir(self.n_examples, self.rng) for c in EXAMPLE_CELLS}
        res = cells["retry_succeeded" if is_success(score) else "retry_failed"]
        j = res.slot()
        if j >= 0:
            attempt, reflection, retry_text = texts
            res.items[j] = {
                "query_id": retry["query_id"],
                "step": retry.get("step"),
                "dataset": retry.get("dataset"),
                "sample_index": retry.get("sample_index", 0),
                "question": _short(retry["prompt"]),
                "gold": retry["gold"],
                "attempt": _short(attempt),
                "attempt_answer": attempt_answer,
                "reflection": _short(reflection),
                "retry": _short(retry_text),
                "retry_answer": retry["extracted_answer"],
                "retry_score": score,
            }

    def to_json(self) -> dict[str, Any]:
        """``train``: per run, each column of :data:`TRAIN_COLUMNS` per step; ``evals``: one row
        per evaluation (``val/RUN/DATASET@STEP``, ``eval/RUN/DATASET``); ``examples``."""
        train = {}
        for run_id, steps in sorted(self.train.items()):
            order = sorted(steps)
            rows = [steps[s].train_row() for s in order]
            train[run_id] = {"steps": order} | {c: [r[c] for r in rows] for c in TRAIN_COLUMNS}
        evals = []
        for (run_id, dataset, step), b in self.val.items():
            evals.append(("val", run_id, dataset, step, eval_row(b.samples(), b.tokens)))
        for (run_id, dataset), samples in self.eval.items():
            evals.append(("eval", run_id, dataset, None, eval_row(samples, self.eval_tokens[(run_id, dataset)])))
        evals.sort(key=lambda e: (KIND_ORDER[e[0]], e[1], str(e[2]), e[3] or 0))
        return {
            "train": train,
            "evals": {
                f"{kind}/{run_id}/{dataset}" + (f"@{step}" if step is not None else ""): {
                    "kind": kind,
                    "run_id": run_id,
                    "dataset": dataset,
                    "step": step,
                }
                | row
                for kind, run_id, dataset, step, row in evals
            },
            "examples": {
                src: {c: list(r.items) for c, r in cells.items()} for src, cells in sorted(self.examples.items())
            },
            "example_cell_sizes": {
                src: {c: r.seen for c, r in cells.items()} for src, cells in sorted(self.examples.items())
            },
        }
