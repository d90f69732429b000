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

This module is the entry: it loads the datasets, resolves the judge, holds the run directory
and drives the rest, which lives in modules of its own and is re-exported here, so
``from eval.run import ...`` keeps working: :mod:`eval.config` (:class:`EvalConfig`, its
validation, :class:`EvalError`), :mod:`eval.judging` (which judge scores the data, asking it),
:mod:`eval.chunks` (the per-chunk generate/judge/append loop), :mod:`eval.rrr_driver`
(reflect-retry's judge between passes) and :mod:`eval.items` (the units of work).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from data.records import RolloutRecord
from eval.backends import Backend, BackendError, build_backend, check_local_path
from eval.best_of_n import METHOD as BEST_OF_N
from eval.chunks import (
    MAX_CONSECUTIVE_GENERATION_ERRORS,
    _ChunkTicks,  # noqa: F401  (re-exported: tests import it from here)
    _generate_chunks,
    _rejudge,
)
from eval.config import (
    AUTO,
    COUNTDOWN_DIFFICULTY,
    DEFAULT_SAMPLING_TEMPERATURE,
    DEFAULT_SAMPLING_TOP_P,
    DEFAULT_VLLM_CHUNK,
    JUDGE_KINDS,
    LLM_JUDGES,
    EvalConfig,
    EvalError,
)
from eval.identity import ModelIdentity, ModelIdentityError, model_identity, rows_digest
from eval.items import _Item
from eval.judging import _build_judge, is_countdown, resolve_judge
from eval.methods import MethodPrompts
from eval.reflect_retry import METHOD as REFLECT_RETRY
from eval.resume import (
    Key,
    ResumeError,
    RunDir,
    adopt_runtime,
    changed_rows,
    fingerprint,
    is_generation_error,
    is_judge_error,
)
from eval.rrr_driver import _split_undecided
from eval.summary import summarize, write_summary

__all__ = [
    "COUNTDOWN_DIFFICULTY",
    "DEFAULT_SAMPLING_TEMPERATURE",
    "DEFAULT_SAMPLING_TOP_P",
    "DEFAULT_VLLM_CHUNK",
    "HELDOUT_SPLITS",
    "JUDGE_KINDS",
    "LLM_JUDGES",
    "MAX_CONSECUTIVE_GENERATION_ERRORS",
    "EvalConfig",
    "EvalError",
    "is_countdown",
    "load_datasets",
    "resolve_judge",
    "run_eval",
]

HELDOUT_SPLITS = {
    "countdown": "test",
    "synthetic": "test",
}  # a generated set is evaluated on problems training never sees


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def load_datasets(
    names: list[str], limit: int | None, countdown_difficulty: int = COUNTDOWN_DIFFICULTY
) -> dict[str, list]:
    """Examples per dataset label (the canonical name, or a file's stem), in the order given;
    the generated sets are the local engine's held-out problems for its default ``data.seed``
    (split test, seed 1235: what ``pasr train`` and ``--preset rrr`` evaluate, so an evaluation of
    their checkpoint reproduces their held-out table); ``synthetic`` at difficulty 1, ``countdown``
    at ``countdown_difficulty``. A file with two rows of one id is refused (naming both lines)."""
    return _load_data(names, limit, countdown_difficulty)[0]


def dataset_source(name: str) -> str:
    """Where ``--dataset NAME`` is read from, as ``run.json`` records it: a known set's name, or
    a file's absolute path (two files of one stem share a label, never a source)."""
    from data.examples import DatasetError
    from data.loaders import get_dataset

    try:
        return get_dataset(name).name
    except DatasetError:
        return str(Path(name).expanduser().resolve())


def _load_data(
    names: list[str], limit: int | None, countdown_difficulty: int = COUNTDOWN_DIFFICULTY
) -> tuple[dict[str, list], dict[str, str]]:
    """:func:`load_datasets`, and each label's :func:`dataset_source`."""
    from data.examples import DatasetError
    from data.generated_sets import DEFAULT_DATA_SEED, heldout_seed
    from data.loaders import UnknownShapeError, load_examples

    out: dict[str, list] = {}
    sources: dict[str, str] = {}
    for name in dict.fromkeys(names):  # a name given twice is evaluated once
        try:
            # a generated set: the local engine's held-out problems, in its order
            options = {"seed": heldout_seed(DEFAULT_DATA_SEED)} if name.lower() in HELDOUT_SPLITS else {}
            if name.lower() == "countdown":
                options["difficulty"] = countdown_difficulty
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
        sources[label] = dataset_source(name)
    return out, sources


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
            refine=cfg.refine_prompt,
            plain=cfg.plain_prompt,
            judge=cfg.judge_prompt,
            rrr=cfg.rrr_prompts,
            **({"score": cfg.score_prompt} if cfg.score_prompt else {}),
        )
    except (KeyError, FileNotFoundError) as exc:
        raise EvalError(str(exc).strip("'\"")) from None
    data, sources = _load_data(cfg.datasets, cfg.limit, cfg.countdown_difficulty)
    cfg = dataclasses.replace(cfg, judge=resolve_judge(cfg.judge, data))
    try:
        check_local_path(cfg.model)
        identity = model_identity(cfg.model)
    except (BackendError, ModelIdentityError) as exc:
        raise EvalError(str(exc)) from None
    if identity.note:
        log(f"pasr eval: {identity.note}")
    run_dir = RunDir(cfg.out)
    try:
        run_dir.path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        from data.cli_errors import why_mkdir_failed

        raise EvalError(f"cannot create --out {cfg.out}: {why_mkdir_failed(run_dir.path, exc)}") from None
    try:
        run_dir.lock()  # held to the end: the check, the load and every append
    except ResumeError as exc:
        raise EvalError(str(exc)) from None
    except OSError as exc:
        raise EvalError(f"cannot lock --out {cfg.out}: {exc.strerror or exc}") from None
    try:
        return _run_locked(cfg, backend, judge, log, prompts, data, sources, identity, run_dir)
    finally:
        run_dir.unlock()


def _decided(
    cfg: EvalConfig, backend, prompts: MethodPrompts, saved: dict | None, identity: ModelIdentity
) -> tuple[EvalConfig, Any, dict, str]:
    """(the config with runtime settings left to ``auto`` taken from the run being resumed, the
    backend, built but not loaded, what it decided for the runtime settings, and a line saying
    which were taken, or ""). The backend loads the checkpoint ``identity`` names, not the spec
    again: ``latest`` may name a newer step by the time the model loads."""
    asked = cfg.requested_runtime()
    adopted = adopt_runtime(asked, saved)
    taken = ""
    if adopted != asked:
        taken = (
            "pasr eval: resuming with the run's own "
            + ", ".join(f"{k} {v}" for k, v in adopted.items() if v != asked[k])
            + " (decided when it started)"
        )
        cfg = dataclasses.replace(
            cfg,
            **{
                k: (None if v == AUTO else v)
                for k, v in adopted.items()
                if k in ("dtype", "threads", "device") and v != asked[k]
            },
        )
    try:
        if backend is None:
            backend = build_backend(
                cfg.backend,
                identity.path or cfg.model,
                prefill=cfg.prefill,
                systems=frozenset({prompts.prompts.refine, prompts.prompts.plain}),
                batch_size=cfg.batch_size,
                seed=cfg.seed,
                dtype=cfg.dtype,
                tensor_parallel_size=cfg.tensor_parallel_size,
                gpu_memory_utilization=cfg.gpu_memory_utilization,
                max_model_len=cfg.max_model_len,
                enforce_eager=cfg.enforce_eager,
                threads=cfg.threads,
                attention=cfg.attention,
                device=cfg.device,
                max_new_tokens=cfg.max_new_tokens,
            )
        runtime = backend.decide() if hasattr(backend, "decide") else cfg.requested_runtime()
    except BackendError as exc:
        raise EvalError(str(exc)) from None
    return cfg, backend, runtime, taken


def _run_locked(
    cfg: EvalConfig,
    backend,
    judge,
    log,
    prompts: MethodPrompts,
    data: dict,
    sources: dict,
    identity: ModelIdentity,
    run_dir: RunDir,
):
    """The run proper, while this process holds ``run_dir``."""
    try:
        saved = run_dir.saved_settings()
    except ResumeError as exc:
        raise EvalError(str(exc)) from None
    cfg, backend, runtime, taken = _decided(cfg, backend, prompts, saved, identity)
    settings = cfg.settings(prompts, identity.fingerprint(), runtime)
    try:
        resuming = run_dir.check(settings, sources)
        done, corrupt = run_dir.load(retry_errors=cfg.retry_errors) if resuming else ({}, [])
    except ResumeError as exc:
        raise EvalError(str(exc)) from None
    if taken:
        log(taken)
    for err in corrupt[:5]:
        log(f"pasr eval: warning: skipping {err}")

    selection: list[_Item] = [
        _Item(ds, ex, k) for ds, exs in data.items() for ex in exs for k in range(cfg.records_per_question)
    ]
    rejudge = _forget_changed_rows(cfg, selection, done, run_dir, log)
    pending = [it for it in selection if it.key not in done]
    changed_gold = {it.key for it in rejudge}
    rejudge += [
        it for it in selection if it.key in done and is_judge_error(done[it.key]) and it.key not in changed_gold
    ]
    if resuming:
        log(f"pasr eval: resuming {cfg.out}: {len(selection) - len(pending)} of {len(selection)} samples already done")
    # reflect-retry samples whose first attempt was never scored are finished, not re-judged
    unfinished, rejudge = _split_undecided(rejudge, done)
    if unfinished:
        log(
            f"pasr eval: judging again {len(unfinished)} first attempt(s) whose judge failed; "
            "failures are reflected on and retried"
        )
        pending += unfinished

    header = {
        "model": cfg.model,
        "checkpoint": identity.header(),
        "method": cfg.method,
        "backend": cfg.backend,
        "samples": cfg.records_per_question,
        "limit": cfg.limit,
        "run_dir": str(cfg.out),
        "fingerprint": fingerprint(settings),
        "settings": settings,
    }
    if cfg.protocol is not None:  # its settings are in settings (temperature, top_p): the name, for a reader
        header["protocol"] = cfg.protocol
    if (select := cfg.selection().resolved(cfg.method)) is not None:
        header["select"] = select
    if cfg.method == BEST_OF_N:
        header["candidates"] = cfg.samples
    expected = {ds: len(exs) * cfg.records_per_question for ds, exs in data.items()}
    facts = {ds: {"source": sources[ds], "question_set": rows_digest(exs)} for ds, exs in data.items()}

    def write_current_summary() -> dict[str, Any]:
        keys = {it.key for it in selection}
        summary = summarize([r for k, r in done.items() if k in keys], list(data), expected, header, facts)
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
            _generate(cfg, backend, judge, pending, data, prompts, settings, sources, done, run_dir, log)
        if unfinished:
            run_dir.rewrite(done.values())  # one record per sample again (a finished one superseded its first)
    finally:
        # a directory with run.json is a run (a resume, or a start whose model loaded): its
        # summary is kept current even when this run is interrupted
        summary = write_current_summary() if run_dir.run_path.is_file() else None
        if own_judge and hasattr(judge, "close"):
            judge.close()
    return summary


def _forget_changed_rows(
    cfg: EvalConfig, selection: list[_Item], done: dict[Key, RolloutRecord], run_dir: RunDir, log
) -> list[_Item]:
    """Samples made for rows that have changed in the data since (found by content:
    :func:`eval.resume.changed_rows`): a changed question's samples leave ``done`` and the file, to
    be made again; a sample whose gold answer alone changed is returned, to be judged again with
    the new gold (reflect-retry's and failed generations are made again: the retry followed the
    old verdict)."""
    asked, judged = changed_rows(selection, done)

    def answered_after_the_verdict(it: _Item) -> bool:
        return cfg.method == REFLECT_RETRY or is_generation_error(done[it.key])

    remake = asked + [it for it in judged if answered_after_the_verdict(it)]
    judged = [it for it in judged if not answered_after_the_verdict(it)]
    if remake:
        for it in remake:
            del done[it.key]
        run_dir.rewrite(done.values())
    if remake or judged:
        log(
            f"pasr eval: the data changed since {len(remake) + len(judged)} sample(s) were made: "
            + "; ".join(
                part
                for part in (
                    f"{len(remake)} answered again (question changed)" if remake else "",
                    f"{len(judged)} judged again (gold answer changed)" if judged else "",
                )
                if part
            )
        )
    return judged


def _generate(
    cfg: EvalConfig,
    backend,
    judge,
    pending: list[_Item],
    data: dict,
    prompts: MethodPrompts,
    settings: dict,
    sources: dict,
    done: dict[Key, RolloutRecord],
    run_dir: RunDir,
    log,
) -> None:
    """Generate, judge and append the pending samples, chunk by chunk, with the backend
    :func:`_decided` built (``build_backend`` is looked up in this module, where tests replace it),
    loaded here; the chunk loop is :func:`eval.chunks._generate_chunks`."""
    try:
        backend.load()
    except BackendError as exc:
        raise EvalError(str(exc)) from None
    run_dir.save_settings(settings, sources)
    _generate_chunks(cfg, backend, judge, pending, data, prompts, done, run_dir, log)
