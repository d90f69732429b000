"""The run-level judge-error policy, one for both engines: when failures stop a run, and how an
evaluation reports accuracy beside them.

Per rollout, a failed judge leaves ``acc=None`` and the rollout is masked, never scored 0
(:mod:`recipe.scoring`). That alone lets a judge that always fails look like a model that is
always wrong: every row masked, nothing learnt, accuracy read as 0. So:

* a training step whose judge failed on more than ``pasr.max_judge_error_rate`` of its
  rollouts stops the run after its records are dumped (:func:`check_judge_errors`, both
  engines), instead of training on the few judged rows (default 0.2, in [0, 1]: 1.0 never stops);
* an evaluation's accuracy is over its judged samples only (:func:`judged_accuracy`, None when
  none was judged, never 0), reported with the error count beside it;
* any failure is announced on stderr (:func:`judge_error_warning`): a number in a metrics file
  is not a warning.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from statistics import fmean

from data.records import REFLECTION, RolloutRecord
from rewards.judges.redact import redact_url

DEFAULT_MAX_JUDGE_ERROR_RATE = 0.2
SETTING = "pasr.max_judge_error_rate"  # the key, one for both engines


class JudgeErrorRateExceeded(RuntimeError):
    """A step's judge failed on too many rollouts to train on it."""


def max_judge_error_rate_problem(key: str, value: float) -> str | None:
    """The config error of the setting ``key`` = ``value``, or None. A fraction in [0, 1]; NaN
    is refused (no comparison with it is true, so it would never stop a run)."""
    if not 0.0 <= value <= 1.0:  # False for NaN too
        return f"{key} must be in [0, 1], got {value}"
    return None


def judged_records(records: Iterable[RolloutRecord]) -> list[RolloutRecord]:
    """The records a judge scored: all but RRR's reflections, whose ``acc`` is their retry's
    (:func:`recipe.rrr_step.reflection_record`), so a failure there would count twice."""
    return [r for r in records if r.variant != REFLECTION]


def judged_accuracy(scores: Iterable[float | bool | None]) -> float | None:
    """The mean of the judged ``scores`` (None: the judge failed on that sample), or None when
    none was judged: an accuracy the judge never gave is unknown, not 0."""
    judged = [float(s) for s in scores if s is not None]
    return fmean(judged) if judged else None


def check_judge_errors(
    records: Sequence[RolloutRecord],
    max_rate: float,
    *,
    step: int,
    judge,
    records_at: Path | str,
    resume: str = "resume from the last checkpoint",
) -> None:
    """The judge-error stop of training step ``step``, the same in both engines (call it after
    dumping the step's ``records``): raise :class:`JudgeErrorRateExceeded` when the judge failed
    on more than ``max_rate`` (``pasr.max_judge_error_rate``) of the judged records, else warn on
    stderr when it failed on any. ``judge`` is the ``pasr.judge`` section, ``records_at`` where
    the step's records are and ``resume`` how to carry on once the judge is fixed."""
    judged = judged_records(records)
    failed = [r for r in judged if r.acc is None]
    rate = len(failed) / len(judged) if judged else 0.0
    if rate <= max_rate:
        if warning := judge_error_warning(records, f"step {step}"):
            print(warning, file=sys.stderr, flush=True)
        return
    raise JudgeErrorRateExceeded(
        f"step {step}: the judge failed on {len(failed)} of {len(judged)} rollouts ({rate:.0%}), more than "
        f"{SETTING}={max_rate:g}; first error: {failed[0].judge_error!r}. "
        f"Judge: kind={judge.kind} base_url={redact_url(str(judge.base_url))} model={judge.model}. "
        f"The step's records: {records_at}. "
        f"Stopping instead of training on masked rows; fix the judge and {resume}"
    )


def judge_error_warning(records: Sequence[RolloutRecord], what: str) -> str | None:
    """A one-line warning when the judge failed on any of the judged ``records`` of ``what``
    (``"evaluation 'final'"``, ``"step 7"``), else None."""
    judged = judged_records(records)
    failed = [r for r in judged if r.acc is None]
    if not failed:
        return None
    left = len(judged) - len(failed)
    scope = f"accuracy is over the {left} judged" if left else "there is no accuracy (nothing was judged)"
    return (
        f"WARNING: the judge failed on {len(failed)} of {len(judged)} rollouts of {what}; {scope}; "
        f"first error: {failed[0].judge_error!r}"
    )
