"""Per-step series of ``pasr stats``: how refine usage moves over training.

Training rollouts give one row per (run, step) with refine and plain rollouts side by side (the
plain ones are the baseline the refine reward compares against); in-training evaluations give
one row per (run, dataset, step) of their refine rollouts. Both are the same step counters,
filled by one code path and read out as two tables.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from data.records import PLAIN, REFINE
from eval.stats.counting import rate
from eval.stats.response_facts import ResponseFacts


class StepTrend:
    """Counters of one step: refine rollouts, plain rollouts, judge errors."""

    __slots__ = (
        "n_ref",
        "n_refining",
        "n_format_ok",
        "ref_acc_sum",
        "ref_acc_n",
        "ref_tokens",
        "n_spans",
        "n_empty",
        "n_plain",
        "plain_acc_sum",
        "plain_acc_n",
        "plain_tokens",
        "judge_errors",
        "refine_reward_sum",
        "refine_reward_n",
        "total_reward_sum",
        "total_reward_n",
    )

    def __init__(self) -> None:
        for name in self.__slots__:
            setattr(self, name, 0)

    def add(self, rec: dict, facts: ResponseFacts) -> None:
        variant, acc, tokens = rec["variant"], rec["acc"], rec["response_tokens"]
        if variant == REFINE:
            n = facts.n_refine
            self.n_ref += 1
            self.n_refining += n > 0
            self.n_format_ok += bool(rec["format_ok"])
            self.ref_tokens += tokens
            self.n_spans += n
            self.n_empty += facts.n_empty
            if acc is not None:
                self.ref_acc_sum += acc
                self.ref_acc_n += 1
                # the rewards of judged refine rollouts, as recipe.metrics.step_metrics averages them
                if (r := rec.get("refine_reward")) is not None:
                    self.refine_reward_sum += r
                    self.refine_reward_n += 1
                if (r := rec.get("total_reward")) is not None:
                    self.total_reward_sum += r
                    self.total_reward_n += 1
        elif variant == PLAIN:
            self.n_plain += 1
            self.plain_tokens += tokens
            if acc is not None:
                self.plain_acc_sum += acc
                self.plain_acc_n += 1
        if acc is None:
            self.judge_errors += 1


# stats.json columns, in order: name -> value of one step
_TRAIN_COLUMNS: dict[str, Callable[[StepTrend], Any]] = {
    "n_refine_rollouts": lambda t: t.n_ref,
    "n_plain_rollouts": lambda t: t.n_plain,
    "refine_rate": lambda t: rate(t.n_refining, t.n_ref),
    "format_pass_rate": lambda t: rate(t.n_format_ok, t.n_ref),
    "empty_refine_rate": lambda t: rate(t.n_empty, t.n_spans),
    "acc_refine": lambda t: rate(t.ref_acc_sum, t.ref_acc_n),
    "acc_plain": lambda t: rate(t.plain_acc_sum, t.plain_acc_n),
    "response_tokens_refine": lambda t: rate(t.ref_tokens, t.n_ref),
    "response_tokens_plain": lambda t: rate(t.plain_tokens, t.n_plain),
    "judge_errors": lambda t: t.judge_errors,
    "refine_reward": lambda t: rate(t.refine_reward_sum, t.refine_reward_n),
    "total_reward": lambda t: rate(t.total_reward_sum, t.total_reward_n),
}
_VAL_COLUMNS: dict[str, Callable[[StepTrend], Any]] = {
    "n": lambda t: t.n_ref,
    "acc": lambda t: rate(t.ref_acc_sum, t.ref_acc_n),
    "refine_rate": _TRAIN_COLUMNS["refine_rate"],
    "format_pass_rate": _TRAIN_COLUMNS["format_pass_rate"],
    "empty_refine_rate": _TRAIN_COLUMNS["empty_refine_rate"],
    "response_tokens": _TRAIN_COLUMNS["response_tokens_refine"],
    "judge_errors": _TRAIN_COLUMNS["judge_errors"],
}


def _series(steps: dict[int, StepTrend], columns: dict[str, Callable[[StepTrend], Any]]) -> dict[str, list]:
    order = sorted(steps)
    ts = [steps[s] for s in order]
    return {"steps": order} | {name: [value(t) for t in ts] for name, value in columns.items()}


class Trends:
    """Step counters of every training run (all variants) and in-training evaluation (refine
    rollouts only: that is what the evaluation measures)."""

    def __init__(self) -> None:
        self.train: dict[str, dict[int, StepTrend]] = defaultdict(dict)
        self.val: dict[tuple[str, str], dict[int, StepTrend]] = defaultdict(dict)

    def add(self, kind: str, rec: dict, facts: ResponseFacts) -> None:
        """Count a ``train`` or ``val`` record dict in its step's row; others have no step."""
        if kind == "train":
            table = self.train[str(rec["run_id"])]
        elif kind == "val" and rec["variant"] == REFINE:
            table = self.val[(str(rec["run_id"]), rec["dataset"])]
        else:
            return
        step = rec["step"]
        t = table.get(step)
        if t is None:
            t = table[step] = StepTrend()
        t.add(rec, facts)

    def train_json(self) -> dict[str, dict[str, list]]:
        """Per training run: refine and plain rollouts' numbers per step."""
        return {run_id: _series(steps, _TRAIN_COLUMNS) for run_id, steps in sorted(self.train.items())}

    def val_json(self) -> dict[str, dict[str, dict[str, list]]]:
        """Per run, per in-training evaluation dataset: refine rollouts' numbers per step."""
        out: dict[str, dict[str, Any]] = {}
        for (run_id, dataset), steps in sorted(self.val.items()):
            out.setdefault(run_id, {})[dataset] = _series(steps, _VAL_COLUMNS)
        return out
