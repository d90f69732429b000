"""Refine and plain rows in ONE generation batch, and slicing them apart afterwards.

verl's ``fit()`` hands the rollout manager a batch in which every prompt is already repeated
``rollout.n`` times, interleaved (rows ``q0 q0 .. q0 q1 q1 ..``), each row carrying the ``uid`` of
its prompt. PASR also needs ``n_plain`` samples per prompt under the plain system prompt, only as
a baseline. They are appended to the same batch, so refine and plain samples come out of a single
``generate_sequences`` call (the pattern verl uses for ReMax's greedy baselines: a second call
after the rollout replicas went to sleep is what that pattern avoids):

    [ refine rows: n_queries x n_refine, original order ][ plain rows: n_queries x n_plain ]

Rows are told apart by position (:class:`Layout`), not by an extra column: every non-tensor
column is forwarded to the agent loop as a keyword argument, and concrete agent loops may
reject unknown ones. The refine rows keep the exact order and values of the input, so ``fit()``
can ``union`` them with its own copy of the batch.

Only ``raw_prompt`` (the chat messages the agent loop tokenises) is changed: its system message
is set to the refine prompt for refine rows and to the plain prompt for plain rows, on copies, so
the caller's batch and messages shared between repeated rows are never mutated. Under
``pasr.prefill_think`` the PASR rollout also names the agent loop of every row
(:func:`with_agent`: ``agent_name``, the column verl's agent-loop workers dispatch on).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

UID = "uid"
RAW_PROMPT = "raw_prompt"
AGENT_NAME = "agent_name"  # the agent loop verl's workers run for a row (else rollout.agent.default_agent_loop)
# the agent loop of PASR's rows under pasr.prefill_think: recipe.verl_engine.agent_loop.ThinkPrefillAgentLoop
THINK_PREFILL_AGENT = "pasr_think_prefill"


class PasrBatchError(ValueError):
    """A generation batch that does not have the shape PASR relies on."""


@dataclass(frozen=True)
class Layout:
    """Where the refine and plain rows of a combined batch are."""

    n_queries: int
    n_refine: int
    n_plain: int

    @property
    def refine_rows(self) -> int:
        return self.n_queries * self.n_refine

    @property
    def plain_rows(self) -> int:
        return self.n_queries * self.n_plain

    @property
    def total(self) -> int:
        return self.refine_rows + self.plain_rows


def object_array(values: Sequence[Any]) -> np.ndarray:
    """A 1-D object array holding ``values`` as they are (lists of dicts stay lists)."""
    arr = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        arr[i] = v
    return arr


def with_system(messages: Sequence[dict] | np.ndarray, system: str) -> list[dict]:
    """A copy of ``messages`` whose system message is ``system`` (replaced, or inserted first)."""
    msgs = [dict(m) for m in list(messages)]
    for m in msgs:
        if m.get("role") == "system":
            m["content"] = system
            return msgs
    return [{"role": "system", "content": system}] + msgs


def query_uids(gen_batch, n_refine: int, size_key: str = "pasr.n_refine") -> np.ndarray:
    """The ``uid`` of each prompt, checking the rows come in runs of ``n_refine`` per prompt
    (the method's group size, the config key ``size_key``)."""
    if UID not in gen_batch.non_tensor_batch:
        raise PasrBatchError("generation batch has no 'uid' column (verl adds it in fit() before generating)")
    uids = np.asarray(gen_batch.non_tensor_batch[UID])
    n_rows = len(uids)
    if n_refine < 1 or n_rows % n_refine != 0:
        raise PasrBatchError(
            f"generation batch has {n_rows} rows, not a multiple of rollout.n = {size_key} = {n_refine}"
        )
    groups = uids.reshape(-1, n_refine)
    if not (groups == groups[:, :1]).all():
        raise PasrBatchError(
            f"generation batch rows are not grouped by uid in runs of {size_key} "
            f"(verl repeats prompts with interleave=True; did rollout.n differ from {size_key}?)"
        )
    firsts = groups[:, 0]
    if len(set(firsts.tolist())) != len(firsts):
        raise PasrBatchError("the same uid appears in two separate runs of the generation batch")
    return firsts


def _set_system(batch, system: str) -> None:
    if RAW_PROMPT not in batch.non_tensor_batch:
        raise PasrBatchError("generation batch has no 'raw_prompt' column (chat messages) to set the system prompt in")
    _set_messages(batch, [with_system(m, system) for m in batch.non_tensor_batch[RAW_PROMPT]])


def _set_messages(batch, messages: Sequence[Sequence[dict]]) -> None:
    if len(messages) != len(batch):
        raise PasrBatchError(f"{len(messages)} chats for a batch of {len(batch)} rows")
    batch.non_tensor_batch = dict(batch.non_tensor_batch)
    batch.non_tensor_batch[RAW_PROMPT] = object_array([list(m) for m in messages])


def with_system_prompt(batch, system: str):
    """A shallow copy of ``batch`` whose rows carry ``system`` as their system message."""
    out = batch.slice(0, None)
    _set_system(out, system)
    out.meta_info = dict(batch.meta_info)
    return out


def with_messages(batch, messages: Sequence[Sequence[dict]]):
    """A shallow copy of ``batch`` whose row ``i`` asks ``messages[i]`` (a whole chat); every other
    column (uid, gold, data source, ...) is the row's own. How a follow-up pass (RRR's reflections
    and retries) is sent through the agent loop, which applies the chat template itself."""
    out = batch.slice(0, None)
    _set_messages(out, messages)
    out.meta_info = dict(batch.meta_info)
    return out


def with_agent(batch, agent: str):
    """A shallow copy of ``batch`` whose every row is generated by verl's agent loop ``agent`` (a
    name in verl's agent-loop registry); the column travels with the rows to the output, as verl's
    own default does."""
    out = batch.slice(0, None)
    out.non_tensor_batch = {**batch.non_tensor_batch, AGENT_NAME: object_array([agent] * len(batch))}
    out.meta_info = dict(batch.meta_info)
    return out


def check_row_order(output, expected_uids: np.ndarray) -> None:
    """Raise when ``output`` carries ``uid`` (verl's agent loop forwards the input columns when its
    own reward loop is off) in another order than ``expected_uids``: a rollout manager that
    reordered rows would otherwise pair responses with the wrong prompts silently."""
    if UID in output.non_tensor_batch:
        got = np.asarray(output.non_tensor_batch[UID])
        if not np.array_equal(got, np.asarray(expected_uids)):
            raise PasrBatchError("rollout output rows are not in the order of the input rows (uid mismatch)")


def build_combined_batch(gen_batch, *, n_refine: int, n_plain: int, refine_system: str, plain_system: str):
    """``(combined, layout)``: the refine rows of ``gen_batch`` followed by ``n_plain`` plain rows
    per prompt. ``gen_batch`` itself is left unchanged."""
    from verl import DataProto

    if n_plain < 1:
        raise PasrBatchError(f"pasr.n_plain must be >= 1, got {n_plain}")
    uids = query_uids(gen_batch, n_refine)
    layout = Layout(n_queries=len(uids), n_refine=n_refine, n_plain=n_plain)

    refine = gen_batch.slice(0, None)
    _set_system(refine, refine_system)
    plain = gen_batch.select_idxs(np.arange(0, len(gen_batch), n_refine)).repeat(repeat_times=n_plain, interleave=True)
    _set_system(plain, plain_system)
    combined = DataProto.concat([refine, plain])
    combined.meta_info = dict(gen_batch.meta_info)
    return combined, layout


def split_combined(output, layout: Layout, expected_uids: np.ndarray | None = None):
    """``(refine_part, plain_part)`` of the rollout manager's output for a combined batch, its row
    order checked against ``expected_uids`` (:func:`check_row_order`)."""
    if len(output) != layout.total:
        raise PasrBatchError(f"rollout returned {len(output)} rows for a combined batch of {layout.total}")
    if expected_uids is not None:
        check_row_order(output, expected_uids)
    return output.slice(0, layout.refine_rows), output.slice(layout.refine_rows, layout.total)
