"""Generation of one step's rollouts on the local engine.

For each of the B queries: ``n_refine`` chats with the refine system prompt and ``n_plain``
with the plain one, all sampled in **one** batched ``generate`` call (the plain rollouts only
provide the refine reward's baseline). Both prompts ask for ``<think>…</think><answer>…</answer>``
(only the refine prompt invites ``<refine>``), so both get the same ``<think>`` prefill
(``pasr.prefill_think``, as the verl engine's agent loop prefills). Token ids are kept as sampled
for the update.
"""

from __future__ import annotations

from dataclasses import dataclass

from data.examples import Example
from data.records import PLAIN, REFINE
from prompts import THINK_PREFILL, PromptSet
from recipe.scoring import Rollout
from runtime.decoding import decode_response
from runtime.hf_generate import SamplingParams, generate_ids, render_prompts


@dataclass
class GeneratedRollout:
    rollout: Rollout
    prompt_ids: list[int]
    response_ids: list[int]


def generate_step(
    model,
    tokenizer,
    queries: list[Example],
    prompts: PromptSet,
    n_refine: int,
    n_plain: int,
    params: SamplingParams,
    batch_size: int,
    prefill_think: bool,
    on_finished=None,
) -> list[GeneratedRollout]:
    """All refine and plain rollouts of ``queries`` (refine first within each query);
    ``on_finished(n)`` as rollouts finish (:func:`runtime.hf_generate.generate_ids`)."""
    specs = []  # (example, variant, sample_index)
    for ex in queries:
        specs += [(ex, REFINE, k) for k in range(n_refine)] + [(ex, PLAIN, k) for k in range(n_plain)]
    prefill = THINK_PREFILL if prefill_think else ""
    # Chat rendering is deterministic per (question, variant): render once, reuse for each sample.
    rendered: dict[tuple[str, str], list[int]] = {}
    for ex in queries:
        rendered[(ex.id, REFINE)] = render_prompts(tokenizer, [prompts.refine_chat(ex.question)], prefill)[0]
        # The plain prompt asks for the same <think>…</think><answer>…</answer> format without
        # refine (the paper's standard rollouts), so it gets the same prefill.
        rendered[(ex.id, PLAIN)] = render_prompts(tokenizer, [prompts.plain_chat(ex.question)], prefill)[0]
    prompt_ids = [rendered[(ex.id, variant)] for ex, variant, _ in specs]
    outputs = generate_ids(model, tokenizer, prompt_ids, params, batch_size=batch_size, on_finished=on_finished)
    result = []
    for (ex, variant, k), p_ids, (r_ids, finish) in zip(specs, prompt_ids, outputs):
        text = decode_response(tokenizer, r_ids, prefill)
        result.append(
            GeneratedRollout(
                Rollout(ex.id, ex.data_source, ex.question, ex.answer, variant, text, len(r_ids), finish, k),
                p_ids,
                r_ids,
            )
        )
    return result
