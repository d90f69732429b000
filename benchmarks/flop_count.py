"""FLOP counting for :mod:`benchmarks.step_floors` (pure: no model, no timing).

The floor of a part counts the FLOPs of the very step that was timed, from the model's shapes
(:class:`Shapes`) and the step's real tokens: each distinct prompt and each prompt prefix
several prompts share counted once, as the engine runs them; responses at their sampled
lengths, no padding; causal attention over each token's own context. Each :class:`Work` item
keeps the rows of the call it belongs to, since the rows set the matmul shape and so the rate
(:mod:`benchmarks.matmul_rates`) the floor divides by.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runtime.prompt_prefill import shared_prefixes


# ---------------------------------------------------------------- FLOP counting (pure)
@dataclass(frozen=True)
class Shapes:
    """What a decoder's FLOPs depend on (a Llama-style model: grouped-query attention, gated MLP,
    an output layer as wide as the vocabulary)."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int

    @classmethod
    def of(cls, config) -> Shapes:
        heads = config.num_attention_heads
        return cls(
            config.hidden_size,
            config.num_hidden_layers,
            heads,
            config.num_key_value_heads,
            getattr(config, "head_dim", None) or config.hidden_size // heads,
            config.intermediate_size,
            config.vocab_size,
        )

    def linear_shapes(self, rows: int) -> list[tuple[int, int, int]]:
        """One layer's matmuls for ``rows`` tokens, as ``(m, k, n)``: q, k, v, o; gate, up, down."""
        h, q, kv, i = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim, self.intermediate
        return [(rows, h, q), (rows, h, kv), (rows, h, kv), (rows, q, h), (rows, h, i), (rows, h, i), (rows, i, h)]

    @property
    def token_flops(self) -> int:
        """Forward FLOPs of one token through every layer's linear maps."""
        return self.layers * sum(2 * k * n for _, k, n in self.linear_shapes(1))

    @property
    def pair_flops(self) -> int:
        """Forward FLOPs of one query attending to one key in every layer: its score and its
        weighted value, each a dot product of ``head_dim`` per query head."""
        return 4 * self.layers * self.heads * self.head_dim

    @property
    def logit_flops(self) -> int:
        """Forward FLOPs of one row of logits (the output layer)."""
        return 2 * self.hidden * self.vocab


@dataclass(frozen=True)
class Work:
    """FLOPs of one kind (``linear`` | ``attention`` | ``logits``) in calls of ``rows`` rows:
    the rows set the matmul shape, hence the rate the floor divides by."""

    kind: str
    rows: int
    flops: float


def _triangle(n: int) -> int:
    """Query-key pairs of ``n`` causal tokens from position 0: 1 + 2 + ... + n."""
    return n * (n + 1) // 2


def pass_work(shapes: Shapes, prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]]) -> list[Work]:
    """One forward pass that scores ``responses`` after ``prompts`` (the update's log-probs, the
    warm-up's loss), in one call.

    Prompt pieces are counted once each, as :mod:`runtime.prompt_prefill` runs them: each prefix
    that rows share (:func:`runtime.prompt_prefill.shared_prefixes`) and each distinct prompt's
    rest. A response of ``R`` tokens feeds ``R - 1`` of them (its last token is predicted, never
    fed) and needs ``R`` rows of logits. Every fed token attends to itself and what precedes it."""
    if len(prompts) != len(responses):
        raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
    shared = shared_prefixes([list(p) for p in prompts]) if prompts else []
    prefixes = {tuple(p[:n]) for p, n in zip(prompts, shared) if n}
    rests = {(tuple(p), n) for p, n in zip(prompts, shared)}
    tokens = sum(map(len, prefixes)) + sum(len(p) - n for p, n in rests)
    pairs = sum(_triangle(len(x)) for x in prefixes) + sum(_triangle(len(p)) - _triangle(n) for p, n in rests)
    logits = 0
    for p, r in zip(prompts, responses):
        if r:
            tokens += len(r) - 1
            pairs += _triangle(len(p) + len(r) - 1) - _triangle(len(p))
            logits += len(r)
    return [
        w
        for w in (
            Work("linear", tokens, tokens * shapes.token_flops),
            Work("attention", tokens, pairs * shapes.pair_flops),
            Work("logits", logits, logits * shapes.logit_flops),
        )
        if w.flops
    ]


def generation_work(
    shapes: Shapes, prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]], batch_size: int
) -> list[Work]:
    """Generating ``responses`` to ``prompts`` in the engine's batches
    (:func:`runtime.hf_generate.length_batches` of ``batch_size``): each batch's prompt pass
    (:func:`pass_work`), then one decode step per new token with the rows still writing.

    The FLOPs are those of :func:`pass_work` over the same rows (the same tokens are fed and the
    same logits taken), but a decode step's matmuls have only as many rows as rows are still
    writing, which is why its rate, and so its floor, differ from a pass's. A row that has
    stopped costs nothing here (the engine drops stopped rows every 16 tokens)."""
    from runtime.hf_generate import length_batches

    work: list[Work] = []
    for batch in length_batches([len(p) for p in prompts], batch_size):
        rows = [(prompts[i], responses[i]) for i in batch]
        work += pass_work(shapes, [p for p, _ in rows], [[] for _ in rows])
        first = sum(1 for _, r in rows if r)  # each row's first token: the prompt pass's last hidden state
        if first:
            work.append(Work("logits", first, first * shapes.logit_flops))
        for j in range(1, max((len(r) for _, r in rows), default=0)):
            live = [(p, r) for p, r in rows if len(r) > j]  # feeding token j - 1 to sample token j
            m = len(live)
            work += [
                Work("linear", m, m * shapes.token_flops),
                Work("attention", m, sum(len(p) + j for p, _ in live) * shapes.pair_flops),
                Work("logits", m, m * shapes.logit_flops),
            ]
    return work


def micro_batches(prompts: Sequence, responses: Sequence, size: int) -> list[tuple[list, list]]:
    """Rows split as ``DataProto.split(size)`` splits the update's batch: in order, ``size`` each."""
    return [(list(prompts[i : i + size]), list(responses[i : i + size])) for i in range(0, len(prompts), size)]


def total_flops(work: Sequence[Work]) -> float:
    return sum(w.flops for w in work)
