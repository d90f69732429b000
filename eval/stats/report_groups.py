"""The per-group sections of ``pasr stats``' ``report.md``: the overview table (a row per group),
and each group's numbers: refine usage, fixes and breaks, accuracy with and without a refine, refine
positions and lengths, format failures, refine outcomes, the most common refine texts and example
responses. A group of Reflect, Retry, Reward records shows PASR's columns as
:data:`NOT_APPLICABLE` (its answers have no refine spans or PASR format): its own numbers are the
report's "Reflect, Retry, Reward" section (:mod:`eval.stats.report_rrr`).
"""

from __future__ import annotations

from typing import Any

from eval.stats import report_markdown as md
from eval.stats.plot_names import OVERVIEW_PLOTS

NOT_APPLICABLE = "n/a (RRR)"  # a PASR column of a Reflect, Retry, Reward group


def _overview_table(stats: dict[str, Any]) -> list[str]:
    rows = []
    for key, g in stats["groups"].items():
        acc = g["accuracy"]
        if g.get("rrr"):
            pasr_cells = [NOT_APPLICABLE] * 6
            refine_split = [NOT_APPLICABLE] * 2
        else:
            pasr_cells = [
                md.fmt_rate(g["refine_rate"]),
                md.fmt_num(g["mean_refines_per_response"], 2),
                f"{md.fmt_rate(g['empty_refine_rate'])} ({g['n_empty_spans']}/{g['n_spans']})",
                f"{md.fmt_rate(g['refine_fix_rate'])} ({g['n_fix']}/{g['n_fix_applicable']})",
                f"{md.fmt_rate(g['refine_break_rate'])} ({g['n_break']}/{g['n_break_applicable']})",
                md.fmt_rate(g["format"]["pass_rate"]),
            ]
            refine_split = [md.fmt_rate(acc["with_refine"]["mean"]), md.fmt_rate(acc["without_refine"]["mean"])]
        rows.append(
            [
                f"`{key}`",
                str(g["n_responses"]),
                *pasr_cells,
                md.fmt_rate(acc["mean"]),
                *refine_split,
                str(g["judge_errors"]),
            ]
        )
    header = [
        "group",
        "responses",
        "refine rate",
        "refines/resp.",
        "empty refines",
        "refine fixes",
        "refine breaks",
        "format pass",
        "accuracy",
        "acc. with refine",
        "acc. without refine",
        "judge errors",
    ]
    return md.table(header, rows)


def _rrr_group_section(key: str, g: dict[str, Any]) -> list[str]:
    """A group of Reflect, Retry, Reward records: what applies (counts, score, lengths)."""
    engines = ", ".join(f"{e} ({n})" for e, n in g["engines"].items())
    acc, rt = g["accuracy"], g["response_tokens"]
    variants = ", ".join(f"`{v}` ({c})" for v, c in g["variants"].items())
    lines = [f"### `{key}`", ""]
    lines.append(
        f"{g['n_responses']} Reflect, Retry, Reward records (engine: {engines}; variants: {variants}). "
        f"Mean score {md.fmt_rate(acc['mean'])} over {acc['n_judged']} scored ({acc['n_correct']} correct); "
        f"judge errors: {g['judge_errors']}. Response length (record `response_tokens`): mean "
        f"{md.fmt_num(rt['mean'])}, max {rt['max']}."
    )
    if g["generation_errors"]:
        lines.append("")
        lines.append(
            f"Generation errors (no response; counted among the {g['judge_errors']} unscored): "
            f"{g['generation_errors']}."
        )
    lines.append("")
    lines.append(
        "These answers are not written in PASR's `<think>`/`<answer>` format: format pass rate, format "
        f"failure reasons and refine numbers are {NOT_APPLICABLE}. See "
        "[Reflect, Retry, Reward](#reflect-retry-reward)."
    )
    lines.append("")
    return lines


def _group_section(key: str, g: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    if g.get("rrr"):
        return _rrr_group_section(key, g)
    lines = [f"### `{key}`", ""]
    engines = ", ".join(f"{e} ({n})" for e, n in g["engines"].items())
    lines.append(
        f"{g['n_responses']} responses (engine: {engines}); {g['n_refining']} refine at least once "
        f"({md.fmt_rate(g['refine_rate'])}), {g['n_spans']} refine spans, {g['n_empty_spans']} of them empty "
        f"({md.fmt_rate(g['empty_refine_rate'])}); refine fixes {g['n_fix']} of {g['n_fix_applicable']} applicable "
        f"({md.fmt_rate(g['refine_fix_rate'])}), refine breaks {g['n_break']} of {g['n_break_applicable']} "
        f"applicable ({md.fmt_rate(g['refine_break_rate'])}); drafts (the last value before the first refine) right "
        f"{g['n_draft_ok']} of {g['n_draft_applicable']} ({md.fmt_rate(g['draft_acc'])}). "
        f"Judge errors: {g['judge_errors']}."
    )
    if len(g["variants"]) > 1:
        lines.append("")
        lines.append("Record variants: " + ", ".join(f"`{v}` ({c})" for v, c in g["variants"].items()) + ".")
    if g["generation_errors"]:
        lines.append("")
        lines.append(
            f"Generation errors (no response; counted among the {g['judge_errors']} unscored): "
            f"{g['generation_errors']}."
        )
    if g["n_refine_field_mismatch"]:
        lines.append("")
        lines.append(
            f"Note: {g['n_refine_field_mismatch']} records have an `n_refine` field that differs from the spans found "
            "in their text (the text is used)."
        )
    lines.append("")
    dist = g["refines_per_response"]
    lines += md.table(["refine spans"] + list(dist), [["responses"] + [str(v) for v in dist.values()]])
    lines.append("")
    acc = g["accuracy"]
    lines += md.table(
        ["", "responses judged", "mean judge score", f"correct (score >= {settings['correct_at']:g})"],
        [
            [
                "with refine",
                str(acc["with_refine"]["n"]),
                md.fmt_rate(acc["with_refine"]["mean"]),
                str(acc["with_refine"]["n_correct"]),
            ],
            [
                "without refine",
                str(acc["without_refine"]["n"]),
                md.fmt_rate(acc["without_refine"]["mean"]),
                str(acc["without_refine"]["n_correct"]),
            ],
        ],
    )
    lines.append("")
    ph = g["position_hist"]
    if ph["n"]:
        lines.append(
            f"Refine positions (start / think length, {ph['n']} spans of well-formed responses, mean {ph['mean']:.2f}):"
        )
        lines.append("")
        edges = ph["bin_edges"]
        lines += md.table([f"{a:.1f}-{b:.1f}" for a, b in zip(edges[:-1], edges[1:])], [[str(c) for c in ph["counts"]]])
        lines.append("")
    rl = g["refine_length_tokens"]
    if rl["n"]:
        lines.append(
            f"Refine length in whitespace tokens: mean {rl['mean']:.1f}, median {rl['median']}, p90 {rl['p90']}, "
            f"max {rl['max']}."
        )
    tl, al = g["think_length_tokens"], g["answer_length_tokens"]
    if tl["n"]:
        lines.append(
            f"Think length (whitespace tokens, well-formed responses): mean {tl['mean']:.1f}, median {tl['median']}; "
            f"answer length: mean {al['mean']:.1f}, median {al['median']}."
        )
    rt = g["response_tokens"]
    lines.append(f"Response length (record `response_tokens`): mean {md.fmt_num(rt['mean'])}, max {rt['max']}.")
    lines.append("")
    fmt = g["format"]
    lines.append(f"Format: {fmt['n_ok']} of {g['n_responses']} pass ({md.fmt_rate(fmt['pass_rate'])}).")
    if fmt["failure_reasons"]:
        lines.append("")
        lines += md.table(
            ["format failure reason", "count"], [[f"`{r}`", str(c)] for r, c in fmt["failure_reasons"].items()]
        )
    if g["refine_outcomes"]:
        lines.append("")
        lines += md.table(["refine outcome", "rollouts"], [[o, str(c)] for o, c in g["refine_outcomes"].items()])
        lines.append("")
        lines += md.table(["refine reward", "rollouts"], [[v, str(c)] for v, c in g["refine_reward_values"].items()])
    if g["top_refines"]:
        lines.append("")
        approx = " (approximate: many distinct texts)" if g["top_refines_approximate"] else ""
        lines.append(f"Most common refine texts (lowercased, numbers as `<n>`){approx}:")
        lines.append("")
        lines += md.table(["count", "refine text"], [[str(t["count"]), md.code(t["text"])] for t in g["top_refines"]])
    shown = [(c, items) for c, items in g["examples"].items() if items]
    if shown:
        lines.append("")
        lines.append("Examples (random sample per cell):")
        for cell, items in shown:
            lines.append("")
            lines.append(f"#### {cell.replace('_', ' ')} ({g['example_cell_sizes'][cell]} responses)")
            for ex in items:
                step = f", step {ex['step']}" if ex["step"] is not None else ""
                flags = ""
                if ex["n_refine"]:
                    flags = (
                        f", refines {ex['n_refine']} (empty: {sum(ex['empty'])}), fix: {ex['fix']}, "
                        f"break: {ex['break']}"
                    )
                lines.append("")
                lines.append(
                    f"query `{ex['query_id']}` #{ex['sample_index']}{step}, score {ex['acc']:g}, gold `{ex['gold']}`, "
                    f"extracted `{ex['extracted_answer']}`{flags}"
                )
                lines.append("")
                lines.append(md.highlight(ex["response"] or ""))
    lines.append("")
    return lines


def overview_lines(stats: dict[str, Any], plots: set[str]) -> list[str]:
    """The "Overview" section: one row per group, and the overview plots that were drawn."""
    lines = ["## Overview", ""]
    lines += _overview_table(stats)
    lines.append("")
    for name in OVERVIEW_PLOTS:
        if name in plots:
            lines.append(f"![{name[:-4]}]({name})")
    lines.append("")
    return lines


def groups_lines(stats: dict[str, Any]) -> list[str]:
    """The "Groups" section: each group's numbers, tables and examples."""
    lines = ["## Groups", ""]
    for key, g in stats["groups"].items():
        lines += _group_section(key, g, stats["settings"])
    return lines
