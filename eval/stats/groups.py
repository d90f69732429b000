"""Per-group counters of ``pasr stats``: what a group is, and everything counted for it.

A group is a training run's variant (``train``), an in-training evaluation's dataset and
variant (``val``), or a ``pasr eval`` run's dataset and method (``eval``); every record belongs
to exactly one, and the report's tables are one row per group. Format validity and reason are
the record's own fields (what the reward saw); refine spans always come from the text, and a
record whose ``n_refine`` field disagrees with the text is counted (``n_refine_field_mismatch``).

A group of Reflect, Retry, Reward records (``rrr``: see :mod:`eval.stats.rrr`) is counted the
same way, but its answers are not written in PASR's format, so the PASR-only numbers
(:data:`PASR_ONLY`) are None in its ``stats.json`` entry, listed under ``not_applicable``, rather
than rates of 0, and it samples no refine examples (:mod:`eval.stats.rrr` samples its own).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import fields
from typing import Any

from data.records import REFINE, RolloutRecord
from eval.stats.counting import BoundedCounter, Reservoir, distribution, rate
from eval.stats.response_facts import ResponseFacts
from recipe.metrics import RefineTally
from rewards.refine_quality import normalize_refine_text

POSITION_BINS = 10  # [0, 0.1), ..., [0.9, 1.0]
LENGTH_EDGES = (0, 1, 5, 10, 20, 50, 100, 200, 500, 1000)  # last bin is [1000, inf)
CELLS = ("refine_correct", "refine_wrong", "no_refine_correct", "no_refine_wrong")
EXAMPLE_MAX_CHARS = 4000
KIND_ORDER = {"train": 0, "val": 1, "eval": 2, "other": 3}
# the local engine's in-training evaluation tags, in the order its trainer runs them
TAG_ORDER = {"base": 0, "warmup": 1, "final": 2}
_DEFAULT_ENGINE = next(f.default for f in fields(RolloutRecord) if f.name == "engine")
# stats.json keys of a group that only mean something for PASR responses (None for RRR groups)
PASR_ONLY = (
    "refine_rate",
    "empty_refine_rate",
    "refine_fix_rate",
    "refine_break_rate",
    "draft_acc",
    "mean_refines_per_response",
    "format",
    "accuracy.with_refine",
    "accuracy.without_refine",
)


def kind_of(step: int | None, dataset: str | None) -> str:
    """``train``: training rollouts (step, no dataset); ``val``: evaluation during training
    (step and dataset, e.g. the local engine's ``eval/<tag>.jsonl``, verl's ``val_step_*``);
    ``eval``: ``pasr eval`` (dataset, no step); ``other``: neither."""
    if step is not None:
        return "val" if dataset else "train"
    return "eval" if dataset else "other"


def method_of(variant: str) -> str:
    """Eval method of a record variant when the record does not say: ``refine`` -> ``pasr``,
    ``self_refine:<pass>`` -> ``self-refine``, others keep their name."""
    if variant == REFINE:
        return "pasr"
    if variant.startswith("self_refine"):
        return "self-refine"
    return variant


def eval_method(rec: dict) -> str:
    """The method of a ``pasr eval`` record: ``extra.method`` as ``pasr eval`` writes it, else
    derived from the variant (a Self-Refine run's records carry the variant of the pass that gave
    the final answer, so the variant alone would split one run)."""
    extra = rec.get("extra")
    m = extra.get("method") if isinstance(extra, dict) else None
    if not isinstance(m, str):
        m = rec.get("method")
    return m if isinstance(m, str) and m else method_of(rec["variant"])


def group_key(rec: dict) -> tuple[str, str, str | None, str]:
    """(kind, run id, dataset or None, name) of the group a record dict belongs to; the name is
    the eval method for ``eval`` records, the variant otherwise."""
    dataset = rec.get("dataset")
    kind = kind_of(rec.get("step"), dataset)
    name = eval_method(rec) if kind == "eval" else rec["variant"]
    return kind, str(rec["run_id"]), dataset or None, name


def _short(text: str | None, limit: int = EXAMPLE_MAX_CHARS) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + " …[truncated]"


class GroupStats:
    """Every counter of one group (see the module docstring for what a group is)."""

    def __init__(
        self,
        kind: str,
        run_id: str,
        dataset: str | None,
        name: str,
        n_examples: int,
        rng: random.Random,
        rrr: bool = False,
    ):
        # name: the method for eval groups, the variant otherwise; rrr: Reflect, Retry, Reward records
        self.kind, self.run_id, self.dataset, self.name, self.rrr = kind, run_id, dataset, name, rrr
        self.n_examples = 0 if rrr else n_examples
        self.variants: Counter[str] = Counter()
        self.generation_errors = 0
        self.n = 0
        self.n_refining = 0
        self.refines = RefineTally()  # spans, empty spans, fixes, breaks, right drafts (recipe.metrics)
        self.refines_per_response: Counter[int] = Counter()
        self.position_bins = [0] * POSITION_BINS
        self.position_sum = 0.0
        self.span_len: Counter[int] = Counter()
        self.think_len: Counter[int] = Counter()
        self.answer_len: Counter[int] = Counter()
        self.tokens_sum = 0
        self.tokens_max = 0
        self.n_format_ok = 0
        self.format_reasons: Counter[str] = Counter()
        self.acc_sum = [0.0, 0.0]  # [without refine, with refine]
        self.acc_n = [0, 0]
        self.n_correct = [0, 0]
        self.judge_errors = 0
        self.outcomes: Counter[str] = Counter()
        self.refine_rewards: Counter[str] = Counter()
        self.engines: Counter[str] = Counter()
        self.finish_reasons: Counter[str] = Counter()
        self.n_refine_mismatch = 0
        self.top_texts = BoundedCounter()
        self.examples = {c: Reservoir(n_examples, rng) for c in CELLS}

    @property
    def key(self) -> str:
        if self.dataset is not None:
            return f"{self.kind}/{self.run_id}/{self.dataset}/{self.name}"
        return f"{self.kind}/{self.run_id}/{self.name}"

    @property
    def label(self) -> str:
        if self.dataset is not None:
            return f"{self.run_id} · {self.kind} {self.dataset} · {self.name}"
        return f"{self.run_id} · {self.kind} · {self.name}"

    def add(self, rec: dict, facts: ResponseFacts) -> None:
        """Count one record dict of this group (``facts``: its response, parsed once)."""
        get = rec.get
        n = facts.n_refine
        self.variants[rec["variant"]] += 1
        self.n += 1
        self.engines[get("engine", _DEFAULT_ENGINE)] += 1
        self.refines_per_response[n] += 1
        if n != rec["n_refine"]:
            self.n_refine_mismatch += 1
        tokens = rec["response_tokens"]
        self.tokens_sum += tokens
        if tokens > self.tokens_max:
            self.tokens_max = tokens
        finish = get("finish_reason")
        if finish:
            self.finish_reasons[finish] += 1
        self._add_format(rec)
        think = facts.think
        if think is not None:
            self.think_len[len(think.split())] += 1
            self.answer_len[len(facts.fmt.answer.split())] += 1
        acc = rec["acc"]
        if acc is None:
            self.judge_errors += 1
        else:
            self.acc_sum[n > 0] += acc
            self.acc_n[n > 0] += 1
            self.n_correct[n > 0] += facts.correct
        if n:
            self._add_refines(facts, think)
        outcome = get("refine_outcome")
        if outcome is not None:
            self.outcomes[outcome] += 1
        reward = get("refine_reward")
        if reward is not None:
            self.refine_rewards[f"{float(reward):+g}"] += 1
        if facts.correct is not None and self.n_examples > 0:
            self._sample_example(rec, facts)

    def _add_format(self, rec: dict) -> None:
        if rec["format_ok"]:
            self.n_format_ok += 1
            return
        reason = rec["format_reason"] or "unknown"
        self.format_reasons[reason] += 1
        if reason == "generation_error":
            self.generation_errors += 1

    def _add_refines(self, facts: ResponseFacts, think: str | None) -> None:
        q = facts.quality
        self.n_refining += 1
        self.refines.add(q)
        think_len = len(think) if think else 0
        for span in facts.spans:
            self.span_len[len(span.text.split())] += 1
            if think_len:
                pos = span.start / think_len
                self.position_sum += pos
                self.position_bins[min(int(pos * POSITION_BINS), POSITION_BINS - 1)] += 1
            self.top_texts.add(normalize_refine_text(span.text))

    def _sample_example(self, rec: dict, facts: ResponseFacts) -> None:
        n, q = facts.n_refine, facts.quality
        res = self.examples[("refine_" if n else "no_refine_") + ("correct" if facts.correct else "wrong")]
        j = res.slot()
        if j >= 0:
            res.items[j] = {
                "query_id": rec["query_id"],
                "sample_index": rec.get("sample_index", 0),
                "step": rec.get("step"),
                "acc": rec["acc"],
                "gold": rec["gold"],
                "extracted_answer": rec["extracted_answer"],
                "format_ok": rec["format_ok"],
                "n_refine": n,
                "empty": list(q.empty) if q else [],
                "fix": q.fix if q else None,
                "break": q.breaks if q else None,
                "response": _short(rec["response"]),
            }

    def to_json(self, top_k: int) -> dict[str, Any]:
        out = self._to_json(top_k)
        if self.rrr:
            for path in PASR_ONLY:
                *parents, name = path.split(".")
                d = out
                for p in parents:
                    d = d[p]
                d[name] = None  # format pass rate and failure reasons, refine rates: not a 0
        return out

    def _to_json(self, top_k: int) -> dict[str, Any]:
        c, rates = self.refines, self.refines.rates()
        pos_n = sum(self.position_bins)
        judged = self.acc_n[0] + self.acc_n[1]
        return {
            "kind": self.kind,
            "run_id": self.run_id,
            "dataset": self.dataset,
            "variant": None if self.kind == "eval" else self.name,
            "method": self.name if self.kind == "eval" else None,
            "variants": dict(self.variants.most_common()),
            "label": self.label,
            "rrr": self.rrr,
            "not_applicable": list(PASR_ONLY) if self.rrr else [],
            "engines": dict(self.engines),
            "n_responses": self.n,
            "n_refining": self.n_refining,
            "refine_rate": rate(self.n_refining, self.n),
            "n_spans": c.spans,
            "n_empty_spans": c.empty,
            "empty_refine_rate": rates.empty,
            "n_fix": c.fixes,
            "n_fix_applicable": c.fix_known,
            "refine_fix_rate": rates.fix,
            "n_break": c.breaks,
            "n_break_applicable": c.break_known,
            "refine_break_rate": rates.breaks,
            "n_draft_ok": c.drafts_ok,
            "n_draft_applicable": c.draft_known,
            "draft_acc": rates.draft,
            "refines_per_response": {str(k): v for k, v in sorted(self.refines_per_response.items())},
            "mean_refines_per_response": rate(c.spans, self.n),
            "n_refine_field_mismatch": self.n_refine_mismatch,
            "position_hist": {
                "bin_edges": [round(i / POSITION_BINS, 4) for i in range(POSITION_BINS + 1)],
                "counts": list(self.position_bins),
                "n": pos_n,
                "mean": rate(self.position_sum, pos_n),
            },
            "refine_length_tokens": distribution(self.span_len, LENGTH_EDGES),
            "think_length_tokens": distribution(self.think_len, LENGTH_EDGES),
            "answer_length_tokens": distribution(self.answer_len, LENGTH_EDGES),
            "response_tokens": {"mean": rate(self.tokens_sum, self.n), "max": self.tokens_max if self.n else None},
            "format": {
                "n_ok": self.n_format_ok,
                "pass_rate": rate(self.n_format_ok, self.n),
                "failure_reasons": dict(self.format_reasons.most_common()),
            },
            "accuracy": {
                "mean": rate(self.acc_sum[0] + self.acc_sum[1], judged),
                "n_judged": judged,
                "n_correct": self.n_correct[0] + self.n_correct[1],
                "with_refine": {
                    "mean": rate(self.acc_sum[1], self.acc_n[1]),
                    "n": self.acc_n[1],
                    "n_correct": self.n_correct[1],
                },
                "without_refine": {
                    "mean": rate(self.acc_sum[0], self.acc_n[0]),
                    "n": self.acc_n[0],
                    "n_correct": self.n_correct[0],
                },
            },
            "judge_errors": self.judge_errors,
            "generation_errors": self.generation_errors,
            "refine_outcomes": dict(self.outcomes.most_common()),
            "refine_reward_values": dict(sorted(self.refine_rewards.items())),
            "finish_reasons": dict(self.finish_reasons.most_common()),
            "top_refines": self.top_texts.top(top_k),
            "top_refines_approximate": self.top_texts.pruned,
            "examples": {c: list(r.items) for c, r in self.examples.items()},
            "example_cell_sizes": {c: r.seen for c, r in self.examples.items()},
        }
