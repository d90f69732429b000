"""The statistics of ``benchmarks.pasr_ab`` with the run as the unit.

Why runs, not questions: two RL runs from one warm-up drift apart by chance once a few of their
groups differ, and every held-out question of a run moves with that run's trajectory, so a sign
test over questions pooled across runs counts the same chance many times (docs/results/gpu_scale.md).
Here each seed gives one number per arm (greedy accuracy, or mean@K at T=0.5), each arm is set
against the control of its own seed (the per-seed difference), and the differences are tested
over the seeds (:func:`over_seeds`: a sign test, a one-sample t-test and the Wilcoxon
signed-rank test). What chance alone does is measured, not assumed: the ``control_drift`` arm is
the control with another rollout seed only, so its difference from the control is a difference
between two controls (:func:`against_drift`): an arm's mean difference is compared with the
drift's spread, and each seed's difference with that seed's drift.

A seed without one of the arms is not averaged over quietly: :func:`run_level` refuses it
(:class:`MissingArm`); the report leaves such seeds out by name and says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import fmean, stdev

from recipe.paired_tests import sign_test, wilcoxon_signed_rank

CONTROL = "control"
DRIFT = "control_drift"  # the control with another rollout seed: the chance drift between two controls


class MissingArm(ValueError):
    """A seed handed to :func:`run_level` without a value for one of the arms."""


def differences(values: Mapping[str, Mapping[str, float | None]], arm: str, base: str = CONTROL) -> dict[str, float]:
    """Per seed, ``arm``'s value less ``base``'s (the seeds where both are numbers), rounded to
    12 places: 13/20 - 12/20 and 12/20 - 11/20 are one difference, not two that a test or a
    comparison with the drift tells apart in the 17th digit."""
    out = {}
    for seed, row in values.items():
        a, b = row.get(arm), row.get(base)
        if a is not None and b is not None:
            out[seed] = round(a - b, 12)
    return out


def t_test_p(diffs: Sequence[float]) -> float | None:
    """Two-sided p of the one-sample t-test of ``diffs`` against 0; None where it is undefined
    (fewer than two values, or differences all equal and not all 0: no spread to scale by)."""
    if len(diffs) < 2:
        return None
    if all(d == 0 for d in diffs):
        return 1.0
    if stdev(diffs) == 0:
        return None
    from scipy.stats import ttest_1samp

    return float(ttest_1samp(list(diffs), 0.0).pvalue)


def over_seeds(diffs: Sequence[float]) -> dict:
    """The per-seed differences summed up: their number, mean and sample sd, the seeds up, down
    and level, and three paired tests over the seeds (sign, t, Wilcoxon signed-rank)."""
    n = len(diffs)
    up, down = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
    return {
        "n": n,
        "mean": fmean(diffs) if n else None,
        "sd": stdev(diffs) if n >= 2 else None,
        "up": up,
        "down": down,
        "same": n - up - down,
        "p_sign": sign_test(up, down),
        "p_t": t_test_p(diffs),
        "p_wilcoxon": wilcoxon_signed_rank(list(diffs)),
    }


def against_drift(arm: Mapping[str, float], drift: Mapping[str, float]) -> dict:
    """``arm``'s per-seed differences from the control set against the drift arm's (the same
    seeds): the drift's spread (root mean square: the size of a difference between two controls)
    and mean absolute value; whether the arm's mean difference is larger than that spread; and
    the seeds on which the arm beats (or trails) the control by more than that seed's drift."""
    seeds = sorted(arm.keys() & drift.keys())
    if not seeds:
        return {"n": 0, "drift_rms": None, "drift_mean_abs": None, "beyond_drift": None}
    a, d = [arm[s] for s in seeds], [drift[s] for s in seeds]
    rms = math.sqrt(fmean(x * x for x in d))
    up = sum(x > abs(y) for x, y in zip(a, d))
    down = sum(x < -abs(y) for x, y in zip(a, d))
    return {
        "n": len(seeds),
        "drift_rms": rms,
        "drift_mean_abs": fmean(abs(y) for y in d),
        "beyond_drift": abs(fmean(a)) > rms,
        "seeds_up_beyond_drift": up,
        "seeds_down_beyond_drift": down,
        "most_seeds_up_beyond_drift": up > len(seeds) / 2,
    }


def run_level(values: Mapping[str, Mapping[str, float | None]], arms: Sequence[str]) -> dict[str, dict]:
    """For each arm but the control: its per-seed differences from the control, the tests over
    the seeds (:func:`over_seeds`) and, for the arms other than the drift arm, the comparison
    with the drift (:func:`against_drift`). ``values[seed][arm]`` must hold a number for every
    arm of every seed given: a seed without one is a :class:`MissingArm`, not a smaller mean."""
    if CONTROL not in arms or DRIFT not in arms:
        raise MissingArm(f"the run-level statistics need the {CONTROL} and {DRIFT} arms, got {', '.join(arms)}")
    for seed, row in values.items():
        missing = [arm for arm in arms if row.get(arm) is None]
        if missing:
            raise MissingArm(f"{seed}: no value for {', '.join(missing)}: leave the seed out and say so")
    drift = differences(values, DRIFT)
    out = {}
    for arm in arms:
        if arm == CONTROL:
            continue
        diffs = differences(values, arm)
        out[arm] = {
            "per_seed": diffs,
            **over_seeds(list(diffs.values())),
            "vs_drift": against_drift(diffs, drift) if arm != DRIFT else None,
        }
    return out


def words(s: dict, digits: int = 3) -> str:
    """An arm's run-level line: mean difference, seeds up/down, the three p values."""

    def p(x):
        return "-" if x is None else f"{x:.2g}"

    if not s["n"]:
        return "-"
    return (
        f"{s['mean']:+.{digits}f} ({s['up']} up / {s['down']} down of {s['n']}; "
        f"sign p {p(s['p_sign'])}, t p {p(s['p_t'])}, Wilcoxon p {p(s['p_wilcoxon'])})"
    )
