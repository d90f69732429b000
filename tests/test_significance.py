"""The paired sign test of benchmarks/learning_signal.py: values pinned against the exact binomial."""

from math import comb

import pytest

from eval.significance import paired_counts, sign_test


def _exact(wins: int, losses: int) -> float:
    n, k = wins + losses, min(wins, losses)
    return min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2**n)


def test_sign_test_values():
    assert sign_test(15, 65) < 1e-4
    assert sign_test(19, 17) == pytest.approx(0.8679394, abs=1e-6)
    assert sign_test(0, 0) == 1.0
    assert sign_test(5, 5) == 1.0
    assert sign_test(0, 6) == pytest.approx(2 / 64)
    assert sign_test(3, 9) == sign_test(9, 3)  # two-sided: symmetric


@pytest.mark.parametrize("wins,losses", [(0, 1), (1, 0), (2, 7), (10, 3), (30, 31), (12, 40), (60, 20)])
def test_sign_test_is_the_exact_two_sided_binomial(wins, losses):
    assert sign_test(wins, losses) == pytest.approx(_exact(wins, losses), rel=1e-12)


def test_paired_counts_over_shared_questions():
    a = {"q1": True, "q2": False, "q3": False, "q4": True, "only_a": True}
    b = {"q1": True, "q2": True, "q3": False, "q4": False, "only_b": False}
    assert paired_counts(a, b) == (1, 1)
    assert paired_counts(a, {**b, "q4": True}) == (1, 0)
