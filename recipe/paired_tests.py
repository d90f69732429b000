"""Paired significance tests for two evaluations of the same questions.

A greedy evaluation gives one answer a question, right or wrong: two of them are compared on the
questions where they disagree (:func:`sign_test`). An evaluation that samples K answers a question
(the paper's protocol: temperature 0.5) gives each question a mean accuracy in [0, 1]; two of
them are compared on the per-question differences of those means (:func:`paired_means_test`):
the Wilcoxon signed-rank test, which weighs a question that moved from 0/4 to 4/4 more than one
that moved by 1/4, and the sign test on the same differences beside it, which counts only their
direction. Pairing by question removes the spread between easy and hard questions, which is most
of the spread of mean@K itself.

Here, not in :mod:`eval`, because the local trainer's final evaluation runs them too
(:mod:`recipe.local_engine.sampled_eval`); :mod:`eval.significance` re-exports the sign test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import fmean

# the paper's reference inference (infer_pasr.py in the authors' repository): one sample at this
# temperature, top-p 1; the local trainer's trainer.eval_temperature and pasr eval --protocol paper
PAPER_TEMPERATURE = 0.5
EXACT_MAX_N = 50  # Wilcoxon: the exact null distribution up to this many nonzero differences without ties


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test on discordant pairs (ties dropped): the probability, under
    "neither is better", of a split at least as uneven as ``wins`` vs ``losses``. That is a
    binomial test of ``wins`` out of ``wins + losses`` at p = 0.5 (scipy's); no discordant pair
    is no evidence either way (1.0)."""
    from scipy.stats import binomtest

    n = wins + losses
    if n == 0:
        return 1.0
    return float(binomtest(wins, n, 0.5, alternative="two-sided").pvalue)


def question_means(scores: Mapping[str, Sequence[float | None]]) -> dict[str, float]:
    """Each question's mean judge score over its judged samples (None: the judge failed on that
    sample, left out as the greedy accuracy leaves it out); a question with none judged has no
    mean and is left out."""
    out = {}
    for qid, values in scores.items():
        judged = [float(v) for v in values if v is not None]
        if judged:
            out[qid] = fmean(judged)
    return out


def mean_at_k(means: Mapping[str, float]) -> float | None:
    """mean@K: the per-question means (:func:`question_means`) averaged over the questions, so
    a question whose judge failed on some samples weighs as much as any other; None without any."""
    return fmean(means.values()) if means else None


def wilcoxon_signed_rank(differences: Sequence[float]) -> float:
    """Two-sided p of the Wilcoxon signed-rank test on paired ``differences`` (scipy's), zero
    differences dropped (Wilcoxon's own convention). Exact where scipy's exact distribution
    holds (at most :data:`EXACT_MAX_N` nonzero differences, no two of the same size); else the
    normal approximation with the tie correction of the variance and no continuity correction.
    The method is chosen here, not by scipy's ``auto``, so a p does not change with its version.
    No nonzero difference is no evidence either way (1.0)."""
    from scipy.stats import wilcoxon

    nonzero = [d for d in differences if d != 0]
    if not nonzero:
        return 1.0
    sizes = [abs(d) for d in nonzero]
    exact = len(nonzero) <= EXACT_MAX_N and len(set(sizes)) == len(sizes)
    method = "exact" if exact else "asymptotic"
    result = wilcoxon(nonzero, zero_method="wilcox", correction=False, alternative="two-sided", method=method)
    return float(result.pvalue)


def paired_means_test(before: Mapping[str, float], after: Mapping[str, float]) -> dict:
    """``after`` against ``before`` on the questions both have a mean for (their ids):
    ``n`` questions, both mean@K over them, ``delta`` (after less before), the questions whose
    mean went up (``wins``), down (``losses``) or stayed (``ties``), and the two-sided p of the
    Wilcoxon signed-rank test (``p_wilcoxon``) and of the sign test (``p_sign``) on the
    per-question differences."""
    keys = sorted(before.keys() & after.keys())
    diffs = [after[k] - before[k] for k in keys]
    wins, losses = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
    return {
        "n": len(keys),
        "before": fmean(before[k] for k in keys) if keys else None,
        "after": fmean(after[k] for k in keys) if keys else None,
        "delta": fmean(diffs) if diffs else None,
        "wins": wins,
        "losses": losses,
        "ties": len(keys) - wins - losses,
        "p_wilcoxon": wilcoxon_signed_rank(diffs),
        "p_sign": sign_test(wins, losses),
    }
