"""The PASR rollout: verl's rollout manager wrapped so one call does everything PASR adds.

``RayPPOTrainer.fit()`` calls ``self.async_rollout_manager.generate_sequences(gen_batch)`` once
per step and reads the rewards from ``rm_scores`` in what comes back. :class:`PasrRolloutManager`
stands in that attribute (installed by :class:`recipe.verl_engine.trainer.PasrRayTrainer`; what
it shares with the other method's wrapper is :class:`.rollout_wrapper.RolloutWrapper`'s):

1. append ``n_plain`` plain-prompted rows per prompt (:mod:`.plain_rollouts`);
2. generate refine and plain rows in one call of the wrapped manager;
3. judge every response and compute the PASR rewards per query with the step core the local
   engine uses (:func:`recipe.scoring.judge_and_record_async`, :func:`recipe.scoring.group_scores`);
4. write the scores and the judge-error mask into the refine rows (:mod:`.batch_convert`), dump
   all records (``<rollout_dir>/step_NNNNNN.jsonl``), keep the step's ``pasr/*`` metrics for the
   trainer;
5. return the refine rows only: plain rows never reach old/ref log-probs, advantages or the
   actor update.

Validation batches (``meta_info['validate']``) get the refine system prompt and no plain rows;
they are scored with the judge, and their score is the accuracy. verl pads each validation batch
to a multiple of ``agent.num_workers`` with copies of its first rows and may split a validation
into several batches (``data.val_batch_size``); ``val_step_NNNNNN.jsonl`` holds each question's
``val_kwargs.n`` samples exactly once (:func:`.rollout_wrapper.first_samples`), written batch by batch.

Two conditions stop or flag a step instead of letting it train silently on nothing:

* more than ``pasr.max_judge_error_rate`` of its rollouts had a judge error: the run stops
  (:class:`.rollout_wrapper.JudgeErrorRateExceeded`) after dumping the step, rather than training on masked rows;
* no refine group has any reward spread (``pasr/zero_spread_groups`` = 1): every GRPO advantage
  is 0 and the step learns nothing. Typical of a base model that never writes the PASR format
  (format reward -1 for every rollout); a loud warning names the cold start (docs/verl_engine.md).
"""

from __future__ import annotations

import sys
import time

from data.records import PLAIN, REFINE
from prompts import PromptSet, prompt_version
from recipe.metrics import training_step_metrics
from recipe.pasr_config import PasrConfig
from recipe.scoring import group_scores
from recipe.verl_engine.batch_convert import (
    apply_train_scores,
    apply_validation_scores,
    rollouts_from_rows,
)
from recipe.verl_engine.plain_rollouts import UID, build_combined_batch, split_combined, with_system_prompt
from recipe.verl_engine.rollout_wrapper import UNTRAINED_TOKENS_KEY, RolloutWrapper, wrapper_settings

COLD_START_HINT = (
    "if pasr/format_pass_rate is 0 the model does not write <think>/<refine>/<answer> from the prompt: "
    "warm it up first (docs/verl_engine.md, 'Cold start': python3 -m data.sft_parquet, then verl's SFT trainer)"
)


class PasrRolloutManager(RolloutWrapper):
    """The PASR rollout around a verl rollout manager (:class:`RolloutWrapper` for the rest)."""

    def __init__(self, inner, *, cfg: PasrConfig, prompts: PromptSet, **settings) -> None:
        versions = {REFINE: prompt_version(prompts.refine), PLAIN: prompt_version(prompts.plain)}
        settings.setdefault("judge_config", cfg.judge)
        super().__init__(inner, prompt_versions=versions, **settings)
        self.cfg = cfg
        self.prompts = prompts
        self._warned_cold_start = False

    def generate_sequences(self, gen_batch):
        if gen_batch.meta_info.get("validate", False):
            return self._validate(gen_batch)
        step = int(gen_batch.meta_info.get("global_steps", 0) or 0)
        combined, layout = build_combined_batch(
            gen_batch,
            n_refine=self.cfg.n_refine,
            n_plain=self.cfg.n_plain,
            refine_system=self.prompts.refine,
            plain_system=self.prompts.plain,
        )
        output = self._generate(combined)
        refine_out, plain_out = split_combined(output, layout, expected_uids=combined.non_tensor_batch[UID])
        refine_in, plain_in = split_combined(combined, layout)

        t0 = time.perf_counter()
        rollouts = rollouts_from_rows(refine_in, refine_out, self.tokenizer, REFINE) + rollouts_from_rows(
            plain_in, plain_out, self.tokenizer, PLAIN
        )
        records = self._judge_and_record(rollouts, step)
        scores, mask = group_scores(records, self.cfg)
        self.last_records = records
        self._dump_and_check(step, records)
        n = layout.refine_rows
        refine_out = apply_train_scores(refine_out, records[:n], scores[:n], mask[:n])
        score_s = time.perf_counter() - t0

        metrics = training_step_metrics(records, scores, mask)  # pasr/reward_time_share: trainer.pasr_timing_metrics
        self._warn_if_nothing_to_learn(step, metrics)
        self._pending_metrics = metrics

        timing = dict(refine_out.meta_info.get("timing", {}))
        timing["pasr_score"] = score_s
        # verl's perf/throughput counts the tokens of the rows it trains on; the plain rows were
        # generated in the same step (see recipe.verl_engine.trainer.pasr_throughput_metrics)
        plain_tokens = int(plain_out.batch["attention_mask"].sum().item())
        refine_out.meta_info = {**refine_out.meta_info, "timing": timing, UNTRAINED_TOKENS_KEY: plain_tokens}
        return refine_out

    def _warn_if_nothing_to_learn(self, step: int, metrics: dict[str, float]) -> None:
        if metrics["pasr/zero_spread_groups"] < 1.0:
            return
        line = (
            f"PASR WARNING step {step}: no refine group has any reward spread (format pass rate "
            f"{metrics['pasr/format_pass_rate']:.2f}, mean reward {metrics['pasr/reward_mean']:.2f}): every GRPO "
            "advantage is 0 and this step learns nothing"
        )
        if not self._warned_cold_start:
            line += "; " + COLD_START_HINT
            self._warned_cold_start = True
        print(line, file=sys.stderr, flush=True)

    def _validate(self, gen_batch):
        step = int(gen_batch.meta_info.get("global_steps", 0) or 0)
        batch = with_system_prompt(gen_batch, self.prompts.refine)
        output = self._generate(batch)
        rollouts = rollouts_from_rows(batch, output, self.tokenizer, REFINE)
        records = self._judge_and_record(rollouts, step)
        for r in records:
            r.dataset = "val"
        failed = sum(r.acc is None for r in records)
        if failed:
            print(f"PASR WARNING validation at step {step}: the judge failed on {failed} of {len(records)} rollouts "
                  "(scored 0 in val-core; counted in val-aux/.../judge_error)", file=sys.stderr, flush=True)  # fmt: skip
        self._dump_validation(step, records)
        return apply_validation_scores(output, records)


def build_rollout_manager(config, tokenizer, inner) -> RolloutWrapper:
    """The rollout of the config's ``method`` around ``inner``: PASR's, or RRR's
    (:mod:`recipe.verl_engine.rrr_rollout`), from a composed ``pasr_trainer`` config."""
    from recipe.verl_engine.config import method_of, pasr_config

    if method_of(config) == "rrr":
        from recipe.verl_engine.rrr_rollout import build_rrr_rollout_manager

        return build_rrr_rollout_manager(config, tokenizer, inner)
    cfg = pasr_config(config)
    prompts = PromptSet.load(refine=cfg.prompts.refine, plain=cfg.prompts.plain, judge=cfg.prompts.judge)
    return PasrRolloutManager(inner, tokenizer=tokenizer, cfg=cfg, prompts=prompts, **wrapper_settings(config))
