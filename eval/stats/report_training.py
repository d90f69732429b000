"""The "Over training" section of ``pasr stats``' ``report.md``: two or more training runs side
by side (their plot), then per training run a table of its per-step numbers (at most
:data:`eval.stats.report_markdown.MAX_TREND_ROWS` rows, evenly spread; all in stats.json) and of its
in-training evaluations, and each ``metrics.jsonl`` with its plot.
"""

from __future__ import annotations

from typing import Any

from eval.stats import report_markdown as md
from eval.stats.plot_names import OVERLAY_PLOT, metrics_plot, trend_plot


def _val_section(run_id: str, vals: dict[str, Any]) -> list[str]:
    lines = []
    for ds, v in vals.items():
        lines.append(f"In-training evaluation `{ds}` (refine rollouts):")
        lines.append("")
        rows = [
            [
                str(v["steps"][i]),
                str(v["n"][i]),
                md.fmt_rate(v["acc"][i]),
                md.fmt_rate(v["refine_rate"][i]),
                md.fmt_rate(v["empty_refine_rate"][i]),
                md.fmt_rate(v["format_pass_rate"][i]),
                md.fmt_num(v["response_tokens"][i]),
                str(v["judge_errors"][i]),
            ]
            for i in range(len(v["steps"]))
        ]
        lines += md.table(
            [
                "step",
                "responses",
                "accuracy",
                "refine rate",
                "empty refines",
                "format pass",
                "mean length (tokens)",
                "judge errors",
            ],
            rows,
        )
        lines.append("")
    return lines


def _trend_section(run_id: str, t: dict[str, Any], plot: str | None) -> list[str]:
    lines = [f"### Training run `{run_id}`", ""]
    if plot:
        lines += [f"![trends {run_id}]({plot})", ""]
    idx = md.shown_steps(len(t["steps"]), lines)
    rows = [
        [
            str(t["steps"][i]),
            str(t["n_refine_rollouts"][i]),
            md.fmt_rate(t["refine_rate"][i]),
            md.fmt_rate(t["empty_refine_rate"][i]),
            md.fmt_rate(t["format_pass_rate"][i]),
            md.fmt_rate(t["acc_refine"][i]),
            md.fmt_rate(t["acc_plain"][i]),
            md.fmt_num(t["response_tokens_refine"][i]),
            str(t["judge_errors"][i]),
        ]
        for i in idx
    ]
    lines += md.table(
        [
            "step",
            "refine rollouts",
            "refine rate",
            "empty refines",
            "format pass",
            "acc. refine",
            "acc. plain (mean)",
            "mean length (tokens)",
            "judge errors",
        ],
        rows,
    )
    lines.append("")
    return lines


def training_lines(stats: dict[str, Any], plots: set[str]) -> list[str]:
    """The "Over training" section (none without a training run, an in-training evaluation or a
    metrics.jsonl): the runs side by side, each run's per-step table and its in-training evaluations,
    each metrics.jsonl's plot."""
    if not (stats["trends"] or stats["metrics_trends"] or stats["val_trends"]):
        return []
    lines = ["## Over training", ""]
    if OVERLAY_PLOT in plots:
        lines += [
            "Training runs side by side, each by its directory:",
            "",
            f"![runs side by side]({OVERLAY_PLOT})",
            "",
        ]
    for run_id, t in stats["trends"].items():
        plot = trend_plot(run_id)
        lines += _trend_section(run_id, t, plot if plot in plots else None)
        lines += _val_section(run_id, stats["val_trends"].get(run_id, {}))
    for run_id, vals in stats["val_trends"].items():
        if run_id not in stats["trends"]:
            lines += [f"### Run `{run_id}`", ""] + _val_section(run_id, vals)
    for label, m in stats["metrics_trends"].items():
        plot = metrics_plot(label)
        lines.append(f"### metrics.jsonl `{label}` ({len(m['steps'])} steps, {len(m['series'])} keys; `{m['file']}`)")
        lines.append("")
        if plot in plots:
            lines += [f"![metrics {label}]({plot})", ""]
    return lines
