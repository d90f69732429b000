"""Per-dataset summary of an eval run: ``summary.json`` and the Markdown table ``summary.md``.

Accuracy is the mean judge score over the samples that were scored (with ``--samples K`` that
is mean@K); samples whose generation or judging failed are left out of it and counted in the
error columns instead, so nothing disappears silently.

A reflect-retry run (:mod:`eval.reflect_retry`) also reports what the retry adds: accuracy
is after at most one retry, ``first_attempt_accuracy`` before it; ``retry_rate`` is the share
of scored first attempts that failed and were retried, ``recovered_rate`` the share of scored
retries that succeeded. Other methods' summaries have no such keys.

A run that chooses among candidates (``--select best`` / ``score`` / ``majority``) reports how
the choice went: ``score_failures`` (scoring replies with no parsable score; such a candidate
cannot be chosen) and ``selection_fallbacks`` (samples where no candidate could be chosen, so
the method's fallback was returned). A plain Self-Refine run (``--select latest``) has neither.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from data.atomic_write import replace_text
from data.records import RolloutRecord
from eval.best_of_n import METHOD as BEST_OF_N
from eval.methods import SCORING_SELECTS
from eval.reflect_retry import METHOD as REFLECT_RETRY
from eval.resume import is_generation_error
from recipe.rrr_step import is_success

SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def retry_facts(generated: list[RolloutRecord]) -> dict[str, Any]:
    """First-attempt accuracy and what the retries did, from reflect-retry records' meta.
    Unscored answers are left out of each rate, never counted as wrong."""
    first = [r for r in generated if r.extra.get("first_acc") is not None]
    retried = [r for r in first if r.extra.get("retried")]
    recovered = [r for r in retried if r.acc is not None and is_success(r.acc)]
    retries_scored = [r for r in retried if r.acc is not None]
    return {
        "first_attempt_accuracy": _mean([float(r.extra["first_acc"]) for r in first]),
        "retry_rate": len(retried) / len(first) if first else None,
        "recovered_rate": len(recovered) / len(retries_scored) if retries_scored else None,
        "n_retried": len(retried),
        "n_recovered": len(recovered),
    }


def selection_facts(generated: list[RolloutRecord], select: str | None) -> dict[str, Any]:
    """How the answers were chosen, from the records' meta: failed scores (scoring selections
    only) and samples that fell back because no candidate could be chosen."""
    facts: dict[str, Any] = {}
    if select in SCORING_SELECTS:
        facts["score_failures"] = sum(int(r.extra.get("score_failures") or 0) for r in generated)
    facts["selection_fallbacks"] = sum(1 for r in generated if r.extra.get("selection_fallback"))
    return facts


def summarize_dataset(
    records: list[RolloutRecord],
    expected_samples: int | None = None,
    method: str | None = None,
    select: str | None = None,
) -> dict[str, Any]:
    gen_err = [r for r in records if is_generation_error(r)]
    generated = [r for r in records if not is_generation_error(r)]
    scored = [r for r in generated if r.acc is not None]
    extra = retry_facts(generated) if method == REFLECT_RETRY else {}
    if _chooses(select):
        extra.update(selection_facts(generated, select))
    return {
        "n_questions": len({r.query_id for r in records}),
        "n_samples": len(records),
        "expected_samples": expected_samples if expected_samples is not None else len(records),
        "n_scored": len(scored),
        "accuracy": _mean([float(r.acc) for r in scored]),
        "mean_tokens": _mean([float(r.response_tokens) for r in generated]),
        "format_rate": _mean([1.0 if r.format_ok else 0.0 for r in generated]),
        "refine_rate": _mean([1.0 if r.n_refine > 0 else 0.0 for r in generated]),
        "mean_refines": _mean([float(r.n_refine) for r in generated]),
        "truncated_rate": _mean([1.0 if r.finish_reason == "length" else 0.0 for r in generated]),
        "generation_errors": len(gen_err),
        "judge_errors": sum(1 for r in generated if r.acc is None),
        "errors": len(gen_err) + sum(1 for r in generated if r.acc is None),
        **extra,
    }


def summarize(
    records: Iterable[RolloutRecord],
    datasets: list[str],
    expected: dict[str, int] | None = None,
    header: dict[str, Any] | None = None,
    facts: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The summary document: ``header`` (model, the checkpoint it resolved to, method, settings,
    ...) plus one entry per dataset, in the order given, with that dataset's ``facts`` (where it
    was read from, ``source``; the digest of the rows evaluated, ``question_set``, which ``pasr
    eval compare`` matches runs on)."""
    by_ds: dict[str, list[RolloutRecord]] = defaultdict(list)
    for r in records:
        by_ds[r.dataset or r.data_source].append(r)
    expected = expected or {}
    method, select = (header or {}).get("method"), (header or {}).get("select")
    per = {
        ds: {**summarize_dataset(by_ds.get(ds, []), expected.get(ds), method, select), **(facts or {}).get(ds, {})}
        for ds in datasets
    }
    complete = all(v["n_samples"] >= v["expected_samples"] for v in per.values())
    return {**(header or {}), "complete": complete, "datasets": per}


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"


def _num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}"


def _chooses(select: str | None) -> bool:
    """A selection that can fail to choose (not Self-Refine's default ``latest``)."""
    return select is not None and select != "latest"


def method_label(summary: dict[str, Any]) -> str:
    """The method as a run was made: ``self-refine``, ``self-refine (select best)``,
    ``best-of-n (8 candidates, select majority)``."""
    method, select = str(summary.get("method", "?")), summary.get("select")
    if method == BEST_OF_N:
        return f"{method} ({summary.get('candidates', '?')} candidates, select {select})"
    return f"{method} (select {select})" if _chooses(select) else method


def checkpoint_words(summary: dict[str, Any]) -> str:
    """The checkpoint a run evaluated, in words: ``step 12 (runs/demo/checkpoints/step_000012)``;
    empty for a model that is no training checkpoint (a hub name, an exported folder)."""
    ckpt = summary.get("checkpoint") or {}
    if not isinstance(ckpt, dict) or ckpt.get("step") is None:
        return ""
    return f"step {ckpt['step']} ({ckpt.get('path')})"


def render_markdown(summary: dict[str, Any]) -> str:
    k = int(summary.get("samples") or 1)
    acc_head = f"accuracy (mean@{k})" if k > 1 else "accuracy"
    title = f"# pasr eval: {summary.get('model', '?')}"
    if step := checkpoint_words(summary):
        title += f", checkpoint {step}"
    title += f", method {method_label(summary)}"
    if summary.get("backend"):
        title += f" ({summary['backend']} backend)"
    lines = [title, ""]
    if note := (summary.get("checkpoint") or {}).get("note"):
        lines += [f"**Checkpoint**: {note}.", ""]
    settings = summary.get("settings") or {}
    if settings:
        bits = [f"max new tokens {settings.get('max_new_tokens')}", f"temperature {settings.get('temperature')}"]
        if summary.get("protocol"):  # pasr eval --protocol NAME
            bits.insert(0, f"the {summary['protocol']} protocol (top-p {settings.get('top_p')})")
        if k > 1:
            bits.append(f"top-p {settings.get('top_p')}, {k} samples per question")
        elif summary.get("method") == BEST_OF_N and settings.get("temperature"):
            bits.append(f"top-p {settings.get('top_p')}")
        bits.append(f"judge {settings.get('judge', {}).get('kind', 'rule')}")
        runtime = settings.get("runtime") or {}
        bits += [f"{key} {runtime[key]}" for key in ("dtype", "threads") if runtime.get(key) not in (None, "auto")]
        lines += [", ".join(bits) + ".", ""]
    if not summary.get("complete", True):
        lines += ["**Partial**: the run has not finished every sample yet (resume it with the same command).", ""]
    retry = summary.get("method") == REFLECT_RETRY
    retry_head = " first-attempt accuracy | retried | recovered |" if retry else ""
    select = summary.get("select")
    choice_cols = [("score failures", "score_failures")] if select in SCORING_SELECTS else []
    choice_cols += [("fallbacks", "selection_fallbacks")] if _chooses(select) else []
    choice_head = "".join(f" {head} |" for head, _ in choice_cols)
    lines += [
        f"| dataset | questions | samples | {acc_head} |{retry_head} mean output tokens | format ok | refine rate "
        f"| truncated | generation errors | judge errors |{choice_head}",
        "| --- | ---: | ---: | ---: |"
        + " ---: |" * (3 if retry else 0)
        + " ---: | ---: | ---: | ---: | ---: | ---: |"
        + " ---: |" * len(choice_cols),
    ]
    for ds, v in summary["datasets"].items():
        samples = (
            f"{v['n_samples']}"
            if v["n_samples"] == v["expected_samples"]
            else f"{v['n_samples']}/{v['expected_samples']}"
        )
        retry_cells = (
            f" {_pct(v.get('first_attempt_accuracy'))} | {_pct(v.get('retry_rate'))} | "
            f"{_pct(v.get('recovered_rate'))} |"
            if retry
            else ""
        )
        lines.append(
            f"| {ds} | {v['n_questions']} | {samples} | {_pct(v['accuracy'])} |{retry_cells} "
            f"{_num(v['mean_tokens'])} | "
            f"{_pct(v['format_rate'])} | {_pct(v['refine_rate'])} | {_pct(v['truncated_rate'])} | "
            f"{v['generation_errors']} | {v['judge_errors']} |"
            + "".join(f" {v.get(key, 'n/a')} |" for _, key in choice_cols)
        )
    scoring = " and every scoring reply" if select in SCORING_SELECTS else ""
    passes = {
        "self-refine": f" and summed over every Self-Refine pass{scoring}.",
        REFLECT_RETRY: " and summed over the attempt, reflection and retry.",
        BEST_OF_N: f" and summed over all {summary.get('candidates', 'N')} candidates{scoring}.",
    }
    lines += [
        "",
        "Accuracy is over scored samples; samples whose generation or judging failed are counted in the "
        "error columns. Output tokens are counted from the generated token ids"
        + passes.get(summary.get("method"), "."),
    ]
    if choice_cols:
        fallback = "the latest answer" if summary.get("method") == "self-refine" else "the first candidate"
        why = "no candidate had a score" if select in SCORING_SELECTS else "no candidate had an answer"
        lines.append(
            (
                "Score failures: scoring replies with no parsable score (that candidate could not be chosen); "
                if scoring
                else ""
            )
            + f"fallbacks: samples where {why}, so {fallback} was judged."
        )
    if retry:
        lines.append(
            "Accuracy is after at most one retry, first-attempt accuracy before it; retried: the scored first "
            "attempts that failed (each got one reflection and one retry); recovered: the scored retries that "
            "succeeded."
        )
    return "\n".join(lines) + "\n"


def write_summary(out_dir: str | Path, summary: dict[str, Any]) -> None:
    out = Path(out_dir)
    for name, text in (
        (SUMMARY_JSON, json.dumps(summary, indent=2, ensure_ascii=False) + "\n"),
        (SUMMARY_MD, render_markdown(summary)),
    ):
        replace_text(out / name, text)
