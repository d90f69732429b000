"""``pasr stats``' view of the refine term's reach (issue 61): per ``metrics.jsonl``, the share of
GRPO groups whose advantages PASR's refine term changed at each step (``pasr/refine_term/*``, both
engines, :mod:`recipe.refine_term`), one line for the terminal, a report section and a plot.

Where the share is 0 a step trained exactly what the same reward without its refine term
(``pasr.weights.refine=0``) trains; with a 0/1 judge that is every step in which all rollouts
refine. A run whose warm-up kept a constant learning rate gets a second line: a gain over such a
warm-up is mostly the RL phase's lower rate settling it (docs/results/demo.md), so the terminal
never shows a warm-up -> final gain without saying what it is not.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eval.stats.runs import warmup_of

LIVE = "pasr/refine_term/live_groups"
MIXED = "pasr/refine_term/mixed_groups"
CHANGE = "pasr/refine_term/adv_change"
REFINE_RATE = "pasr/refine_rate"
DOC = "docs/design.md#when-the-refine-term-acts"
WARMUP_DOC = "docs/results/demo.md#a-warm-up-whose-learning-rate-decays-the-demos-gain-is-the-lower-rates-2026-11-27"


def refine_term_plot(label: str) -> str:
    from eval.stats.plot_style import safe_name

    return f"refine_term_{safe_name(label)}.png"


def reach(metrics_trends: dict[str, dict]) -> dict[str, dict]:
    """Per metrics.jsonl that logged the refine term: its steps, the three series, their means
    over the steps, the steps where it reached no group, and the run's warm-up."""
    out = {}
    for label, m in metrics_trends.items():
        series = m["series"]
        if LIVE not in series:
            continue
        rows = [(s, v) for s, v in zip(m["steps"], series[LIVE]) if v is not None]
        if not rows:
            continue
        idx = [m["steps"].index(s) for s, _ in rows]
        picked = {
            k: [series[k][i] for i in idx] if k in series else [None] * len(idx) for k in (MIXED, CHANGE, REFINE_RATE)
        }
        live = [v for _, v in rows]
        mixed = picked[MIXED]
        out[label] = {
            "steps": [s for s, _ in rows],
            "live_groups": live,
            "mixed_groups": mixed,
            "adv_change": picked[CHANGE],
            "refine_rate": picked[REFINE_RATE],
            "mean_live": sum(live) / len(live),
            "mean_mixed": sum(v for v in mixed if v is not None) / max(1, sum(v is not None for v in mixed)),
            "dead_steps": sum(v == 0 for v in live),
            "warmup": warmup_of(Path(m["file"]).parent) if m.get("file") else None,
        }
    return out


def reach_lines(label: str, r: dict[str, Any]) -> list[str]:
    """The terminal's lines for one run: the term's reach, and what a gain over a constant-rate
    warm-up is (when the run had one)."""
    n = len(r["steps"])
    lines = [
        f"refine term ({label}): changed the advantages of {r['mean_live']:.0%} of GRPO groups a step on average "
        f"over {n} PASR step(s), none in {r['dead_steps']} (groups mixing refining and non-refining rollouts "
        f"{r['mean_mixed']:.0%}); where none, a step trained what pasr.weights.refine=0 trains ({DOC})"
    ]
    w = r.get("warmup")
    if w and w["steps"] > 0 and w["lr_schedule"] == "constant":
        lines.append(
            f"warm-up ({label}): its learning rate stayed constant (warmup.lr_schedule=constant), so a gain over "
            "it can be the RL phase's lower rate settling it rather than PASR; on the demo it was (a decayed warm-up "
            f"got there without PASR: {WARMUP_DOC})"
        )
    return lines


def report_lines(stats: dict[str, Any], plots: list[str]) -> list[str]:
    """The report's section: a table of the term's reach per run, its plot."""
    runs = stats.get("refine_term") or {}
    if not runs:
        return []
    lines = [
        "## The refine term's reach",
        "",
        "The share of GRPO groups whose advantages PASR's refine term changed (by more than 1e-4), per step: "
        "where 0, the step trained what the same reward without the term trains "
        f"(why: `{DOC}` in the repository).",
        "",
        "| run | PASR steps | groups reached (mean) | steps with none | mixed groups (mean) |",
        "|---|---|---|---|---|",
    ]
    for label, r in runs.items():
        lines.append(
            f"| `{label}` | {len(r['steps'])} | {r['mean_live']:.1%} | {r['dead_steps']} | {r['mean_mixed']:.1%} |"
        )
    lines.append("")
    for label, r in runs.items():
        lines += [f"- {line}" for line in reach_lines(label, r)[1:]]
        plot = refine_term_plot(label)
        if plot in plots:
            lines += ["", f"![refine term {label}]({plot})"]
    lines.append("")
    return lines


def refine_term_figures(stats: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """One plot per run over its PASR steps: groups reached, groups mixed, the refine rate (0-100 %)
    and the relative advantage change."""
    from eval.stats import plot_style as ps

    for label, r in (stats.get("refine_term") or {}).items():
        fig, ax = ps.pyplot().subplots(figsize=(8, 3.5))
        steps = r["steps"]
        pct = [[float("nan") if v is None else 100 * v for v in r[k]] for k in ("live_groups", "mixed_groups")]
        ax.plot(steps, pct[0], marker="o", label="groups the refine term changed")
        ax.plot(steps, pct[1], marker="s", label="groups mixing refining and non-refining rollouts")
        if any(v is not None for v in r["refine_rate"]):
            rate = [float("nan") if v is None else 100 * v for v in r["refine_rate"]]
            ax.plot(steps, rate, linestyle="--", color="gray", label="refine rate")
        ps.rate_axis(ax)
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("step")
        ax.set_ylabel("%")
        ax.legend(fontsize=8, loc="best")
        ps.title(ax, f"The refine term's reach · {label} (0 %: the step trained what pasr.weights.refine=0 trains)")
        yield refine_term_plot(label), fig
