"""The "Paired runs" section of ``pasr stats``' ``report.md``: per compared pair of evaluations,
which is BEFORE and AFTER and why, the right/wrong transition matrix with the accuracy before and
after, the net gain and its sign test, the query ids of each cell (the first
:data:`MAX_IDS_LISTED`; all in stats.json) and a row per dataset; and :func:`transition_words`, a
pair's result in one line (the terminal's too). Which two are compared and the counts are
:mod:`eval.stats.pairing`'s.
"""

from __future__ import annotations

from typing import Any

from eval.stats import report_markdown as md
from eval.stats.plot_names import transition_plot

MAX_IDS_LISTED = 30


def transition_words(tr: dict[str, Any]) -> str:
    """A pair's result in one line: accuracy BEFORE -> AFTER, net gain and its sign test."""
    return (
        f"accuracy {md.fmt_rate(tr['acc_before'])} -> {md.fmt_rate(tr['acc_after'])}, net {tr['net_gain']:+d} "
        f"of {tr['n_pairs']} paired samples (sign test p = {tr['p_sign']:.3g})"
    )


def _transition_section(tr: dict[str, Any], plot: str | None) -> list[str]:
    c = tr["counts"]
    lines = [f"### `{tr['before']}` → `{tr['after']}`", ""]
    lines.append(f"- **BEFORE**: {md.escape(tr['before_label'])}")
    lines.append(f"- **AFTER**: {md.escape(tr['after_label'])}")
    lines.append(f"- **order**: {md.escape(tr['order'])}")
    lines.append("")
    lines.append(
        f"{tr['n_pairs']} samples matched by (dataset, query id, sample index); "
        f"accuracy {md.fmt_rate(tr['acc_before'])} → "
        f"{md.fmt_rate(tr['acc_after'])}, net {tr['net_gain']:+d} (sign test p = {tr['p_sign']:.3g}). "
        f"Unjudged pairs: {len(tr['unjudged'])}; "
        f"only in before: {tr['only_before']}, only in after: {tr['only_after']}."
    )
    lines.append("")
    lines += md.table(
        ["before \\ after", "right", "wrong"],
        [
            ["right", str(c["right->right"]), str(c["right->wrong"])],
            ["wrong", str(c["wrong->right"]), str(c["wrong->wrong"])],
        ],
    )
    lines.append("")
    if plot:
        lines += [f"![transitions]({plot})", ""]
    for cell in ("wrong->right", "right->wrong", "wrong->wrong", "right->right"):
        ids = tr["query_ids"][cell]
        if not ids:
            continue
        more = f" … and {len(ids) - MAX_IDS_LISTED} more (all in stats.json)" if len(ids) > MAX_IDS_LISTED else ""
        lines.append(f"- **{cell}** ({len(ids)}): " + ", ".join(f"`{q}`" for q in ids[:MAX_IDS_LISTED]) + more)
    if len(tr["by_dataset"]) > 1:
        lines.append("")
        lines += md.table(
            ["dataset", "wrong->right", "right->right", "wrong->wrong", "right->wrong"],
            [
                [ds] + [str(v[k]) for k in ("wrong->right", "right->right", "wrong->wrong", "right->wrong")]
                for ds, v in tr["by_dataset"].items()
            ],
        )
    lines.append("")
    return lines


def paired_lines(stats: dict[str, Any], plots: set[str]) -> list[str]:
    """The "Paired runs" section: the notes on pairing, each compared pair, or why there is none."""
    lines = ["## Paired runs", ""]
    for note in stats.get("pair_notes", []):
        lines += [f"Note: {note}.", ""]
    if stats["transitions"]:
        for i, tr in enumerate(stats["transitions"], 1):
            plot = transition_plot(i)
            lines += _transition_section(tr, plot if plot in plots else None)
    elif not stats.get("pair_notes"):
        lines.append(
            "No pair of evaluations to compare (give two eval runs, a training run with two in-training "
            "evaluations, or `--pair BEFORE AFTER`)."
        )
        lines.append("")
    return lines
