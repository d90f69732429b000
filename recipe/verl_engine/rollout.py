"""The PASR rollout: verl's rollout manager wrapped so one call does everything PASR adds.

``RayPPOTrainer.fit()`` calls ``self.async_rollout_manager.generate_sequences(gen_batch)`` once
per step and reads the rewards from ``rm_scores`` in what comes back. :class:`PasrRolloutManager`
stands in that attribute (installed by :class:`recipe.verl_engine.trainer.PasrRayTrainer`):

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
``val_kwargs.n`` samples exactly once (:func:`first_samples`), written batch by batch.

Two conditions stop or flag a step instead of letting it train silently on nothing:

* more than ``pasr_verl.max_judge_error_rate`` of its rollouts had a judge error: the run stops
  (:class:`JudgeErrorRateExceeded`) after dumping the step, rather than training on masked rows;
* no refine group has any reward spread (``pasr/zero_spread_groups`` = 1): every GRPO advantage
  is 0 and the step learns nothing. Typical of a base model that never writes the PASR format
  (format reward -1 for every rollout); a loud warning names the cold start (README).
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from data.records import PLAIN, REFINE, RolloutRecord, write_records
from prompts import PromptSet, prompt_version
from recipe.metrics import step_metrics
from recipe.pasr_config import PasrConfig
from recipe.scoring import group_scores, judge_and_record_async
from recipe.verl_engine.batch_convert import apply_train_scores, apply_validation_scores, rollouts_from_rows
from recipe.verl_engine.plain_rollouts import UID, build_combined_batch, split_combined, with_system_prompt


PLAIN_TOKENS_KEY = "pasr_plain_token_num"  # meta_info: prompt + response tokens of the step's plain rows

COLD_START_HINT = (
    "if pasr/format_pass_rate is 0 the model does not write <think>/<refine>/<answer> from the prompt: "
    "warm it up first (README, 'Cold start': python3 -m data.sft_parquet, then verl's SFT trainer)"
)


class JudgeErrorRateExceeded(RuntimeError):
    """A step's judge failed on too many rollouts to train on it."""


def zero_spread_fraction(scores: Sequence[float], uids: Sequence[object], tol: float = 1e-9) -> float:
    """The fraction of GRPO groups (rows sharing a uid) whose scores are all equal: GRPO's
    advantage is the score minus the group mean, so such a group contributes no gradient."""
    groups: dict[object, list[float]] = defaultdict(list)
    for score, uid in zip(scores, uids):
        groups[uid].append(float(score))
    if not groups:
        return 0.0
    flat = sum(1 for g in groups.values() if max(g) - min(g) <= tol)
    return flat / len(groups)


def first_samples(records: Sequence[RolloutRecord], n: int) -> list[RolloutRecord]:
    """The records of one padded validation batch without verl's padding copies.

    verl repeats each question ``val_kwargs.n`` times (one uid per question) and pads the batch
    by appending copies of its first rows, so a copy is a uid's ``n+1``-th row or later; sample
    indices count rows per uid in batch order (:func:`recipe.verl_engine.batch_convert.rollouts_from_rows`)."""
    return [r for r in records if r.sample_index < n]


class AsyncRunner:
    """One event loop on a daemon thread for all judge calls of a run.

    ``fit()`` is synchronous; an async judge (OpenAI client, connection pool) must keep one loop
    for its whole life rather than a fresh ``asyncio.run`` per step, and the caller may itself be
    inside a running loop."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def run(self, coro):
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, name="pasr-judge-loop", daemon=True)
            self._thread.start()
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def close(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=5)
            if not self._loop.is_running():
                self._loop.close()
            self._loop = None


class PasrRolloutManager:
    """Wraps a verl rollout manager (anything with ``generate_sequences(DataProto) -> DataProto``)."""

    def __init__(
        self,
        inner: Any,
        *,
        tokenizer: Any,
        cfg: PasrConfig,
        prompts: PromptSet,
        judge: Any,
        run_id: str,
        rollout_dir: str | Path | None,
        size_divisor: int = 1,
        dump_validation: bool = True,
        val_n: int = 1,
        max_judge_error_rate: float = 1.0,
    ) -> None:
        self.inner = inner
        self.tokenizer = tokenizer
        self.cfg = cfg
        self.prompts = prompts
        self.judge = judge
        self.run_id = run_id
        self.rollout_dir = Path(rollout_dir) if rollout_dir else None
        self.size_divisor = max(1, int(size_divisor))
        self.dump_validation = dump_validation
        self.val_n = max(1, int(val_n))
        self.max_judge_error_rate = float(max_judge_error_rate)
        self._val_step: int | None = None  # the step whose validation dump is being written
        self._warned_cold_start = False
        self.prompt_versions = {REFINE: prompt_version(prompts.refine), PLAIN: prompt_version(prompts.plain)}
        self._runner = AsyncRunner()
        self._pending_metrics: dict[str, float] = {}
        self.last_records: list[RolloutRecord] = []

    def __getattr__(self, name: str):
        # everything else (start_profile, workers, ...) is the wrapped manager's
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    # ------------------------------------------------------------------ metrics
    def pop_metrics(self) -> dict[str, float]:
        """The ``pasr/*`` metrics of the last training step (once)."""
        metrics, self._pending_metrics = self._pending_metrics, {}
        return metrics

    # ------------------------------------------------------------------ generation
    def _generate(self, batch):
        from verl.protocol import pad_dataproto_to_divisor, unpad_dataproto

        padded, pad = pad_dataproto_to_divisor(batch, self.size_divisor)
        out = self.inner.generate_sequences(padded)
        return unpad_dataproto(out, pad)

    def _judge_and_record(self, rollouts, step):
        return self._runner.run(
            judge_and_record_async(
                rollouts, self.judge, run_id=self.run_id, step=step, engine="verl", prompt_versions=self.prompt_versions
            )
        )

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
        self._dump(f"step_{step:06d}.jsonl", records)
        self._check_judge_errors(step, records)
        n = layout.refine_rows
        refine_out = apply_train_scores(refine_out, records[:n], scores[:n], mask[:n])
        score_s = time.perf_counter() - t0

        metrics = step_metrics(records)
        metrics["pasr/masked_rows"] = float(n - sum(mask[:n]))
        metrics["pasr/plain_rows"] = float(layout.plain_rows)
        uids = refine_out.non_tensor_batch[UID]
        trained = [i for i in range(n) if mask[i]]  # GRPO's groups hold the trained rows only
        metrics["pasr/zero_spread_groups"] = zero_spread_fraction([scores[i] for i in trained], [uids[i] for i in trained])
        self._warn_if_nothing_to_learn(step, metrics)
        self._pending_metrics = metrics

        timing = dict(refine_out.meta_info.get("timing", {}))
        timing["pasr_score"] = score_s
        # verl's perf/throughput counts the tokens of the rows it trains on; the plain rows were
        # generated in the same step (see recipe.verl_engine.trainer.pasr_throughput_metrics)
        plain_tokens = int(plain_out.batch["attention_mask"].sum().item())
        refine_out.meta_info = {**refine_out.meta_info, "timing": timing, PLAIN_TOKENS_KEY: plain_tokens}
        return refine_out

    def _check_judge_errors(self, step: int, records) -> None:
        failed = [r for r in records if r.acc is None]
        rate = len(failed) / len(records) if records else 0.0
        if rate <= self.max_judge_error_rate:
            return
        where = self.rollout_dir / f"step_{step:06d}.jsonl" if self.rollout_dir else "not dumped (pasr_verl.rollout_dir=null)"
        judge = self.cfg.judge
        raise JudgeErrorRateExceeded(
            f"step {step}: the judge failed on {len(failed)} of {len(records)} rollouts ({rate:.0%}), more than "
            f"pasr_verl.max_judge_error_rate={self.max_judge_error_rate:g}; first error: {failed[0].judge_error!r}. "
            f"Judge: kind={judge.kind} base_url={judge.base_url} model={judge.model}. The step's records: {where}. "
            "Stopping instead of training on masked rows; fix the judge and resume from the last checkpoint"
        )

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
        if self.dump_validation:
            # the first batch of a validation starts the step's file, later batches append
            first_batch = step != self._val_step
            self._val_step = step
            self._dump(f"val_step_{step:06d}.jsonl", first_samples(records, self.val_n), append=not first_batch)
        return apply_validation_scores(output, records)

    def _dump(self, name: str, records, append: bool = False) -> None:
        if self.rollout_dir is not None:
            write_records(self.rollout_dir / name, records, append=append)

    def close(self) -> None:
        close = getattr(self.judge, "close", None) or getattr(self.judge, "aclose", None)
        if callable(close):
            result = close()
            if inspect.isawaitable(result):
                self._runner.run(result)
        self._runner.close()


def build_rollout_manager(config, tokenizer, inner) -> PasrRolloutManager:
    """The PASR rollout around ``inner`` from a composed ``pasr_trainer`` config."""
    from rewards.judges import build_judge

    from recipe.verl_engine.config import engine_config, pasr_config

    cfg = pasr_config(config)
    engine = engine_config(config)
    prompts = PromptSet.load(refine=cfg.prompts.refine, plain=cfg.prompts.plain, judge=cfg.prompts.judge)
    return PasrRolloutManager(
        inner,
        tokenizer=tokenizer,
        cfg=cfg,
        prompts=prompts,
        judge=build_judge(cfg.judge, cfg.prompts.judge),
        run_id=engine.run_id or str(config.trainer.experiment_name),
        rollout_dir=engine.rollout_dir,
        size_divisor=int(config.actor_rollout_ref.rollout.agent.num_workers),
        dump_validation=engine.dump_validation,
        val_n=int(config.actor_rollout_ref.rollout.val_kwargs.n),
        max_judge_error_rate=engine.max_judge_error_rate,
    )
