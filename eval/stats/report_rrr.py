"""The "Reflect, Retry, Reward" section of ``pasr stats``' ``report.md``: per RRR training run a
table of the per-step numbers the trainer logs as ``rrr/*`` (first-attempt and retry accuracy, failed
queries recovered, lengths, verifier errors), a table of the RRR evaluations, and example exchanges
(failed attempt, reflection, retry) by the retry's outcome. The numbers are :mod:`eval.stats.rrr`'s;
RRR groups show only what applies in the group sections (:mod:`eval.stats.report_groups`).
"""

from __future__ import annotations

from typing import Any

from eval.stats import report_markdown as md
from eval.stats.plot_names import rrr_plot


def _count_rate(n: int, of: int, r: float | None) -> str:
    return f"{n}/{of} ({md.fmt_rate(r)})"


def _rrr_train_table(run_id: str, t: dict[str, Any], plot: str | None) -> list[str]:
    lines = [f"### Training run `{run_id}`", ""]
    if plot:
        lines += [f"![reflect retry reward {run_id}]({plot})", ""]
    idx = md.shown_steps(len(t["steps"]), lines)
    rows = [
        [
            str(t["steps"][i]),
            str(t["n_queries"][i]),
            md.fmt_rate(t["first_attempt_acc"][i]),
            str(t["failed_queries"][i]),
            str(t["n_reflections"][i]),
            md.fmt_rate(t["retry_acc"][i]),
            _count_rate(t["n_recovered"][i], t["failed_queries"][i], t["recovered_rate"][i]),
            md.fmt_num(t["reflection_tokens"][i]),
            md.fmt_num(t["retry_tokens"][i]),
            str(t["verifier_errors"][i]),
        ]
        for i in idx
    ]
    lines += md.table(
        [
            "step",
            "queries",
            "first-attempt acc.",
            "failed queries",
            "reflections",
            "retry acc.",
            "recovered",
            "reflection length",
            "retry length",
            "verifier errors",
        ],
        rows,
    )
    lines.append("")
    return lines


def _rrr_eval_table(evals: dict[str, Any]) -> list[str]:
    rows = [
        [
            f"`{key}`",
            str(e["n_samples"]),
            md.fmt_rate(e["first_attempt_acc"]),
            f"{e['n_retried']} ({md.fmt_rate(e['retry_rate'])})",
            str(e["n_recovered"]),
            md.fmt_rate(e["retry_acc"]),
            md.fmt_rate(e["final_acc"]),
            str(e["judge_errors"]),
            md.fmt_num(e["mean_tokens"]),
        ]
        for key, e in evals.items()
    ]
    return md.table(
        [
            "evaluation",
            "questions",
            "first-attempt acc.",
            "retried",
            "recovered",
            "retry acc.",
            "final acc.",
            "judge errors",
            "tokens per question (all passes)",
        ],
        rows,
    )


def _rrr_examples(source: str, cells: dict[str, list], sizes: dict[str, int]) -> list[str]:
    lines = []
    for cell, items in cells.items():
        if not items:
            continue
        lines += [f"#### `{source}`: {cell.replace('_', ' ')} ({sizes[cell]} exchanges)", ""]
        for ex in items:
            where = f", step {ex['step']}" if ex["step"] is not None else ""
            where += f", {ex['dataset']}" if ex["dataset"] else ""
            answer = "no answer extracted" if ex["retry_answer"] is None else f"retry answer `{ex['retry_answer']}`"
            lines.append(
                f"query `{ex['query_id']}`{where}, reflection #{ex['sample_index']}, gold `{ex['gold']}`, "
                f"{answer}, scored {ex['retry_score']:g}"
            )
            lines.append("")
            for title, text in (
                ("Failed attempt", ex["attempt"]),
                ("Reflection", ex["reflection"]),
                ("Retry", ex["retry"]),
            ):
                lines += [f"*{title}:*", "", md.highlight(text or ""), ""]
    return lines


def _rrr_section(r: dict[str, Any], plots: set[str]) -> list[str]:
    lines = ["## Reflect, Retry, Reward", ""]
    lines.append(
        "Records of the second method (variants `attempt`, `reflection`, `retry`; `pasr eval --method "
        "reflect-retry`). `–`: nothing to count."
    )
    lines.append("")
    if r["train"]:
        lines.append(
            "Per training step, the numbers the trainer logs as `rrr/*` (`recipe.rrr_step.rrr_metrics` on the "
            "step's records):"
        )
        lines.append("")
        lines.append(
            "- **first-attempt acc.**: scored first attempts that succeeded; **failed queries**: scored first "
            "attempts that failed, the ones reflected on;"
        )
        lines.append(
            "- **retry acc.**: scored retries that succeeded (a reflection's reward); **recovered**: failed "
            "queries with at least one successful retry;"
        )
        lines.append(
            "- **lengths**: mean record `response_tokens` of reflections and retries; **verifier errors**: "
            "first attempts and retries the verifier could not score, counted and left out of every rate, never a 0."
        )
        lines.append("")
    if r["evals"]:
        lines.append(
            "Evaluations (greedy, one reflection and retry per failure; in-training ones by step as "
            "`val/RUN/DATASET@STEP`): **retried**: failed first attempts that were retried (share of the "
            "scored ones); **recovered**: retried questions whose retry succeeded; **retry acc.**: recovered / scored "
            "retries (`pasr eval`'s summary calls it `recovered_rate`); **final acc.**: right at the first "
            "attempt or at the retry; unscored answers are counted as judge errors and left out."
        )
        lines.append("")
    for run_id, t in r["train"].items():
        plot = rrr_plot(run_id)
        lines += _rrr_train_table(run_id, t, plot if plot in plots else None)
    if r["evals"]:
        lines += ["### Evaluations", ""] + _rrr_eval_table(r["evals"]) + [""]
    shown = [(src, cells) for src, cells in r["examples"].items() if any(cells.values())]
    if shown:
        lines += [
            "### Examples",
            "",
            "Random exchanges (failed attempt, reflection, retry) per run, by the retry's outcome.",
            "",
        ]
        for src, cells in shown:
            lines += _rrr_examples(src, cells, r["example_cell_sizes"][src])
    return lines


def rrr_lines(stats: dict[str, Any], plots: set[str]) -> list[str]:
    """The "Reflect, Retry, Reward" section; none without an RRR training run or evaluation."""
    r = stats.get("rrr") or {}
    if r.get("train") or r.get("evals"):
        return _rrr_section(r, plots)
    return []
