"""The per-chunk loops of a ``pasr eval`` run. :func:`_generate_chunks` produces the pending
samples chunk by chunk (a chunk that fails is retried item by item, so one bad row is recorded
as an error without its batch), judges each chunk through the step core and appends it to
``samples.jsonl`` at once; it aborts when generation keeps failing. :func:`_rejudge` judges
again, chunk by chunk, the samples whose judge failed. :class:`_ChunkTicks` moves the samples
bar inside a chunk.

Moved out of :mod:`eval.run`, which builds the backend and calls these.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

from data.records import RolloutRecord
from eval.best_of_n import METHOD as BEST_OF_N
from eval.config import EvalConfig, EvalError
from eval.items import _GenerationFailure, _Item
from eval.judging import _judge
from eval.methods import MethodPrompts, Produced, produce
from eval.reflect_retry import METHOD as REFLECT_RETRY
from eval.resume import Key, RunDir
from eval.rrr_driver import _Reusing, _verifier

MAX_CONSECUTIVE_GENERATION_ERRORS = 32


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")[:500]


def _produce(cfg: EvalConfig, items: list[_Item], generate, prompts: MethodPrompts, judge) -> list[Produced]:
    return list(
        produce(
            cfg.method,
            [it.example.question for it in items],
            generate,
            prompts,
            cfg.max_rounds,
            verify=_verifier(cfg, judge, items),
            max_reflection_tokens=cfg.max_reflection_tokens,
            attempts=[it.attempt for it in items],
            selection=cfg.selection(),
        )
    )


def _produce_chunk(
    cfg: EvalConfig, items: list[_Item], generate, prompts: MethodPrompts, judge
) -> list[Produced | _GenerationFailure]:
    """Produce the chunk in one go; when that fails, item by item so one bad row (a prompt
    over the context length, say) is recorded as an error without taking its batch along."""
    try:
        return _produce(cfg, items, generate, prompts, judge)
    except Exception as exc:
        if len(items) == 1:
            return [_GenerationFailure(_one_line(exc))]
    out: list[Produced | _GenerationFailure] = []
    for it in items:
        try:
            out.append(_produce(cfg, [it], generate, prompts, judge)[0])
        except Exception as exc:
            out.append(_GenerationFailure(_one_line(exc)))
    return out


def _rejudge(cfg: EvalConfig, judge, items: list[_Item], done: dict[Key, RolloutRecord], run_dir: RunDir, log) -> None:
    """Judge again, against the gold answer of the data as it is now, the samples whose judge
    failed or whose gold answer changed, keeping their generation. Each chunk is appended as it
    is judged (a later record of a key supersedes the earlier one), and the file is compacted to
    one record per key at the end."""
    log(f"pasr eval: re-judging {len(items)} sample(s)")
    chunk_size = cfg.chunk()
    still_failing = 0
    for start in range(0, len(items), chunk_size):
        batch = items[start : start + chunk_size]
        scored = _judge(judge, [(it, done[it.key].extracted_answer) for it in batch])
        records = [
            dataclasses.replace(done[it.key], acc=acc, judge_error=err, gold=it.example.answer)
            for it, (acc, err) in zip(batch, scored)
        ]
        run_dir.append(records)
        for it, rec in zip(batch, records):
            done[it.key] = rec
        still_failing += sum(err is not None for _, err in scored)
    run_dir.rewrite(done.values())
    if still_failing:
        log(f"pasr eval: warning: the judge failed again for {still_failing} sample(s); rerun to retry them")


def _records(
    cfg: EvalConfig, judge, run_id: str, prompt_version: str, items: list[_Item], produced: list
) -> list[RolloutRecord]:
    """One record per item: a produced sample goes through the step core (extract, judge, format,
    record: :func:`recipe.scoring.judge_and_record`, what the training engines use), a failed
    generation is recorded with its error. A verdict the method already has (reflect-retry's
    final first attempt) is kept, not asked of the judge again (:class:`_Reusing`)."""
    from recipe.scoring import Rollout, judge_and_record

    rollouts, verdicts = [], []
    for item, p in zip(items, produced):
        if not isinstance(p, Produced):
            continue
        extra: dict[str, Any] = {"method": cfg.method, "model": cfg.model, "backend": cfg.backend}
        if p.passes:
            extra["passes"] = p.passes
        extra.update(p.meta)
        ex = item.example
        rollouts.append(
            Rollout(
                query_id=ex.id,
                data_source=ex.data_source,
                question=ex.question,
                gold=ex.answer,
                variant=p.variant,
                text=p.text,
                n_tokens=p.n_tokens,
                finish_reason=p.finish_reason,
                sample_index=item.sample_index,
                dataset=item.dataset,
                extra=extra,
            )
        )
        verdicts.append(p.verdict)
    if any(v is not None for v in verdicts):
        judge = _Reusing(judge, verdicts)
    judged = iter(
        judge_and_record(
            rollouts,
            judge,
            run_id=run_id,
            step=None,
            engine="eval",
            prompt_versions=prompt_version,
            fallback_last_number=cfg.fallback_last_number,
        )
    )
    return [
        next(judged) if isinstance(p, Produced) else _failure_record(cfg, run_id, prompt_version, item, p)
        for item, p in zip(items, produced)
    ]


def _failure_record(
    cfg: EvalConfig, run_id: str, prompt_version: str, item: _Item, produced: _GenerationFailure
) -> RolloutRecord:
    """The record of a sample whose generation failed: no text, no judge, the error kept."""
    ex = item.example
    extra = {"method": cfg.method, "model": cfg.model, "backend": cfg.backend, "error": produced.error}
    return RolloutRecord(
        run_id=run_id,
        query_id=ex.id,
        data_source=ex.data_source,
        variant=_variant(cfg.method),
        prompt=ex.question,
        response="",
        response_tokens=0,
        format_ok=False,
        format_reason="generation_error",
        n_refine=0,
        extracted_answer=None,
        gold=ex.answer,
        acc=None,
        judge_error=None,
        step=None,
        dataset=item.dataset,
        sample_index=item.sample_index,
        engine="eval",
        prompt_version=prompt_version,
        finish_reason=None,
        extra=extra,
    )


def _variant(method: str) -> str:
    return {"plain": "plain", "pasr": "refine", REFLECT_RETRY: "attempt", BEST_OF_N: "best_of_n:sample:0"}.get(
        method, "self_refine:answer"
    )


class _ChunkTicks:
    """Moves the samples bar as sequences finish inside a chunk, not only when the chunk is
    recorded (a CPU batch of 64 answers sat at 0/64 for over a minute). A finished sequence is
    one sample for one-pass methods; for methods with later passes (self-refine, reflect-retry)
    the ticks of the first pass move the bar and it holds one short of the chunk's end until
    the chunk is recorded, so the count never runs ahead of what is on disk."""

    def __init__(self, bar):
        self.bar, self.base, self.size, self.moved = bar, 0, 0, 0

    def start(self, size: int) -> None:
        self.base, self.size, self.moved = self.bar.n, size, 0

    def tick(self, n: int) -> None:
        step = min(n, max(self.size - 1 - self.moved, 0))
        if step:
            self.moved += step
            self.bar.update(step)

    def finish(self) -> None:
        self.bar.update(self.base + self.size - self.bar.n)


def _progress(total: int, enabled: bool, desc: str):
    from tqdm import tqdm

    # rate_noinv: always samples/s (tqdm's default flips to s/sample below 1/s)
    fmt = "{desc}{percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_noinv_fmt}{postfix}]"
    return tqdm(
        total=total,
        unit="sample",
        desc=desc,
        disable=not enabled or total == 0,
        dynamic_ncols=True,
        mininterval=1.0,
        smoothing=0.1,
        file=sys.stderr,
        bar_format=fmt,
    )


def _generate_chunks(
    cfg: EvalConfig,
    backend,
    judge,
    pending: list[_Item],
    data: dict,
    prompts: MethodPrompts,
    done: dict[Key, RolloutRecord],
    run_dir: RunDir,
    log,
) -> None:
    """Generate, judge and append the pending samples, chunk by chunk, with the loaded ``backend``."""
    params = cfg.gen_params()
    if cfg.samples > 1 and params.greedy:
        log("pasr eval: warning: --samples > 1 with temperature 0 gives identical samples")

    bar = _progress(len(pending), cfg.progress, cfg.method)
    ticks = _ChunkTicks(bar)

    def generate(chats, max_new_tokens: int | None = None):
        """A pass with its own limit (reflect-retry's reflection, a scoring pass) passes ``max_new_tokens``."""
        p = params if max_new_tokens is None else dataclasses.replace(params, max_new_tokens=max_new_tokens)
        return backend.generate(chats, p, on_finished=ticks.tick)

    run_id = f"eval-{Path(cfg.out).name}"
    version = prompts.version(cfg.method, cfg.selection().resolved(cfg.method))
    chunk_size = cfg.chunk()
    tokens, t0, consecutive_errors = 0, time.monotonic(), 0
    try:
        for ds in data:
            # longest questions first, so batches are of similar length and memory trouble shows early
            todo = sorted((it for it in pending if it.dataset == ds), key=lambda it: -len(it.example.question))
            for start in range(0, len(todo), chunk_size):
                items = todo[start : start + chunk_size]
                bar.set_description(f"{cfg.method} {ds}")
                ticks.start(len(items))
                produced = _produce_chunk(cfg, items, generate, prompts, judge)
                records = _records(cfg, judge, run_id, version, items, produced)
                run_dir.append(records)
                for it, rec in zip(items, records):
                    done[it.key] = rec
                tokens += sum(r.response_tokens for r in records)
                ticks.finish()
                bar.set_postfix(tok_s=f"{tokens / max(time.monotonic() - t0, 1e-9):.1f}", refresh=False)
                failures = [p for p in produced if isinstance(p, _GenerationFailure)]
                consecutive_errors = consecutive_errors + len(failures) if len(failures) == len(items) else 0
                if consecutive_errors >= MAX_CONSECUTIVE_GENERATION_ERRORS:
                    raise EvalError(
                        f"generation failed for {consecutive_errors} samples in a row (last: {failures[-1].error}); "
                        "they are recorded as errors, rerun with --retry-errors once fixed"
                    )
    finally:
        bar.close()
