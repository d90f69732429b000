"""Paired significance for two evaluations of the same questions. The tests themselves live in
:mod:`recipe.paired_tests` (the local trainer's final evaluation runs them too) and are
re-exported here: the sign test on greedy answers, the tests on per-question means of K sampled
answers."""

from __future__ import annotations

from recipe.paired_tests import paired_means_test, question_means, sign_test  # noqa: F401  re-exported


def paired_counts(a: dict[str, bool], b: dict[str, bool]) -> tuple[int, int]:
    """(questions b gets right and a wrong, questions a gets right and b wrong) over shared keys."""
    keys = a.keys() & b.keys()
    return sum(b[k] and not a[k] for k in keys), sum(a[k] and not b[k] for k in keys)
