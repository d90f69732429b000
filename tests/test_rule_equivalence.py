"""What the rule judge counts as equal: the normalisations that pay right answers written the
way models write them, and the guards that stop paying wrong ones (issue 12, items 1 and 2)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rewards.judges.rule import Normalized, RuleJudge, contradicts, normalize

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("8.", Normalized("8")),
        ("**8**", Normalized("8")),
        ("**$8$**.", Normalized("8")),
        ("\\boxed{8}.", Normalized("8")),
        ("43 bananas", Normalized("43")),
        ("1,000 people", Normalized("1000")),
        ("$1,000", Normalized("1000")),
        ("10\\text{ inches}", Normalized("10")),
        ("\\frac{1}{2} cup", Normalized("\\frac{1}{2}")),
        ("60%", Normalized("60", percent=True)),
        ("60\\%", Normalized("60", percent=True)),
        ("\\boxed{60\\%}", Normalized("60", percent=True)),
        ("60 percent.", Normalized("60", percent=True)),
        ("90°", Normalized("90^\\circ")),
        # left as written: a variable, a math word, a qualifier, an operator, two wrapped parts
        ("2 x", Normalized("2 x")),
        ("3 pi", Normalized("3 pi")),
        ("5 or more", Normalized("5 or more")),
        ("5!", Normalized("5!")),
        ("$1$ or $2$", Normalized("$1$ or $2$")),
        ("**a** or **b**", Normalized("**a** or **b**")),
    ],
)
def test_normalize(text, expected):
    assert normalize(text) == expected


# (gold, answer, score). The first groups scored 0 before the normalisations (item 1); the
# second group was paid before the float and equation guards (item 2); the rest must not move.
EQUIVALENCES = [
    # item 1: right answers written as models write them
    ("8", "8.", 1.0),
    ("8", "**8**", 1.0),
    ("43", "43 bananas", 1.0),
    ("8", "8 dollars", 1.0),
    ("60", "60%", 1.0),  # a "what percentage" question: gold written without the sign
    ("60", "60\\%", 1.0),
    ("60", "\\boxed{60\\%}", 1.0),
    ("0.6", "60%", 1.0),  # one side a percent: its number / 100 may match too
    ("60\\%", "60", 1.0),
    ("60\\%", "0.6", 1.0),
    ("90^\\circ", "90°", 1.0),
    ("90", "90°", 1.0),
    ("8", "Answer: 8 apples", 1.0),  # a sentence: the raw text is read too
    ("8", "There are 8 cookies left", 1.0),
    ("12", "x equals 12", 1.0),
    ("8", "The answer is 8.", 1.0),  # (these two Math-Verify's own fallback already read)
    ("18", "Janet makes $18 every day.", 1.0),
    # item 2: wrong answers that were paid
    ("\\frac{4}{9}", "0.444444", 0.0),  # a 6-digit rounding is not the exact value
    ("\\sqrt{2}", "1.414214", 0.0),
    ("5", "6 = 5", 0.0),  # a false equation is wrong, whatever its right side
    ("5", "$6=5$", 0.0),
    ("5", "x = 6 = 5", 0.0),
    # unchanged: exact decimals, assignments, and what must stay wrong
    ("\\frac{1}{2}", "0.5", 1.0),
    ("18", "18.0", 1.0),
    ("\\frac{4}{9}", "0.4444444444", 1.0),  # the documented tolerance: 10 decimal places
    ("5", "x = 5", 1.0),
    ("5", "x = 2 + 3 = 5", 1.0),
    ("5", "5 = 5", 1.0),
    ("10\\text{ inches}", "10", 1.0),
    ("2x", "2 x", 1.0),
    ("2", "2 x", 0.0),
    ("60", "0.6", 0.0),  # no percent sign: 0.6 is not 60
    ("60", "6%", 0.0),
    ("3", "2, 3", 0.0),  # hedges are not paid for one of their values
    ("6", "5 or 6", 0.0),
    ("5", "5 or more", 0.0),
    ("9", "16 - 3 - 4 = 9 eggs", 0.0),
    ("3.14", "\\pi", 0.0),
    ("\\pi", "3.14159", 0.0),
]


def test_rule_judge_equivalences():
    pairs = [(gold, answer) for gold, answer, _ in EQUIVALENCES]
    results = RuleJudge(mode="inline").score_pairs(pairs)
    assert all(r.ok for r in results), results
    wrong = [(g, a, want, r.score) for (g, a, want), r in zip(EQUIVALENCES, results) if r.score != want]
    assert not wrong, wrong


def test_float_rounding_is_a_judge_setting():
    # 6 places is Math-Verify's default and pays the rounding; the judge's default does not
    assert RuleJudge(mode="inline", float_rounding=6).score_pairs([("\\frac{4}{9}", "0.444444")])[0].score == 1.0
    assert RuleJudge(mode="inline").score_pairs([("\\frac{4}{9}", "0.444444")])[0].score == 0.0


def test_contradicts():
    from math_verify import parse

    assert contradicts(parse("\\boxed{6 = 5}"))
    assert contradicts(parse("\\boxed{2 + 3 = 6 = 5}"))
    assert contradicts(parse("\\boxed{\\frac{1}{3} = 0.333333}"))
    assert contradicts(parse("\\boxed{\\frac{1}{0} = 5}"))  # an undefined side equals nothing
    assert not contradicts(parse("\\boxed{\\frac{1}{2} = 0.5}"))
    assert not contradicts(parse("\\boxed{x = 6}"))
    assert not contradicts(parse("\\boxed{x + 1 = 5}"))
    assert not contradicts(parse("\\boxed{5}"))


# --- the process pool is shut down, explicitly or at exit ---------------------------------------

_POOL_SCRIPT = textwrap.dedent(
    """
    import atexit, pickle
    from rewards.judges.rule import RuleJudge

    def workers(judge):
        return list(judge._pool._processes.values())

    with RuleJudge(mode="process", workers=1) as judge:
        assert judge.score_pairs([("18", "18.0")])[0].score == 1.0
        procs = workers(judge)
        pickle.loads(pickle.dumps(judge))  # a judge with a live pool still ships to a worker
    print("with:", "closed" if judge._pool is None and all(p.exitcode is not None for p in procs) else "open")

    left_open = []
    # registered before the judge's own hook, so it runs after it (atexit is last in, first out)
    atexit.register(lambda: print("exit:", "closed" if all(p.exitcode is not None for p in left_open)
                                  and judge._pool is None else "open"))
    judge = RuleJudge(mode="process", workers=1)
    assert judge.score_pairs([("1", "2")])[0].score == 0.0
    left_open += workers(judge)
    """
)


def test_rule_judge_pool_closes_with_context_and_at_exit():
    proc = subprocess.run([sys.executable, "-c", _POOL_SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "with: closed" in proc.stdout and "exit: closed" in proc.stdout, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
