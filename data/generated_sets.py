"""The generated sets (:data:`data.dataset_specs.GENERATED`: ``synthetic``, ``countdown``) as
examples: made by their seeded generators, not read from a file.
"""

from __future__ import annotations

from typing import Any

from data.examples import DatasetError, Example

DEFAULT_DATA_SEED = 1234  # the local engine's data.seed: the generator seed of its training problems


def heldout_seed(data_seed: int) -> int:
    """The generator seed of the held-out problems of a run trained on seed ``data_seed``. With
    ``split="test"`` they share no question with the training split whatever the seeds; the
    different seed also gives them another order, so a run's first held-out problems are not
    its first training problems' neighbours."""
    return data_seed + 1


def _load_generated(name: str, split: str, limit: int | None, options: dict[str, Any]) -> list[Example]:
    """``synthetic`` or ``countdown``: both seeded generators take ``seed``, ``difficulty`` and ``n``."""
    if name == "countdown":
        from data.countdown import generate_problems
    else:
        from data.synthetic import generate_problems

    unknown = set(options) - {"seed", "difficulty", "n"}
    if unknown:
        raise DatasetError(f"unknown option(s) for {name}: {', '.join(sorted(unknown))} (use seed, difficulty, n)")
    n = options.get("n")
    n = n if n is not None else (limit if limit is not None else 1000)
    if limit is not None:
        n = min(n, limit)
    try:
        problems = generate_problems(
            int(n), seed=int(options.get("seed") or 0), difficulty=int(options.get("difficulty") or 1), split=split
        )
    except ValueError as exc:
        raise DatasetError(str(exc)) from None
    return [p.as_example() for p in problems]
