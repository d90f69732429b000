"""The units of a ``pasr eval`` run's work: one sample to produce or judge (:class:`_Item`)
and a generation that failed (:class:`_GenerationFailure`, recorded with its error).

Moved out of :mod:`eval.run`; shared by :mod:`eval.judging`, :mod:`eval.rrr_driver` and
:mod:`eval.chunks`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eval.reflect_retry import RrrPass
from eval.resume import Key


@dataclass
class _Item:
    dataset: str
    example: Any  # data.examples.Example
    sample_index: int
    attempt: RrrPass | None = None  # reflect-retry: the kept first attempt of an undecided sample

    @property
    def key(self) -> Key:
        return (self.dataset, self.example.id, self.sample_index)


class _GenerationFailure:
    def __init__(self, error: str):
        self.error = error
