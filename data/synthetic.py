"""Seeded synthetic arithmetic word problems: the default data of CPU runs.

Small enough for a 135M model to learn something in minutes, checkable exactly, and carrying
their own solution steps so the local engine can build warm-up reasoning traces
("34 - 12 = 22", "22 + 7 = 29").

* difficulty 1: one + or - step; 2: two steps; 3: three steps mixing + and - (sometimes one
  step multiplies by 2 or 3).
* Every number stays a non-negative integer below 200, intermediate results included.
* Deterministic: the same ``(n, seed, difficulty, split)`` gives the same problems on every
  machine (``random.Random`` seeded with a string, no global state).
* Train / held-out separation does not rely on a seed convention: each question belongs to
  exactly one split by a hash of its text (about 1 in 5 is held out), so a ``"train"`` set and
  a ``"test"`` set never share a question, whatever seeds or sizes they were drawn with.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from data.examples import Example

MAX_VALUE = 199  # every number in a problem is < 200
HELDOUT_BUCKETS = 5  # one hash bucket in five is held out
SPLITS = ("train", "test")
T = TypeVar("T")
DIFFICULTIES = (1, 2, 3)

_NAMES_SHE = ("Mia", "Ava", "Lena", "Sofia", "Priya", "Chloe", "Nora", "Emma", "Zara", "Hana", "Lucy", "Rosa")
_NAMES_HE = ("Sam", "Leo", "Omar", "Ben", "Ravi", "Tom", "Kai", "Jonas", "Diego", "Ethan", "Max", "Yusuf")
_COLLECTIBLES = (
    "marbles",
    "stickers",
    "stamps",
    "seashells",
    "trading cards",
    "beads",
    "coins",
    "pebbles",
    "buttons",
    "postcards",
    "keychains",
    "comic books",
)
_PLACES = (
    ("bakery", ("muffins", "cookies", "cupcakes", "bread rolls")),
    ("school library", ("books", "magazines")),
    ("toy store", ("toy cars", "puzzles", "yo-yos")),
    ("farm stand", ("apples", "pumpkins", "melons")),
    ("flower shop", ("roses", "tulips", "sunflowers")),
    ("stationery shop", ("notebooks", "pencils", "erasers")),
)
_CONNECTORS = ("Then", "After that,", "Later,", "Next,")
_MULTIPLY_WORDS = {2: "doubles", 3: "triples"}


@dataclass(frozen=True)
class Step:
    op: str  # "+", "-" or "*"
    a: int
    b: int
    result: int
    text: str  # "34 - 12 = 22"


@dataclass(frozen=True)
class SyntheticProblem:
    id: str
    question: str
    answer: str
    steps: list[Step] = field(hash=False)
    difficulty: int = 1
    split: str | None = None

    def as_example(self) -> Example:
        return Example(
            id=self.id,
            data_source="synthetic",
            question=self.question,
            answer=self.answer,
            extra={
                "split": self.split or "",
                "difficulty": self.difficulty,
                "steps": [step.text for step in self.steps],
            },
        )


def apply_op(op: str, a: int, b: int) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    raise ValueError(f"unknown operation {op!r}")


def split_of(question: str) -> str:
    """The split a question belongs to ("train" or "test"), from a hash of its text."""
    digest = hashlib.sha256(question.encode("utf-8")).digest()
    return "test" if int.from_bytes(digest[:8], "big") % HELDOUT_BUCKETS == 0 else "train"


@dataclass(frozen=True)
class _Frame:
    """One story: who holds the items, how they gain and lose them, and the question."""

    intro: str
    subject: str  # how a mid-sentence clause names the holder instead of the pronoun
    pronoun: str  # "She" / "He" / "It"
    plus: tuple[str, ...]
    minus: tuple[str, ...]
    times: str | None  # "{times} {poss} collection", or None when multiplying makes no sense
    question: str


def _person_frame(rng: random.Random) -> _Frame:
    she = rng.random() < 0.5
    name = rng.choice(_NAMES_SHE if she else _NAMES_HE)
    friend = rng.choice([n for n in _NAMES_SHE + _NAMES_HE if n != name])
    things = rng.choice(_COLLECTIBLES)
    poss = "her" if she else "his"
    intro = rng.choice(
        (
            f"{name} has {{a}} {things}.",
            f"{name} owns {{a}} {things}.",
            f"{name} starts the week with {{a}} {things}.",
            f"{name} has a collection of {{a}} {things}.",
        )
    )
    return _Frame(
        intro=intro,
        subject=name,
        pronoun="She" if she else "He",
        plus=(
            "finds {b} more",
            "buys {b} more",
            f"gets {{b}} more from {friend}",
            "wins {b} more in a game",
            f"is given {{b}} more {things} by {friend}",
        ),
        minus=(
            f"gives {{b}} to {friend}",
            "loses {b}",
            "trades away {b}",
            f"gives {{b}} {things} to {friend}",
            f"sells {{b}} to {friend}",
        ),
        times=f"{{times}} {poss} collection",
        question=rng.choice(
            (
                f"How many {things} does {name} have now?",
                f"How many {things} does {name} have in the end?",
                f"How many {things} does {name} end up with?",
            )
        ),
    )


def _place_frame(rng: random.Random) -> _Frame:
    place, items = rng.choice(_PLACES)
    things = rng.choice(items)
    intro = rng.choice(
        (
            f"The {place} has {{a}} {things}.",
            f"A {place} starts the morning with {{a}} {things}.",
            f"There are {{a}} {things} at the {place}.",
        )
    )
    return _Frame(
        intro=intro,
        subject=f"the {place}",
        pronoun="It",
        plus=(
            "receives a delivery of {b} more",
            "puts out {b} more",
            "gets {b} more from a supplier",
        ),
        minus=(
            "sells {b}",
            "gives away {b}",
            f"sells {{b}} {things} before noon",
        ),
        times="{times} its stock",
        question=rng.choice(
            (
                f"How many {things} does the {place} have now?",
                f"How many {things} are at the {place} now?",
            )
        ),
    )


def _bus_frame(rng: random.Random) -> _Frame:
    vehicle = rng.choice(("bus", "train", "tram", "ferry"))
    return _Frame(
        intro=rng.choice((f"A {vehicle} has {{a}} passengers.", f"There are {{a}} passengers on a {vehicle}.")),
        subject=f"the {vehicle}",
        pronoun="It",
        plus=("picks up {b} passengers at the next stop", "takes on {b} more passengers"),
        minus=("drops off {b} passengers at the next stop", "lets {b} passengers off"),
        times=None,
        question=f"How many passengers are on the {vehicle} now?",
    )


def _choose_ops(rng: random.Random, difficulty: int, can_multiply: bool) -> list[str]:
    if difficulty == 1:
        return [rng.choice("+-")]
    if difficulty == 2:
        return [rng.choice("+-"), rng.choice("+-")]
    third = rng.choice("+-*" if can_multiply else "+-")
    ops = ["+", "-", third]
    rng.shuffle(ops)
    return ops


def _draw_steps(rng: random.Random, ops: list[str]) -> tuple[int, list[Step]]:
    start = rng.randint(8, 99)
    current, steps = start, []
    for op in ops:
        if op == "*" and current * 2 > MAX_VALUE:
            op = "-"
        if op == "+" and current >= MAX_VALUE:
            op = "-"
        if op == "-" and current < 2:
            op = "+"
        if op in "+-":  # b >= 2 where possible, so "1 passengers" never appears
            high = min(60, MAX_VALUE - current) if op == "+" else min(60, current - 1)
            b = rng.randint(min(2, high), high)
        else:
            b = 3 if current * 3 <= MAX_VALUE and rng.random() < 0.5 else 2
        result = apply_op(op, current, b)
        steps.append(Step(op=op, a=current, b=b, result=result, text=f"{current} {op} {b} = {result}"))
        current = result
    return start, steps


def _render(rng: random.Random, frame: _Frame, start: int, steps: list[Step]) -> str:
    clauses, last_template = [], None
    for step in steps:
        if step.op == "*":
            clauses.append(frame.times.format(times=_MULTIPLY_WORDS[step.b]))
            continue
        templates = frame.plus if step.op == "+" else frame.minus
        template = rng.choice([t for t in templates if t != last_template] or templates)
        clauses.append(template.format(b=step.b))
        last_template = template
    parts = [frame.intro.format(a=start)]
    style = rng.randrange(3) if len(clauses) > 1 else 0
    if style == 1 and len(clauses) == 2:
        parts.append(f"{frame.pronoun} {clauses[0]} and then {clauses[1]}.")
    elif style == 1:
        parts.append(f"{frame.pronoun} {', then '.join(clauses[:-1])}, and finally {clauses[-1]}.")
    else:
        connectors = list(_CONNECTORS)
        for i, clause in enumerate(clauses):
            if i == 0:
                who = frame.pronoun if style == 0 or len(clauses) == 1 else f"First, {frame.pronoun.lower()}"
                parts.append(f"{who} {clause}.")
            else:
                connector = connectors.pop(rng.randrange(len(connectors)))
                who = frame.pronoun.lower() if rng.random() < 0.7 else frame.subject
                parts.append(f"{connector} {who} {clause}.")
    parts.append(frame.question)
    return " ".join(parts)


def _one_problem(rng: random.Random, difficulty: int) -> tuple[str, list[Step]]:
    frame = rng.choice((_person_frame, _person_frame, _place_frame, _bus_frame))(rng)
    ops = _choose_ops(rng, difficulty, can_multiply=frame.times is not None)
    start, steps = _draw_steps(rng, ops)
    return _render(rng, frame, start, steps), steps


def draw_distinct(
    n: int,
    draw: Callable[[int], T | None],
    key: Callable[[T], str],
    *,
    split: str | None,
    what: str,
    tries_per_item: int = 100,
) -> list[T]:
    """``n`` items from ``draw(index)`` (None: draw again), distinct by ``key`` and, with
    ``split``, only those whose key :func:`split_of` puts in that split. Every seeded generator
    of this project (arithmetic, Countdown) draws its problems this way, so "same question, same
    split" holds for all of them. Gives up with a clear error after ``tries_per_item * n + 1000``
    draws (a level too small for ``n`` distinct problems)."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if split is not None and split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS} or None, got {split!r}")
    items: list[T] = []
    seen: set[str] = set()
    for _ in range(tries_per_item * n + 1000):
        if len(items) == n:
            return items
        item = draw(len(items))
        if item is None or key(item) in seen or (split is not None and split_of(key(item)) != split):
            continue
        seen.add(key(item))
        items.append(item)
    if len(items) == n:
        return items
    raise ValueError(f"could not draw {n} distinct {what} (got {len(items)})")


def generate_problems(n: int, seed: int = 0, difficulty: int = 1, split: str | None = None) -> list[SyntheticProblem]:
    """``n`` distinct problems. ``split`` = "train" or "test" keeps only questions of that
    split (see :func:`split_of`); None keeps every question."""
    if difficulty not in DIFFICULTIES:
        raise ValueError(f"difficulty must be one of {DIFFICULTIES}, got {difficulty!r}")
    rng = random.Random(f"pasr-synthetic:{seed}:{difficulty}")

    def draw(index: int) -> SyntheticProblem:
        question, steps = _one_problem(rng, difficulty)
        return SyntheticProblem(
            id=f"synthetic:d{difficulty}:s{seed}:{split or 'all'}:{index}",
            question=question,
            answer=str(steps[-1].result),
            steps=steps,
            difficulty=difficulty,
            split=split,
        )

    return draw_distinct(n, draw, lambda p: p.question, split=split, what=f"difficulty-{difficulty} problems")


def split_problems(
    n_train: int, n_heldout: int, seed: int = 0, difficulty: int = 1
) -> tuple[list[SyntheticProblem], list[SyntheticProblem]]:
    """A training set and a held-out set that share no question."""
    return (
        generate_problems(n_train, seed=seed, difficulty=difficulty, split="train"),
        generate_problems(n_heldout, seed=seed, difficulty=difficulty, split="test"),
    )
