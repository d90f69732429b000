"""``report.md`` for ``pasr stats``, written from the ``stats.json`` dict (every number in the
report is in stats.json). Groups of Reflect, Retry, Reward records show PASR's columns as
:data:`NOT_APPLICABLE`; their own numbers are the "Reflect, Retry, Reward" section."""

from __future__ import annotations

import re
from typing import Any

from eval.stats.plots import OVERLAY_PLOT, OVERVIEW_PLOTS, metrics_plot, rrr_plot, transition_plot, trend_plot
from eval.stats.refine_term import report_lines as refine_term_lines
from rewards.format import TAG_NAMES

MAX_TREND_ROWS = 25
MAX_IDS_LISTED = 30
EXAMPLE_REPORT_CHARS = 1500
NOT_APPLICABLE = "n/a (RRR)"  # a PASR column of a Reflect, Retry, Reward group

_TAG = re.compile(rf"</?(?:{'|'.join(TAG_NAMES)})>")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#])")


def _fmt_rate(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f}%"


def _fmt_num(v: float | None, digits: int = 1) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _escape(text: str) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", text)


def _code(text: str) -> str:
    """Inline code for a table cell (pipes escaped, backticks replaced)."""
    if not text.strip():
        return "*(blank)*"
    return "`" + text.replace("`", "'").replace("|", "\\|") + "`"


def highlight(response: str, limit: int = EXAMPLE_REPORT_CHARS) -> str:
    """A response as a Markdown blockquote: text escaped, tags shown as code, refine tags bold."""
    clipped = response if len(response) <= limit else response[:limit] + " …"
    parts = []
    pos = 0
    for m in _TAG.finditer(clipped):
        parts.append(_escape(clipped[pos : m.start()]))
        tag = m.group(0)
        parts.append(f"**`{tag}`**" if "refine" in tag else f"`{tag}`")
        pos = m.end()
    parts.append(_escape(clipped[pos:]))
    body = "".join(parts)
    return "\n".join("> " + line + "  " if line.strip() else ">" for line in body.splitlines() or [""])


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _overview(stats: dict[str, Any]) -> list[str]:
    rows = []
    for key, g in stats["groups"].items():
        acc = g["accuracy"]
        if g.get("rrr"):
            pasr_cells = [NOT_APPLICABLE] * 6
            refine_split = [NOT_APPLICABLE] * 2
        else:
            pasr_cells = [
                _fmt_rate(g["refine_rate"]),
                _fmt_num(g["mean_refines_per_response"], 2),
                f"{_fmt_rate(g['empty_refine_rate'])} ({g['n_empty_spans']}/{g['n_spans']})",
                f"{_fmt_rate(g['refine_fix_rate'])} ({g['n_fix']}/{g['n_fix_applicable']})",
                f"{_fmt_rate(g['refine_break_rate'])} ({g['n_break']}/{g['n_break_applicable']})",
                _fmt_rate(g["format"]["pass_rate"]),
            ]
            refine_split = [_fmt_rate(acc["with_refine"]["mean"]), _fmt_rate(acc["without_refine"]["mean"])]
        rows.append(
            [
                f"`{key}`",
                str(g["n_responses"]),
                *pasr_cells,
                _fmt_rate(acc["mean"]),
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
    return _table(header, rows)


def _rrr_group_section(key: str, g: dict[str, Any]) -> list[str]:
    """A group of Reflect, Retry, Reward records: what applies (counts, score, lengths)."""
    engines = ", ".join(f"{e} ({n})" for e, n in g["engines"].items())
    acc, rt = g["accuracy"], g["response_tokens"]
    variants = ", ".join(f"`{v}` ({c})" for v, c in g["variants"].items())
    lines = [f"### `{key}`", ""]
    lines.append(
        f"{g['n_responses']} Reflect, Retry, Reward records (engine: {engines}; variants: {variants}). "
        f"Mean score {_fmt_rate(acc['mean'])} over {acc['n_judged']} scored ({acc['n_correct']} correct); "
        f"judge errors: {g['judge_errors']}. Response length (record `response_tokens`): mean "
        f"{_fmt_num(rt['mean'])}, max {rt['max']}."
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
        f"({_fmt_rate(g['refine_rate'])}), {g['n_spans']} refine spans, {g['n_empty_spans']} of them empty "
        f"({_fmt_rate(g['empty_refine_rate'])}); refine fixes {g['n_fix']} of {g['n_fix_applicable']} applicable "
        f"({_fmt_rate(g['refine_fix_rate'])}), refine breaks {g['n_break']} of {g['n_break_applicable']} "
        f"applicable ({_fmt_rate(g['refine_break_rate'])}); drafts (the last value before the first refine) right "
        f"{g['n_draft_ok']} of {g['n_draft_applicable']} ({_fmt_rate(g['draft_acc'])}). "
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
    lines += _table(["refine spans"] + list(dist), [["responses"] + [str(v) for v in dist.values()]])
    lines.append("")
    acc = g["accuracy"]
    lines += _table(
        ["", "responses judged", "mean judge score", f"correct (score >= {settings['correct_at']:g})"],
        [
            [
                "with refine",
                str(acc["with_refine"]["n"]),
                _fmt_rate(acc["with_refine"]["mean"]),
                str(acc["with_refine"]["n_correct"]),
            ],
            [
                "without refine",
                str(acc["without_refine"]["n"]),
                _fmt_rate(acc["without_refine"]["mean"]),
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
        lines += _table([f"{a:.1f}-{b:.1f}" for a, b in zip(edges[:-1], edges[1:])], [[str(c) for c in ph["counts"]]])
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
    lines.append(f"Response length (record `response_tokens`): mean {_fmt_num(rt['mean'])}, max {rt['max']}.")
    lines.append("")
    fmt = g["format"]
    lines.append(f"Format: {fmt['n_ok']} of {g['n_responses']} pass ({_fmt_rate(fmt['pass_rate'])}).")
    if fmt["failure_reasons"]:
        lines.append("")
        lines += _table(
            ["format failure reason", "count"], [[f"`{r}`", str(c)] for r, c in fmt["failure_reasons"].items()]
        )
    if g["refine_outcomes"]:
        lines.append("")
        lines += _table(["refine outcome", "rollouts"], [[o, str(c)] for o, c in g["refine_outcomes"].items()])
        lines.append("")
        lines += _table(["refine reward", "rollouts"], [[v, str(c)] for v, c in g["refine_reward_values"].items()])
    if g["top_refines"]:
        lines.append("")
        approx = " (approximate: many distinct texts)" if g["top_refines_approximate"] else ""
        lines.append(f"Most common refine texts (lowercased, numbers as `<n>`){approx}:")
        lines.append("")
        lines += _table(["count", "refine text"], [[str(t["count"]), _code(t["text"])] for t in g["top_refines"]])
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
                lines.append(highlight(ex["response"] or ""))
    lines.append("")
    return lines


def _val_section(run_id: str, vals: dict[str, Any]) -> list[str]:
    lines = []
    for ds, v in vals.items():
        lines.append(f"In-training evaluation `{ds}` (refine rollouts):")
        lines.append("")
        rows = [
            [
                str(v["steps"][i]),
                str(v["n"][i]),
                _fmt_rate(v["acc"][i]),
                _fmt_rate(v["refine_rate"][i]),
                _fmt_rate(v["empty_refine_rate"][i]),
                _fmt_rate(v["format_pass_rate"][i]),
                _fmt_num(v["response_tokens"][i]),
                str(v["judge_errors"][i]),
            ]
            for i in range(len(v["steps"]))
        ]
        lines += _table(
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


def _shown_steps(n: int, lines: list[str]) -> list[int]:
    """Indices of the rows of an ``n``-step table shown in the report (at most
    :data:`MAX_TREND_ROWS`, spread evenly); says so in ``lines`` when some are left out."""
    if n <= MAX_TREND_ROWS:
        return list(range(n))
    idx = sorted({round(i * (n - 1) / (MAX_TREND_ROWS - 1)) for i in range(MAX_TREND_ROWS)})
    lines.append(f"{n} steps; {len(idx)} shown (all in stats.json).")
    lines.append("")
    return idx


def _trend_section(run_id: str, t: dict[str, Any], plot: str | None) -> list[str]:
    lines = [f"### Training run `{run_id}`", ""]
    if plot:
        lines += [f"![trends {run_id}]({plot})", ""]
    idx = _shown_steps(len(t["steps"]), lines)
    rows = [
        [
            str(t["steps"][i]),
            str(t["n_refine_rollouts"][i]),
            _fmt_rate(t["refine_rate"][i]),
            _fmt_rate(t["empty_refine_rate"][i]),
            _fmt_rate(t["format_pass_rate"][i]),
            _fmt_rate(t["acc_refine"][i]),
            _fmt_rate(t["acc_plain"][i]),
            _fmt_num(t["response_tokens_refine"][i]),
            str(t["judge_errors"][i]),
        ]
        for i in idx
    ]
    lines += _table(
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


def _count_rate(n: int, of: int, r: float | None) -> str:
    return f"{n}/{of} ({_fmt_rate(r)})"


def _rrr_train_table(run_id: str, t: dict[str, Any], plot: str | None) -> list[str]:
    lines = [f"### Training run `{run_id}`", ""]
    if plot:
        lines += [f"![reflect retry reward {run_id}]({plot})", ""]
    idx = _shown_steps(len(t["steps"]), lines)
    rows = [
        [
            str(t["steps"][i]),
            str(t["n_queries"][i]),
            _fmt_rate(t["first_attempt_acc"][i]),
            str(t["failed_queries"][i]),
            str(t["n_reflections"][i]),
            _fmt_rate(t["retry_acc"][i]),
            _count_rate(t["n_recovered"][i], t["failed_queries"][i], t["recovered_rate"][i]),
            _fmt_num(t["reflection_tokens"][i]),
            _fmt_num(t["retry_tokens"][i]),
            str(t["verifier_errors"][i]),
        ]
        for i in idx
    ]
    lines += _table(
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
            _fmt_rate(e["first_attempt_acc"]),
            f"{e['n_retried']} ({_fmt_rate(e['retry_rate'])})",
            str(e["n_recovered"]),
            _fmt_rate(e["retry_acc"]),
            _fmt_rate(e["final_acc"]),
            str(e["judge_errors"]),
            _fmt_num(e["mean_tokens"]),
        ]
        for key, e in evals.items()
    ]
    return _table(
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
                lines += [f"*{title}:*", "", highlight(text or ""), ""]
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


def transition_words(tr: dict[str, Any]) -> str:
    """A pair's result in one line: accuracy BEFORE -> AFTER, net gain and its sign test."""
    return (
        f"accuracy {_fmt_rate(tr['acc_before'])} -> {_fmt_rate(tr['acc_after'])}, net {tr['net_gain']:+d} "
        f"of {tr['n_pairs']} paired samples (sign test p = {tr['p_sign']:.3g})"
    )


def _transition_section(tr: dict[str, Any], plot: str | None) -> list[str]:
    c = tr["counts"]
    lines = [f"### `{tr['before']}` → `{tr['after']}`", ""]
    lines.append(f"- **BEFORE**: {_escape(tr['before_label'])}")
    lines.append(f"- **AFTER**: {_escape(tr['after_label'])}")
    lines.append(f"- **order**: {_escape(tr['order'])}")
    lines.append("")
    lines.append(
        f"{tr['n_pairs']} samples matched by (dataset, query id, sample index); "
        f"accuracy {_fmt_rate(tr['acc_before'])} → "
        f"{_fmt_rate(tr['acc_after'])}, net {tr['net_gain']:+d} (sign test p = {tr['p_sign']:.3g}). "
        f"Unjudged pairs: {len(tr['unjudged'])}; "
        f"only in before: {tr['only_before']}, only in after: {tr['only_after']}."
    )
    lines.append("")
    lines += _table(
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
        lines += _table(
            ["dataset", "wrong->right", "right->right", "wrong->wrong", "right->wrong"],
            [
                [ds] + [str(v[k]) for k in ("wrong->right", "right->right", "wrong->wrong", "right->wrong")]
                for ds, v in tr["by_dataset"].items()
            ],
        )
    lines.append("")
    return lines


def skipped_lines(count: int, unknown_version: int) -> str:
    """``count`` skipped lines in words, ``unknown_version`` of them records of a schema version
    this pasr does not read: those are named apart, as they are not corrupt."""
    parts = [f"{count - unknown_version} corrupt line(s)"] if count > unknown_version else []
    if unknown_version:
        parts.append(f"{unknown_version} record(s) of an unknown schema version")
    return " and ".join(parts)


def render(stats: dict[str, Any]) -> str:
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
        lines += [f"- `{e['file']}:{e['line']}`: {_escape(e['reason'])}" for e in corrupt["first"]]
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
    lines.append("## Overview")
    lines.append("")
    lines += _overview(stats)
    lines.append("")
    for name in OVERVIEW_PLOTS:
        if name in plots:
            lines.append(f"![{name[:-4]}]({name})")
    lines.append("")

    r = stats.get("rrr") or {}
    if r.get("train") or r.get("evals"):
        lines += _rrr_section(r, plots)

    if stats["trends"] or stats["metrics_trends"] or stats["val_trends"]:
        lines.append("## Over training")
        lines.append("")
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
            lines.append(
                f"### metrics.jsonl `{label}` ({len(m['steps'])} steps, {len(m['series'])} keys; `{m['file']}`)"
            )
            lines.append("")
            if plot in plots:
                lines += [f"![metrics {label}]({plot})", ""]

    lines += refine_term_lines(stats, plots)
    lines.append("## Paired runs")
    lines.append("")
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

    lines.append("## Groups")
    lines.append("")
    for key, g in stats["groups"].items():
        lines += _group_section(key, g, s)
    return "\n".join(lines).rstrip() + "\n"
