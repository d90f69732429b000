"""``report.md`` for ``pasr stats``, written from the ``stats.json`` dict (every number in the
report is in stats.json). :func:`render` is the entry point: the inputs read (and the lines
skipped), the definitions, then one section per module:

* :mod:`eval.stats.report_groups`: the overview table and each group's section (groups of
  Reflect, Retry, Reward records show PASR's columns as
  :data:`~eval.stats.report_groups.NOT_APPLICABLE`);
* :mod:`eval.stats.report_rrr`: the "Reflect, Retry, Reward" section, those records' own numbers;
* :mod:`eval.stats.report_training`: "Over training" (per-step tables, in-training evaluations,
  metrics files);
* :mod:`eval.stats.refine_term`: the refine term's reach;
* :mod:`eval.stats.report_pairs`: "Paired runs" (:func:`transition_words` is re-exported here for
  the terminal);

each written with the Markdown pieces of :mod:`eval.stats.report_markdown`, and linking the plots
by the names of :mod:`eval.stats.plot_names`.
"""

from __future__ import annotations

from typing import Any

from eval.stats import report_markdown as md
from eval.stats.refine_term import report_lines as refine_term_lines
from eval.stats.report_groups import groups_lines, overview_lines
from eval.stats.report_pairs import paired_lines, transition_words
from eval.stats.report_rrr import rrr_lines
from eval.stats.report_training import training_lines

__all__ = ["render", "skipped_lines", "transition_words"]  # what `pasr stats` (eval/stats/cli.py) imports


def skipped_lines(count: int, unknown_version: int) -> str:
    """``count`` skipped lines in words, ``unknown_version`` of them records of a schema version
    this pasr does not read: those are named apart, as they are not corrupt."""
    parts = [f"{count - unknown_version} corrupt line(s)"] if count > unknown_version else []
    if unknown_version:
        parts.append(f"{unknown_version} record(s) of an unknown schema version")
    return " and ".join(parts)


def render(stats: dict[str, Any]) -> str:
    """The whole report.md: inputs, definitions, then each section in order."""
    inp = stats["inputs"]
    s = stats["settings"]
    plots = set(stats["plots"])
    lines = ["# Refine statistics (`pasr stats`)", ""]
    lines.append(
        f"{inp['n_records']} rollout records from {len(inp['record_files'])} file(s), "
        f"{inp['bytes'] / 1e6:.1f} MB, read in {stats['elapsed_s']:.1f} s. "
        f"Training rollouts: {inp['n_train_records']}, in-training evaluation: {inp['n_val_records']}, "
        f"`pasr eval`: {inp['n_eval_records']}, other: {inp['n_other_records']}."
    )
    corrupt = stats["corrupt_lines"]
    if corrupt["count"]:
        lines.append("")
        lines.append(
            f"**{skipped_lines(corrupt['count'], corrupt['unknown_version'])} skipped** "
            f"(first {len(corrupt['first'])} listed):"
        )
        lines.append("")
        lines += [f"- `{e['file']}:{e['line']}`: {md.escape(e['reason'])}" for e in corrupt["first"]]
    if inp["skipped_files"]:
        lines.append("")
        lines += [f"- skipped `{f['file']}`: {f['reason']}" for f in inp["skipped_files"]]
    lines.append("")
    lines.append("## Definitions")
    lines.append("")
    lines.append(
        "- **refine rate**: responses with at least one `<refine>` span / responses. Spans are found in the "
        "response text (well-paired `<refine>…</refine>`, also in responses whose format is broken)."
    )
    lines.append(
        "- **empty refine** (per span): blank, or every number it states already appears in the reasoning "
        "before it, or (no numbers) no new content word; see `rewards/refine_quality.py`."
    )
    lines.append(
        "- **refine fix** (per refining response with a numeric gold and a judge score): the final answer is "
        "correct and the last number stated before the first refine differs from the gold."
    )
    lines.append(
        "- **refine break** (per refining response with a numeric gold, a judge score and a number before "
        "the first refine): that number equals the gold and the final answer is wrong. Accuracy of refining "
        "responses moves by fixes minus breaks."
    )
    lines.append(
        f"- **correct**: judge score >= {s['correct_at']:g}. **accuracy**: mean judge score; judge errors "
        "(score null) are left out and counted."
    )
    lines.append(
        "- **lengths** of refines, think and answer blocks are counted in whitespace-separated tokens; "
        "response length is the record's `response_tokens` (the model tokenizer)."
    )
    lines.append("- **position**: refine start offset / length of the think block (well-formed responses only).")
    lines.append("")
    lines += overview_lines(stats, plots)
    lines += rrr_lines(stats, plots)
    lines += training_lines(stats, plots)
    lines += refine_term_lines(stats, plots)
    lines += paired_lines(stats, plots)
    lines += groups_lines(stats)
    return "\n".join(lines).rstrip() + "\n"
