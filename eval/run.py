"""``pasr eval``: generate, score and summarise one model × method over several datasets.

The run is a loop over *chunks* of pending samples (a chunk is one backend batch for the hf
backend, a larger request list for vLLM). Each finished chunk is judged and appended to
``samples.jsonl`` at once, so an interrupted run resumes where it stopped
(:mod:`eval.resume`). A sample whose generation fails is recorded with the error (and the
run aborts only when generation keeps failing); a judge failure is recorded as ``acc=None``
with the judge's error. Both are counted in the summary, never dropped. A rerun re-judges
the judge failures (an LLM judge that was down or slow is the usual cause; generating again
would be waste) and, with ``--retry-errors``, regenerates the generation failures. A
reflect-retry sample whose *first attempt* the judge failed on is finished instead: its kept
attempt is judged again and, when it failed, reflected on and retried
(:func:`eval.reflect_retry.undecided`).

The judge follows the data: Countdown rows need the exact Countdown verifier and nothing else
can score them, so ``--judge auto`` (the default) picks ``countdown`` for Countdown datasets
and ``rule`` otherwise, and a judge that cannot score a dataset is refused before anything runs.

The backend and the judge are injectable: tests hand a scripted backend to :func:`run_eval`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data.records import RolloutRecord
from eval.backends import BACKENDS, Backend, BackendError, GenParams, build_backend
from eval.best_of_n import METHOD as BEST_OF_N
from eval.methods import SELECTS, MethodPrompts, Produced, Selection, check_method, check_selection, produce
from eval.reflect_retry import METHOD as REFLECT_RETRY
from eval.reflect_retry import RrrPass, kept_attempt, undecided
from eval.resume import Key, ResumeError, RunDir, fingerprint, is_judge_error
from eval.self_refine import MAX_ROUNDS
from eval.summary import summarize, write_summary
from recipe.pasr_config import JudgeConfig
from rewards.judge_kinds import JUDGE_KINDS as JUDGE_KINDS_BUILT
from recipe.rrr_config import RrrConfig, RrrPromptsConfig

JUDGE_KINDS = ("auto", *JUDGE_KINDS_BUILT)  # auto: picked per dataset
LLM_JUDGES = ("openai", "hybrid")  # the kinds that need an endpoint and a judge prompt
HELDOUT_SPLITS = {"countdown": "test"}  # a generated set is evaluated on problems training never sees
COUNTDOWN_DIFFICULTY = 1  # the loader's default, and the rrr preset's data.difficulty

DEFAULT_SAMPLING_TEMPERATURE = 0.6  # with --samples K > 1 (mean@K), unless --temperature is given
DEFAULT_SAMPLING_TOP_P = 0.95
DEFAULT_VLLM_CHUNK = 512
MAX_CONSECUTIVE_GENERATION_ERRORS = 32


class EvalError(ValueError):
    """An expected failure of ``pasr eval`` (bad argument, unknown dataset, missing model,
    settings mismatch on resume); its message is one line."""


@dataclass
class EvalConfig:
    model: str
    datasets: list[str]
    out: str
    method: str = "plain"
    backend: str = "hf"
    samples: int = 1
    limit: int | None = None
    max_new_tokens: int = 1500  # the paper's
    temperature: float | None = None  # None: greedy for one sample, 0.6 for --samples K > 1
    top_p: float | None = None  # None: 0.95 when sampling
    seed: int = 0
    batch_size: int = 32  # hf: generation batch
    chunk_size: int | None = None  # samples per written chunk (default: see chunk())
    max_rounds: int = MAX_ROUNDS  # self-refine
    select: str | None = None  # self-refine: latest (None) | best; best-of-n: majority (None) | score
    max_score_tokens: int | None = None  # --select best/score: a scoring pass's limit (None: max_new_tokens)
    score_prompt: str | None = None  # --select best/score: the self-scoring template (None: self_score)
    # auto: countdown for Countdown datasets, rule otherwise (resolve_judge)
    judge: JudgeConfig = field(default_factory=lambda: JudgeConfig(kind="auto"))
    judge_prompt: str = "judge_binary"
    refine_prompt: str = "refine_system"
    plain_prompt: str = "plain_system"
    rrr_prompts: RrrPromptsConfig = field(default_factory=RrrPromptsConfig)  # reflect-retry, as training's rrr.prompts
    max_reflection_tokens: int = RrrConfig.max_reflection_tokens  # reflect-retry: the reflection pass, as training's
    fallback_last_number: bool = False  # no <answer>/\boxed{}: judge the response's last number
    retry_errors: bool = False
    progress: bool = True
    # vllm engine options
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    enforce_eager: bool | None = None  # vllm; None: eval.backends.eager_by_default
    dtype: str | None = None
    threads: int | None = None  # hf on CPU: torch threads (default: torch's choice)
    attention: str = "grouped"  # hf: grouped (GQA without KV copies, recipe/gqa_attention.py) | sdpa
    device: str = "auto"  # hf: auto (the GPU torch sees, else the CPU) | cpu | cuda
    countdown_difficulty: int = COUNTDOWN_DIFFICULTY  # --dataset countdown: data.countdown.LEVELS (3/4/5 numbers)

    def gen_params(self) -> GenParams:
        temp = self.temperature
        if temp is None:
            temp = DEFAULT_SAMPLING_TEMPERATURE if self.samples > 1 else 0.0
        top_p = 1.0 if temp <= 0 else (self.top_p if self.top_p is not None else DEFAULT_SAMPLING_TOP_P)
        return GenParams(max_new_tokens=self.max_new_tokens, temperature=float(temp), top_p=float(top_p), seed=self.seed)

    @property
    def records_per_question(self) -> int:
        """Scored samples per question: ``--samples`` (mean@K), except for best-of-n, whose
        ``--samples N`` candidates make one answer."""
        return 1 if self.method == BEST_OF_N else self.samples

    def selection(self) -> Selection:
        """What self-refine and best-of-n need to choose their answer (``--select``)."""
        return Selection(
            select=self.select,
            candidates=self.samples if self.method == BEST_OF_N else 1,
            score_tokens=self.max_score_tokens,
            judge_kind=self.judge.kind,
            fallback_last_number=self.fallback_last_number,
        )

    def chunk(self) -> int:
        if self.chunk_size:
            return self.chunk_size
        if self.backend == "vllm":
            return DEFAULT_VLLM_CHUNK
        if self.method == BEST_OF_N:  # N generations per sample: one generation batch of candidates
            return max(1, self.batch_size // self.samples)
        # hf: one generation batch per chunk; Self-Refine's and reflect-retry's later passes
        # only take the questions still going, so their chunks are larger
        return self.batch_size * {"self-refine": 4, REFLECT_RETRY: 2}.get(self.method, 1)

    def validate(self) -> None:
        problems = []
        try:
            check_method(self.method)
        except ValueError as exc:
            problems.append(str(exc))
        if self.backend not in BACKENDS:
            problems.append(f"unknown backend {self.backend!r}: choose one of {', '.join(BACKENDS)}")
        if not self.datasets:
            problems.append("no datasets given (--dataset gsm8k math500 aime24, or file paths)")
        if self.samples < 1:
            problems.append(f"--samples must be >= 1, got {self.samples}")
        if self.limit is not None and self.limit < 1:
            problems.append(f"--limit must be >= 1, got {self.limit}")
        if self.max_new_tokens < 1:
            problems.append(f"--max-new-tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature is not None and self.temperature < 0:
            problems.append(f"--temperature must be >= 0, got {self.temperature}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            problems.append(f"--top-p must be in (0, 1], got {self.top_p}")
        if self.batch_size < 1 or (self.chunk_size is not None and self.chunk_size < 1):
            problems.append("--batch-size and --chunk-size must be >= 1")
        if self.countdown_difficulty != COUNTDOWN_DIFFICULTY:
            from data.countdown import DIFFICULTIES

            if self.countdown_difficulty not in DIFFICULTIES:
                problems.append(
                    f"--difficulty must be one of {', '.join(map(str, DIFFICULTIES))}, "
                    f"got {self.countdown_difficulty}"
                )
            elif "countdown" not in [d.lower() for d in self.datasets]:
                problems.append("--difficulty applies to --dataset countdown only")
        if self.max_rounds < 0:
            problems.append(f"--max-rounds must be >= 0, got {self.max_rounds}")
        if (problem := check_selection(self.method, self.select)) is not None:
            problems.append(problem)
        elif not self.selection().scores(self.method):
            for flag, value in (("--max-score-tokens", self.max_score_tokens), ("--score-prompt", self.score_prompt)):
                if value is not None:
                    problems.append(f"{flag} applies to --select best (self-refine) and --select score (best-of-n) only")
        if self.max_score_tokens is not None and self.max_score_tokens < 1:
            problems.append(f"--max-score-tokens must be >= 1, got {self.max_score_tokens}")
        if self.max_reflection_tokens < 1:
            problems.append(f"--max-reflection-tokens must be >= 1, got {self.max_reflection_tokens}")
        if self.judge.kind not in JUDGE_KINDS:
            problems.append(f"unknown judge {self.judge.kind!r}: choose one of {', '.join(JUDGE_KINDS)}")
        elif self.judge.kind in LLM_JUDGES and not (self.judge.base_url and self.judge.model):
            problems.append(f"--judge {self.judge.kind} needs --judge-base-url and --judge-model")
        if not self.judge.timeout_s > 0:
            problems.append(f"--judge-timeout must be > 0 seconds, got {self.judge.timeout_s}")
        if problems:
            raise EvalError("; ".join(problems))

    def settings(self, prompts: MethodPrompts) -> dict[str, Any]:
        """What decides how a sample is produced and scored: the resume fingerprint."""
        gp = self.gen_params()
        s: dict[str, Any] = {
            "model": self.model,
            "method": self.method,
            "backend": self.backend,
            "max_new_tokens": gp.max_new_tokens,
            "temperature": gp.temperature,
            "top_p": gp.top_p,
            "seed": self.seed,
            "prompts": prompts.version(self.method, self.selection().resolved(self.method)),
            "fallback_last_number": self.fallback_last_number,
            "judge": {"kind": self.judge.kind, "model": self.judge.model if self.judge.kind in LLM_JUDGES else None},
        }
        if self.judge.kind in LLM_JUDGES:
            from prompts import load_prompt, prompt_version

            s["judge"]["prompt"] = prompt_version(load_prompt(self.judge_prompt))
        if self.method == "self-refine":
            s["max_rounds"] = self.max_rounds
        if self.method == REFLECT_RETRY:
            s["max_reflection_tokens"] = self.max_reflection_tokens
        select = self.selection().resolved(self.method)
        if self.method == BEST_OF_N:  # N decides how each sample is made, so it is no run extension
            s["select"], s["candidates"] = select, self.samples
        elif select is not None and select != SELECTS[self.method][0]:  # only then: earlier runs stay valid
            s["select"] = select
        if self.selection().scores(self.method):
            s["max_score_tokens"] = self.max_score_tokens or gp.max_new_tokens
        if self.countdown_difficulty != COUNTDOWN_DIFFICULTY:  # only then: earlier runs' fingerprints stay valid
            s["countdown_difficulty"] = self.countdown_difficulty
        return s


@dataclass
class _Item:
    dataset: str
    example: Any  # data.examples.Example
    sample_index: int
    attempt: RrrPass | None = None  # reflect-retry: the kept first attempt of an undecided sample

    @property
    def key(self) -> Key:
        return (self.dataset, self.example.id, self.sample_index)


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def load_datasets(
    names: list[str], limit: int | None, countdown_difficulty: int = COUNTDOWN_DIFFICULTY
) -> dict[str, list]:
    """Examples per dataset label (the canonical name, or a file's stem), in the order given;
    ``countdown`` is generated at ``countdown_difficulty``."""
    from data.examples import DatasetError
    from data.loaders import UnknownShapeError, load_examples

    out: dict[str, list] = {}
    for name in dict.fromkeys(names):  # a name given twice is evaluated once
        try:
            options = {"difficulty": countdown_difficulty} if name.lower() == "countdown" else {}
            examples = load_examples(name, split=HELDOUT_SPLITS.get(name.lower()), limit=limit, **options)
        except UnknownShapeError as exc:  # pasr eval has no field-mapping flags; pasr data does
            raise EvalError(
                f"{exc}; rewrite it with question/answer fields, e.g. `pasr data preview --dataset {name} "
                f"--question-field F --answer-field F --limit 100000 --jsonl > {Path(name).stem}_qa.jsonl`"
            ) from None
        except DatasetError as exc:
            raise EvalError(str(exc)) from None
        except OSError as exc:
            raise EvalError(f"cannot read dataset {name!r}: {exc}") from None
        if not examples:
            raise EvalError(f"dataset {name!r} has no rows")
        label = examples[0].data_source
        if label in out:
            raise EvalError(f"two datasets are both called {label!r} (rename one file): {', '.join(names)}")
        out[label] = examples
    return out


def is_countdown(examples: list) -> bool:
    """Rows whose golds are all Countdown golds (``"3, 7, 12 -> 25"``), whatever file they came from."""
    from rewards.countdown import parse_gold

    return all(parse_gold(ex.answer) is not None for ex in examples)


def resolve_judge(judge: JudgeConfig, data: dict[str, list]) -> JudgeConfig:
    """The judge that can score ``data``: ``auto`` becomes ``countdown`` for Countdown datasets
    and ``rule`` otherwise; a judge that cannot score a dataset is an :class:`EvalError` naming
    the option to set. Only the Countdown verifier scores Countdown rows (the rule judge would
    read ``"3, 7, 12 -> 25"`` as math) and it scores nothing else, so the two never share a run."""
    countdown = [ds for ds, exs in data.items() if is_countdown(exs)]
    other = [ds for ds in data if ds not in countdown]
    if countdown and other:
        raise EvalError(
            f"Countdown datasets ({', '.join(countdown)}) need --judge countdown and the others "
            f"({', '.join(other)}) another judge: evaluate them in separate runs (separate --out)"
        )
    if judge.kind == "auto":
        return dataclasses.replace(judge, kind="countdown" if countdown else "rule")
    if countdown and judge.kind != "countdown":
        raise EvalError(f"dataset {countdown[0]!r} is Countdown: it needs --judge countdown (or --judge auto, the default)")
    if other and judge.kind == "countdown":
        raise EvalError(f"--judge countdown scores only Countdown equations; dataset {other[0]!r} needs --judge rule (or auto)")
    return judge


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")[:500]


def _build_judge(cfg: EvalConfig):
    from rewards.judges import build_judge

    try:
        return build_judge(cfg.judge, cfg.judge_prompt)
    except (ValueError, KeyError, FileNotFoundError) as exc:
        raise EvalError(f"judge: {exc}") from None


class _GenerationFailure:
    def __init__(self, error: str):
        self.error = error


def _produce(cfg: EvalConfig, items: list[_Item], generate, prompts: MethodPrompts, judge) -> list[Produced]:
    def verify(indices, texts):
        """Reflect-retry's verdicts between passes: extracted and judged as the final record is."""
        from rewards.extract import extract_answer

        answers = [extract_answer(t, fallback_last_number=cfg.fallback_last_number) for t in texts]
        return _judge(judge, [(items[i], a) for i, a in zip(indices, answers)])

    return list(produce(
        cfg.method, [it.example.question for it in items], generate, prompts, cfg.max_rounds, verify=verify,
        max_reflection_tokens=cfg.max_reflection_tokens, attempts=[it.attempt for it in items],
        selection=cfg.selection(),
    ))  # fmt: skip


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


def _judge(judge, pairs: list[tuple[_Item, str | None]]) -> list[tuple[float | None, str | None]]:
    """(acc, judge error) per (item, extracted answer), under the step core's judge-error rule: a
    judge that breaks makes every pair a judge error, never a crash or a 0."""
    from recipe.scoring import acc_and_error, judge_answers
    from rewards.judges.base import JudgeItem

    items = [JudgeItem(it.example.question, it.example.answer, answer) for it, answer in pairs]
    return [acc_and_error(r) for r in asyncio.run(judge_answers(judge, items))]


class _Reusing:
    """The run's judge, except for responses whose verdict the method already has
    (:attr:`Produced.verdict`, one per rollout in order, None: ask the judge): those keep it."""

    name = "reusing"

    def __init__(self, judge, verdicts: list):
        self.judge, self.verdicts = judge, verdicts

    async def score_many(self, items):
        from recipe.scoring import judge_answers
        from rewards.judges.base import JudgeResult

        fresh = iter(await judge_answers(self.judge, [it for it, v in zip(items, self.verdicts) if v is None]))
        return [
            next(fresh) if v is None else JudgeResult(v[0]) if v[0] is not None else JudgeResult.failed(v[1])
            for v in self.verdicts
        ]


def _rejudge(cfg: EvalConfig, judge, items: list[_Item], done: dict[Key, RolloutRecord], run_dir: RunDir, log) -> None:
    """Judge again the samples whose judge failed, keeping their generation. Each chunk is
    appended as it is judged (a later record of a key supersedes the earlier one), and the
    file is compacted to one record per key at the end."""
    log(f"pasr eval: re-judging {len(items)} sample(s) whose judge failed")
    chunk_size = cfg.chunk()
    still_failing = 0
    for start in range(0, len(items), chunk_size):
        batch = items[start : start + chunk_size]
        scored = _judge(judge, [(it, done[it.key].extracted_answer) for it in batch])
        records = [dataclasses.replace(done[it.key], acc=acc, judge_error=err) for it, (acc, err) in zip(batch, scored)]
        run_dir.append(records)
        for it, rec in zip(batch, records):
            done[it.key] = rec
        still_failing += sum(err is not None for _, err in scored)
    run_dir.rewrite(done.values())
    if still_failing:
        log(f"pasr eval: warning: the judge failed again for {still_failing} sample(s); rerun to retry them")


def _records(cfg: EvalConfig, judge, run_id: str, prompt_version: str, items: list[_Item], produced: list) -> list[RolloutRecord]:
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
                query_id=ex.id, data_source=ex.data_source, question=ex.question, gold=ex.answer, variant=p.variant,
                text=p.text, n_tokens=p.n_tokens, finish_reason=p.finish_reason, sample_index=item.sample_index,
                dataset=item.dataset, extra=extra,
            )
        )  # fmt: skip
        verdicts.append(p.verdict)
    if any(v is not None for v in verdicts):
        judge = _Reusing(judge, verdicts)
    judged = iter(judge_and_record(
        rollouts, judge, run_id=run_id, step=None, engine="eval", prompt_versions=prompt_version,
        fallback_last_number=cfg.fallback_last_number,
    ))  # fmt: skip
    return [
        next(judged) if isinstance(p, Produced) else _failure_record(cfg, run_id, prompt_version, item, p)
        for item, p in zip(items, produced)
    ]


def _failure_record(cfg: EvalConfig, run_id: str, prompt_version: str, item: _Item, produced: _GenerationFailure) -> RolloutRecord:
    """The record of a sample whose generation failed: no text, no judge, the error kept."""
    ex = item.example
    extra = {"method": cfg.method, "model": cfg.model, "backend": cfg.backend, "error": produced.error}
    return RolloutRecord(
        run_id=run_id, query_id=ex.id, data_source=ex.data_source, variant=_variant(cfg.method),
        prompt=ex.question, response="", response_tokens=0, format_ok=False,
        format_reason="generation_error", n_refine=0, extracted_answer=None, gold=ex.answer,
        acc=None, judge_error=None, step=None, dataset=item.dataset, sample_index=item.sample_index,
        engine="eval", prompt_version=prompt_version, finish_reason=None, extra=extra,
    )  # fmt: skip


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
    return tqdm(total=total, unit="sample", desc=desc, disable=not enabled or total == 0, dynamic_ncols=True,
                mininterval=1.0, smoothing=0.1, file=sys.stderr, bar_format=fmt)  # fmt: skip


def run_eval(
    cfg: EvalConfig,
    backend: Backend | None = None,
    judge=None,
    log: Callable[[str], None] = _stderr,
) -> dict[str, Any]:
    """Run (or resume) an evaluation; returns the summary that is also written to ``cfg.out``."""
    cfg.validate()
    try:
        prompts = MethodPrompts.load(
            refine=cfg.refine_prompt, plain=cfg.plain_prompt, judge=cfg.judge_prompt, rrr=cfg.rrr_prompts,
            **({"score": cfg.score_prompt} if cfg.score_prompt else {}),
        )  # fmt: skip
    except (KeyError, FileNotFoundError) as exc:
        raise EvalError(str(exc).strip("'\"")) from None
    data = load_datasets(cfg.datasets, cfg.limit, cfg.countdown_difficulty)
    cfg = dataclasses.replace(cfg, judge=resolve_judge(cfg.judge, data))
    settings = cfg.settings(prompts)
    run_dir = RunDir(cfg.out)
    try:
        run_dir.path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        from recipe.cli import why_mkdir_failed

        raise EvalError(f"cannot create --out {cfg.out}: {why_mkdir_failed(run_dir.path, exc)}") from None
    try:
        run_dir.lock()  # held to the end: the check, the load and every append
    except ResumeError as exc:
        raise EvalError(str(exc)) from None
    except OSError as exc:
        raise EvalError(f"cannot lock --out {cfg.out}: {exc.strerror or exc}") from None
    try:
        return _run_locked(cfg, backend, judge, log, prompts, data, settings, run_dir)
    finally:
        run_dir.unlock()


def _run_locked(cfg: EvalConfig, backend, judge, log, prompts: MethodPrompts, data: dict, settings: dict, run_dir: RunDir):
    """The run proper, while this process holds ``run_dir``."""
    try:
        resuming = run_dir.check(settings)
        done, corrupt = run_dir.load(retry_errors=cfg.retry_errors) if resuming else ({}, [])
    except ResumeError as exc:
        raise EvalError(str(exc)) from None
    for err in corrupt[:5]:
        log(f"pasr eval: warning: skipping {err}")

    selection: list[_Item] = [
        _Item(ds, ex, k) for ds, exs in data.items() for ex in exs for k in range(cfg.records_per_question)
    ]
    pending = [it for it in selection if it.key not in done]
    rejudge = [it for it in selection if it.key in done and is_judge_error(done[it.key])]
    if resuming:
        log(f"pasr eval: resuming {cfg.out}: {len(selection) - len(pending)} of {len(selection)} samples already done")
    # reflect-retry samples whose first attempt was never scored are finished, not re-judged
    unfinished = [dataclasses.replace(it, attempt=kept_attempt(done[it.key])) for it in rejudge if undecided(done[it.key])]
    if unfinished:
        log(f"pasr eval: judging again {len(unfinished)} first attempt(s) whose judge failed; "
            "failures are reflected on and retried")
        rejudge = [it for it in rejudge if not undecided(done[it.key])]
        pending += unfinished

    header = {
        "model": cfg.model,
        "method": cfg.method,
        "backend": cfg.backend,
        "samples": cfg.records_per_question,
        "limit": cfg.limit,
        "run_dir": str(cfg.out),
        "fingerprint": fingerprint(settings),
        "settings": settings,
    }
    if (select := cfg.selection().resolved(cfg.method)) is not None:
        header["select"] = select
    if cfg.method == BEST_OF_N:
        header["candidates"] = cfg.samples
    expected = {ds: len(exs) * cfg.records_per_question for ds, exs in data.items()}

    def write_current_summary() -> dict[str, Any]:
        keys = {it.key for it in selection}
        summary = summarize([r for k, r in done.items() if k in keys], list(data), expected, header)
        write_summary(cfg.out, summary)
        return summary

    if not pending and not rejudge:
        return write_current_summary()

    own_judge = judge is None
    if own_judge:
        judge = _build_judge(cfg)
    try:
        if rejudge:
            _rejudge(cfg, judge, rejudge, done, run_dir, log)
        if pending:
            _generate(cfg, backend, judge, pending, data, prompts, settings, done, run_dir, log)
        if unfinished:
            run_dir.rewrite(done.values())  # one record per sample again (a finished one superseded its first)
    finally:
        # a directory with run.json is a run (a resume, or a start whose model loaded): its
        # summary is kept current even when this run is interrupted
        summary = write_current_summary() if run_dir.run_path.is_file() else None
        if own_judge and hasattr(judge, "close"):
            judge.close()
    return summary


def _generate(cfg: EvalConfig, backend, judge, pending: list[_Item], data: dict, prompts: MethodPrompts,
              settings: dict, done: dict[Key, RolloutRecord], run_dir: RunDir, log) -> None:  # fmt: skip
    """Generate, judge and append the pending samples, chunk by chunk."""
    try:
        if backend is None:
            backend = build_backend(
                cfg.backend, cfg.model, batch_size=cfg.batch_size, seed=cfg.seed, dtype=cfg.dtype,
                tensor_parallel_size=cfg.tensor_parallel_size, gpu_memory_utilization=cfg.gpu_memory_utilization,
                max_model_len=cfg.max_model_len, enforce_eager=cfg.enforce_eager, threads=cfg.threads, attention=cfg.attention,
                device=cfg.device,
            )  # fmt: skip
        backend.load()
    except BackendError as exc:
        raise EvalError(str(exc)) from None
    run_dir.save_settings(settings)

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

