"""What every method's rollout wrapper shares: wrapping verl's rollout manager, the judge loop,
the dumps and the judge-error stop.

``RayPPOTrainer.fit()`` calls ``self.async_rollout_manager.generate_sequences(gen_batch)`` once
per step (and ``_validate`` once per validation batch). A method's wrapper stands in that
attribute (:class:`recipe.verl_engine.trainer.PasrRayTrainer` installs the one
:func:`recipe.verl_engine.rollout.build_rollout_manager` picks by ``method``) and turns that
call into its own rollout: PASR's refine and plain rows (:mod:`.rollout`), RRR's attempts,
reflections and retries (:mod:`.rrr_rollout`). :class:`RolloutWrapper` is the part they share:

* generation through the wrapped manager, padded to ``agent.num_workers`` as verl pads, with the
  row order checked (:meth:`RolloutWrapper._generate`);
* one event loop for every judge call of the run (:class:`AsyncRunner`), judging through the
  step core both engines use (:func:`recipe.scoring.judge_and_record_async`);
* the record dumps (``<rollout_dir>/step_NNNNNN.jsonl``, ``val_step_NNNNNN.jsonl`` with each
  validation question's samples once, :func:`first_samples`);
* the stop on a judge that fails too often (:class:`JudgeErrorRateExceeded`);
* the step's metrics, handed to the trainer once (:meth:`RolloutWrapper.pop_metrics`).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from data.records import RolloutRecord, write_records
from recipe.judge_errors import JudgeErrorRateExceeded, check_judge_errors  # noqa: F401  (raised here; callers import it from this module)
from recipe.pasr_config import JudgeConfig
from recipe.scoring import judge_and_record_async
from recipe.step_files import rollout_dump, validation_dump
from recipe.verl_engine.plain_rollouts import UID, check_row_order

# meta_info of a step's output: prompt + response tokens the step generated outside the rows it
# trains on (PASR's plain rows, RRR's attempts and retries); added to perf/throughput by
# recipe.verl_engine.trainer.pasr_throughput_metrics
UNTRAINED_TOKENS_KEY = "pasr_untrained_token_num"


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


class RolloutWrapper:
    """Wraps a verl rollout manager (anything with ``generate_sequences(DataProto) -> DataProto``);
    a method's subclass implements ``generate_sequences``. Every other attribute is the wrapped
    manager's."""

    def __init__(
        self,
        inner: Any,
        *,
        tokenizer: Any,
        judge: Any,
        judge_config: JudgeConfig,
        prompt_versions: Mapping[str, str] | str,
        run_id: str,
        rollout_dir: str | Path | None,
        size_divisor: int = 1,
        dump_validation: bool = True,
        val_n: int = 1,
        max_judge_error_rate: float = 1.0,
    ) -> None:
        self.inner = inner
        self.tokenizer = tokenizer
        self.judge = judge
        self.judge_config = judge_config
        self.prompt_versions = prompt_versions
        self.run_id = run_id
        self.rollout_dir = Path(rollout_dir) if rollout_dir else None
        self.size_divisor = max(1, int(size_divisor))
        self.dump_validation = dump_validation
        self.val_n = max(1, int(val_n))
        self.max_judge_error_rate = float(max_judge_error_rate)
        self._val_step: int | None = None  # the step whose validation dump is being written
        self._runner = AsyncRunner()
        self._pending_metrics: dict[str, float] = {}
        self.last_records: list[RolloutRecord] = []

    def __getattr__(self, name: str):
        # everything else (start_profile, workers, ...) is the wrapped manager's
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def pop_metrics(self) -> dict[str, float]:
        """The metrics of the last training step (once)."""
        metrics, self._pending_metrics = self._pending_metrics, {}
        return metrics

    def _generate(self, batch):
        """``batch`` generated by the wrapped manager, padded to ``size_divisor`` rows as verl pads
        (each agent loop worker gets a chunk) and unpadded again, its row order checked."""
        from verl.protocol import pad_dataproto_to_divisor, unpad_dataproto

        padded, pad = pad_dataproto_to_divisor(batch, self.size_divisor)
        out = unpad_dataproto(self.inner.generate_sequences(padded), pad)
        if len(out) != len(batch):
            raise RuntimeError(f"the rollout manager returned {len(out)} rows for {len(batch)}")
        check_row_order(out, batch.non_tensor_batch[UID])
        return out

    def _judge_and_record(self, rollouts, step):
        return self._runner.run(
            judge_and_record_async(
                rollouts, self.judge, run_id=self.run_id, step=step, engine="verl", prompt_versions=self.prompt_versions
            )
        )

    def _dump_and_check(self, step: int, records, judged=None) -> None:
        """Training step ``step``'s ``records`` dumped, then its judge errors checked over
        ``judged`` (default: the records), the stop both engines share
        (:func:`recipe.judge_errors.check_judge_errors`): the run stops rather than train on
        masked rows."""
        where = rollout_dump(self.rollout_dir, step) if self.rollout_dir else "not dumped (pasr_verl.rollout_dir=null)"
        if self.rollout_dir is not None:
            write_records(where, records, append=False)
        check_judge_errors(
            records if judged is None else judged,
            self.max_judge_error_rate,
            step=step,
            judge=self.judge_config,
            records_at=where,
        )

    def _dump_validation(self, step: int, records) -> None:
        """Each question's ``val_n`` samples of one validation batch (padding copies left out):
        the first batch of a validation starts the step's file, later batches append."""
        if not self.dump_validation:
            return
        first_batch = step != self._val_step
        self._val_step = step
        if self.rollout_dir is not None:
            write_records(
                validation_dump(self.rollout_dir, step), first_samples(records, self.val_n), append=not first_batch
            )

    def close(self) -> None:
        close = getattr(self.judge, "close", None) or getattr(self.judge, "aclose", None)
        if callable(close):
            result = close()
            if inspect.isawaitable(result):
                self._runner.run(result)
        self._runner.close()


def wrapper_settings(config) -> dict[str, Any]:
    """The :class:`RolloutWrapper` arguments every method takes from a composed config: the judge
    (``pasr.judge``, shared by both methods), run id, dumps, padding and the judge-error limit
    (``pasr.max_judge_error_rate``)."""
    from recipe.verl_engine.config import engine_config, pasr_config
    from rewards.judges import build_judge

    cfg = pasr_config(config)
    engine = engine_config(config)
    return dict(
        judge=build_judge(cfg.judge, cfg.prompts.judge),
        judge_config=cfg.judge,
        run_id=engine.run_id or str(config.trainer.experiment_name),
        rollout_dir=engine.rollout_dir,
        size_divisor=int(config.actor_rollout_ref.rollout.agent.num_workers),
        dump_validation=engine.dump_validation,
        val_n=int(config.actor_rollout_ref.rollout.val_kwargs.n),
        max_judge_error_rate=cfg.max_judge_error_rate,
    )
