"""Seeded Countdown problems: the verifiable task of Reflect, Retry, Reward (issue 14).

A problem gives a few numbers and a target; the answer is an equation over the numbers
(``+ - * /`` and parentheses, each number at most once) whose value is the target, checked
exactly by :func:`rewards.countdown.countdown_reward`.

* **Reachable by construction**: the target is the value of a random expression over a subset
  of the numbers (at least two of them), so every problem has an answer, and that expression
  is kept as the reference solution. Every intermediate value of the construction is a
  positive integer (``-`` only when the result stays positive, ``/`` only when it divides
  exactly), so the solution reads like one a person would write.
* **Difficulty** (:data:`LEVELS`): how many numbers (3, 4, 5), their range, and the largest
  target. The solution uses all the numbers or all but one, so more numbers means a longer
  equation to find.
* **Deterministic**: the same ``(n, seed, difficulty, split)`` gives the same problems on every
  machine (``random.Random`` seeded with a string, no global state).
* **Splits never overlap**: a problem belongs to the train or the held-out split by a hash
  (:func:`data.synthetic.split_of`, about 1 in 5 held out) of its *canonical key*, the sorted
  numbers and the target. The key, not the question text, because the same numbers listed in
  another order are the same problem and must land in the same split.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from data.examples import Example
from data.synthetic import draw_distinct
from rewards.countdown import countdown_reward, format_gold

DATA_SOURCE = "countdown"


@dataclass(frozen=True)
class Level:
    """What one difficulty level draws."""

    count: int  # how many numbers the problem gives
    low: int  # each number is drawn from [low, high]
    high: int
    max_target: int  # targets are in [1, max_target]


LEVELS: dict[int, Level] = {
    1: Level(count=3, low=1, high=20, max_target=100),
    2: Level(count=4, low=1, high=50, max_target=500),
    3: Level(count=5, low=1, high=100, max_target=1000),
}
DIFFICULTIES = tuple(LEVELS)


@dataclass(frozen=True)
class CountdownProblem:
    id: str
    numbers: tuple[int, ...]  # in the order the question lists them
    target: int
    solution: str  # a reference equation over a subset of the numbers, e.g. "(25 - 5) * 4"
    difficulty: int = 1
    split: str | None = None

    @property
    def key(self) -> str:
        """The canonical key: what makes two problems the same problem (and their split)."""
        return f"countdown:{','.join(map(str, sorted(self.numbers)))}:{self.target}"

    @property
    def question(self) -> str:
        listed = ", ".join(map(str, self.numbers))
        return (
            f"Using the numbers {listed}, write an equation that equals {self.target}. "
            "You may use +, -, *, / and parentheses, and each number at most once "
            "(you do not have to use all of them). "
            "Put only the equation in <answer> </answer>, for example <answer>(1 + 2) * 3</answer>."
        )

    def as_example(self) -> Example:
        return Example(
            id=self.id,
            data_source=DATA_SOURCE,
            question=self.question,
            answer=format_gold(self.numbers, self.target),  # "3, 7, 12 -> 25": what the verifier needs
            extra={
                "split": self.split or "",
                "difficulty": self.difficulty,
                "numbers": list(self.numbers),
                "target": self.target,
                "solution": self.solution,
            },
        )


def _random_solution(rng: random.Random, numbers: list[int]) -> tuple[str, int]:
    """A random expression over ``numbers`` (all of them), as text and value: combine two
    random sub-expressions until one is left. The larger operand goes first for ``-`` and
    ``/``, which are drawn only when the result is a positive integer."""
    terms = [(str(n), n, True) for n in numbers]  # (text, value, is_atom)
    while len(terms) > 1:
        first, second = (terms.pop(i) for i in sorted(rng.sample(range(len(terms)), 2), reverse=True))
        (ta, a, atom_a), (tb, b, atom_b) = sorted((first, second), key=lambda t: t[1], reverse=True)
        ops = ["+", "*"] + (["-"] if a > b else []) + (["/"] if b > 1 and a % b == 0 else [])
        op = rng.choice(ops)
        value = a + b if op == "+" else a * b if op == "*" else a - b if op == "-" else a // b
        if op in "+*" and rng.random() < 0.5:  # commutative: either order reads naturally
            (ta, atom_a), (tb, atom_b) = (tb, atom_b), (ta, atom_a)
        left = ta if atom_a else f"({ta})"
        right = tb if atom_b else f"({tb})"
        terms.append((f"{left} {op} {right}", value, False))
    text, value, _ = terms[0]
    return text, value


def _one_problem(rng: random.Random, level: Level) -> tuple[tuple[int, ...], int, str] | None:
    numbers = [rng.randint(level.low, level.high) for _ in range(level.count)]
    used = rng.sample(numbers, rng.choice((level.count - 1, level.count)))
    solution, target = _random_solution(rng, used)
    # a target outside the range, or equal to a given number (answerable by copying it), is redrawn
    if not 1 <= target <= level.max_target or target in numbers:
        return None
    return tuple(numbers), target, solution


def generate_countdown(n: int, seed: int = 0, difficulty: int = 1, split: str | None = None) -> list[Example]:
    """``n`` distinct Countdown problems as :class:`~data.examples.Example` rows.

    ``split`` = "train" or "test" keeps only problems of that split (see the module docstring);
    None keeps every problem. ``extra`` holds ``numbers``, ``target``, the reference
    ``solution``, ``difficulty`` and ``split``; ``answer`` is the gold the verifier reads,
    :func:`rewards.countdown.format_gold` (``"3, 7, 12 -> 25"``), so the ``countdown`` judge
    (:class:`rewards.judges.countdown_judge.CountdownJudge`) scores any record of it.
    """
    return [p.as_example() for p in generate_problems(n, seed=seed, difficulty=difficulty, split=split)]


def generate_problems(n: int, seed: int = 0, difficulty: int = 1, split: str | None = None) -> list[CountdownProblem]:
    """The problems behind :func:`generate_countdown`, with their typed fields."""
    if difficulty not in LEVELS:
        raise ValueError(f"difficulty must be one of {DIFFICULTIES}, got {difficulty!r}")
    level = LEVELS[difficulty]
    rng = random.Random(f"pasr-countdown:{seed}:{difficulty}")

    def draw(index: int) -> CountdownProblem | None:
        drawn = _one_problem(rng, level)
        if drawn is None:
            return None
        numbers, target, solution = drawn
        if countdown_reward(solution, numbers, target) != 1.0:  # a generator bug, never a bad row
            raise RuntimeError(f"reference solution {solution!r} does not reach {target} with {numbers}")
        return CountdownProblem(
            id=f"{DATA_SOURCE}:d{difficulty}:s{seed}:{split or 'all'}:{index}",
            numbers=numbers,
            target=target,
            solution=solution,
            difficulty=difficulty,
            split=split,
        )

    return draw_distinct(
        n, draw, lambda p: p.key, split=split, what=f"difficulty-{difficulty} Countdown problems", tries_per_item=200
    )
