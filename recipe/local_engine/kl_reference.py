"""The KL reference of the local engine's RL phase: the policy the phase started from, frozen.

Only each step's reference log-probs read it (a forward pass over the step's trained rows, a few
seconds of a step of about a minute on 2 CPU cores), yet held in memory it is one more copy of
the weights beside the policy, its gradients and AdamW's two moments for the whole phase: 0.54 GB
of SmolLM2-135M in fp32. With ``algo.ref_in_memory=false`` (the
default) it is read from the checkpoint the phase started from (the warm-up's pinned end, or the
base model without a warm-up) for those log-probs and dropped right after, so the generation and
the update, where a step's memory peaks, run without it; loading it from the page cache takes
about 0.15 s. That checkpoint holds the weights in the policy's dtype, so both ways give the same
reference log-probs (verl's counterpart is ``ref.fsdp_config.param_offload``, which parks the
reference in host memory rather than dropping it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class KLReference:
    """A frozen reference model, held (``keep``) or loaded by ``load`` for each :meth:`apply`."""

    def __init__(self, load: Callable[[], object], keep: bool):
        self._load = load
        self._held = load() if keep else None

    @classmethod
    def held(cls, model) -> KLReference:
        """A reference that is this model, kept in memory."""
        return cls(lambda: model, keep=True)

    def apply(self, fn: Callable[[object], T]) -> T:
        """``fn(reference model)``: with the held model, or one loaded now, which is dropped (its
        memory returned) when ``fn`` returns."""
        return fn(self._held if self._held is not None else self._load())
