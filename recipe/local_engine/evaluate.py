"""Greedy evaluation of the policy on held-out problems during training (start, after the
warm-up, end): format pass, accuracy (over the judged answers, with the judge-error count beside
it), refine rate, empty-refine and refine-fix rates, tokens.

It scores with the same judge and records as training (variant ``refine``, ``dataset`` set),
so ``pasr stats`` reads these dumps like any other. ``pasr eval`` is the full evaluation.
"""

from __future__ import annotations

from data.examples import Example
from data.records import PLAIN, REFINE, RolloutRecord
from prompts import PromptSet
from recipe.judge_errors import judged_accuracy
from recipe.local_engine.rollout import generate_step
from recipe.metrics import step_metrics
from recipe.pasr_config import PasrConfig
from recipe.scoring import score_rollouts
from runtime.hf_generate import SamplingParams


def evaluate(
    model,
    tokenizer,
    examples: list[Example],
    prompts: PromptSet,
    judge,
    pasr: PasrConfig,
    *,
    max_new_tokens: int,
    batch_size: int,
    prefill_think: bool,
    run_id: str,
    step: int,
    tag: str,
    plain: bool = False,
    on_finished=None,
) -> tuple[dict[str, float], list[RolloutRecord]]:
    """Greedy refine-prompt answers (and plain-prompt ones with ``plain``: is the refine
    reward's baseline answerable, and how does it compare?)."""
    gens = generate_step(
        model,
        tokenizer,
        examples,
        prompts,
        n_refine=1,
        n_plain=int(plain),
        params=SamplingParams(max_new_tokens=max_new_tokens, do_sample=False),
        batch_size=batch_size,
        prefill_think=prefill_think,
        on_finished=on_finished,
    )
    records = score_rollouts([g.rollout for g in gens], judge, pasr, run_id=run_id, step=step, engine="local")
    for r in records:
        r.dataset = tag
    m = step_metrics(records, prefix="eval")  # refine metrics come from the refine records only
    keep = (
        "format_pass_rate",
        "refine_rate",
        "refine_tags_per_response",
        "empty_refine_rate",
        "refine_fix_rate",
        "refine_break_rate",
        "draft_acc",
        "response_length/mean",
        "judge_errors",
    )
    metrics = {f"eval/{k}": m[f"eval/{k}"] for k in keep}
    # over the judged answers only, None (shown "-") when none was: eval/judge_errors beside it
    # says how many were left out (recipe.judge_errors)
    metrics["eval/acc"] = judged_accuracy(r.acc for r in records if r.variant == REFINE)
    if plain:
        metrics.update(
            {
                "eval/plain_format_pass_rate": m["eval/format_pass_rate_plain"],
                "eval/plain_acc": judged_accuracy(r.acc for r in records if r.variant == PLAIN),
            }
        )
    return metrics, records
