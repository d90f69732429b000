"""The GPU and batch arithmetic verl asserts only once its workers are up, and the nearest sizes
that pass: found by arithmetic (multiples and divisors), never by trying one number after
another, so a ten-digit batch answers as fast as 128.
"""

from __future__ import annotations

from math import gcd, isqrt

from recipe.plan_check.compose import select
from recipe.plan_check.layout import ACTOR, Layout, read_layout

MAX_DIVISOR_SEARCH = 10**12  # above this a batch's divisors are not searched (10**6 trial divisions)


def batch_problems(config, per_node: int | None = None) -> list[str]:
    """The GPU and batch arithmetic verl asserts only once its workers are up, one line each
    (a number that is not a whole number >= 1 is its own line, and the arithmetic on it waits).

    * ``rollout.tensor_model_parallel_size`` divides ``trainer.n_gpus_per_node`` (a vLLM replica
      sits on one node);
    * a step's ``data.train_batch_size x rollout.n`` trained rows split evenly over the training
      GPUs (``trainer.balance_batch`` partitions them into equal parts, one a GPU; without it the
      dispatch chunks them the same way);
    * they make whole mini-batches of ``ppo_mini_batch_size x rollout.n`` rows, and a mini-batch
      splits evenly over the data-parallel ranks (verl's engine worker asserts it);
    * a micro-batch holds a whole sequence: with ``use_dynamic_bsz`` each ``*_max_token_len_per_gpu``
      is at least ``max_prompt_length + max_response_length``, without it the mini-batch a GPU
      gets is a whole number of ``ppo_micro_batch_size_per_gpu``.

    ``per_node``: the training GPUs a node in place of ``trainer.n_gpus_per_node`` (the number that
    fits the nodes, when the config's does not: the lines are then right once it is set)."""
    layout, bad = read_layout(config)
    if layout is None:
        return bad
    if per_node is not None:
        layout = Layout({**layout.values, "trainer.n_gpus_per_node": per_node})
    problems = []
    nnodes, per_node, gpus, tp = layout.nnodes, layout.per_node, layout.gpus, layout.tp
    if per_node % tp:
        problems.append(
            f"actor_rollout_ref.rollout.tensor_model_parallel_size={tp} "
            f"does not divide trainer.n_gpus_per_node={per_node}: "
            "a vLLM replica holds tp GPUs of one node"
        )
    bsz, n, mini, dp = layout.bsz, layout.n, layout.mini, layout.dp
    rows = bsz * n
    if rows % gpus:
        step = gpus // gcd(n, gpus)  # train_batch_size x n splits over the GPUs: a multiple of this
        problems.append(
            f"data.train_batch_size={bsz} x rollout.n={n} = {rows} trained rows a step do not split evenly over the "
            f"{gpus} training GPU(s) (trainer.nnodes={nnodes} x trainer.n_gpus_per_node={per_node}): "
            f"verl gives every GPU the same number of rows; use a train_batch_size whose x{n} is a multiple of {gpus}"
            + _suggest(_multiples_near(bsz, step))
        )
    if mini > bsz or bsz % mini:
        problems.append(
            f"data.train_batch_size={bsz} is not a whole number of actor.ppo_mini_batch_size={mini} "
            f"(a step updates in mini-batches of {mini} x {n} rows)"
        )
    elif (mini * n) % dp:
        problems.append(
            f"actor.ppo_mini_batch_size={mini} x rollout.n={n} = {mini * n} rows a mini-batch do not split over {dp} "
            f"data-parallel rank(s): verl asserts it; use a mini-batch whose x{n} is a multiple of {dp}"
            + _suggest(_divisors_near(bsz, dp // gcd(n, dp), mini))
        )
    seq = layout.prompt + layout.response
    if select(config, f"{ACTOR}.use_dynamic_bsz", False):
        for key in (
            f"{ACTOR}.ppo_max_token_len_per_gpu",
            "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu",
            "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu",
        ):
            limit = layout[key]
            if limit is not None and limit < seq:
                problems.append(
                    f"{key}={limit} is less than a whole sequence (max_prompt_length + max_response_length = {seq})"
                )
    else:
        micro = layout[f"{ACTOR}.ppo_micro_batch_size_per_gpu"]
        if micro is None:
            problems.append(
                "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu is unset and use_dynamic_bsz=false: set one"
            )
        elif (mini * n // dp) % micro:
            problems.append(
                f"a GPU's share of a mini-batch ({mini} x {n} / {dp} = {mini * n // dp} rows) is not a whole number of "
                f"ppo_micro_batch_size_per_gpu={micro}"
            )
    return problems


def _suggest(values: list[int]) -> str:
    return f" (e.g. {' or '.join(str(v) for v in values)})" if values else ""


def _multiples_near(value: int, step: int) -> list[int]:
    """The multiples of ``step`` just below and just above ``value`` (>= 1)."""
    below = value // step * step
    return [v for v in dict.fromkeys([below, below + step]) if v >= 1 and v != value]


def _divisors_near(total: int, step: int, value: int) -> list[int]:
    """The divisors of ``total`` that are multiples of ``step``, just below and just above
    ``value``: ``step x k`` for the divisors ``k`` of ``total / step``, found by trial division up
    to its square root (none for a ``total`` above :data:`MAX_DIVISOR_SEARCH`)."""
    if total % step or total > MAX_DIVISOR_SEARCH:
        return []
    q = total // step
    divisors = set()
    for k in range(1, isqrt(q) + 1):
        if q % k == 0:
            divisors.update((k * step, q // k * step))
    below = max((d for d in divisors if d < value), default=None)
    above = min((d for d in divisors if d > value), default=None)
    return [v for v in (below, above) if v is not None]
