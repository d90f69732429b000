"""PNG plots for ``pasr stats`` (matplotlib, Agg backend), drawn from the ``stats.json`` dict.

One function per figure, each yielding ``(file name, figure)`` for every figure it has data for
(none when it has none), and :func:`make_plots` saving them in order. The file names are made
here only (:data:`OVERVIEW_PLOTS`, :func:`trend_plot`, :func:`metrics_plot`,
:func:`transition_plot`, :func:`rrr_plot`), so that the report links exactly what was drawn.
The per-group figures are PASR's (refines, format): groups of Reflect, Retry, Reward records
are left out of them and get their own figure (:func:`rrr_trends`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MAX_GROUPS_PER_PLOT = 8
MAX_METRIC_PANELS = 12
# metrics.jsonl keys plotted first (the per-step `pasr/*` metrics of recipe/metrics.py)
PREFERRED_METRICS = (
    "pasr/refine_rate", "pasr/format_pass_rate", "pasr/acc_refine", "pasr/acc_plain", "pasr/empty_refine_rate",
    "pasr/refine_fix_rate", "pasr/draft_acc", "pasr/reward_mean", "pasr/refine_reward_mean", "pasr/response_length/mean",
    "pasr/refine_tags_per_response", "pasr/judge_errors", "eval/acc",
)
OVERVIEW_PLOTS = ("overview_rates.png", "refines_per_response.png", "accuracy_by_refine.png", "refine_positions.png",
                  "refine_lengths.png", "refine_outcomes.png")
OUTCOME_ORDER = ("better", "worse", "tie", "empty", "none", "no_baseline", "judge_error")

Figures = Iterator[tuple[str, Any]]  # (file name, matplotlib figure)


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _integer_ticks():
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80] or "run"


def trend_plot(run_id: str) -> str:
    return f"trend_{safe_name(run_id)}.png"


def metrics_plot(label: str) -> str:
    return f"metrics_{safe_name(label)}.png"


def rrr_plot(run_id: str) -> str:
    return f"rrr_{safe_name(run_id)}.png"


def transition_plot(i: int) -> str:
    """File name of the ``i``-th transition matrix (1-based, the order of ``stats["transitions"]``)."""
    return f"transition_{i}.png"


def _pct(v: float | None) -> float:
    return float("nan") if v is None else 100.0 * v


def _num(v: float | None) -> float:
    return float("nan") if v is None else v


def _groups(stats: dict[str, Any]) -> list[tuple[str, dict]]:
    """The PASR groups with responses (RRR groups have no refine or format numbers)."""
    return [(k, g) for k, g in stats["groups"].items() if g["n_responses"] and not g.get("rrr")][:MAX_GROUPS_PER_PLOT]


def _groups_with(stats: dict[str, Any], key: str) -> list[dict]:
    """The plotted groups that have something under ``key`` (refine spans, refine outcomes)."""
    return [g for _, g in _groups(stats) if g[key]]


# --------------------------------------------------------------------------- per-group figures


def _label(ax, xlabel: str, ylabel: str, title: str) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)


def _rate_bars(ax, groups: list[tuple[str, dict]], series: list[tuple[str, list[float]]], width: float,
               *, xlabel: str, ylabel: str, title: str) -> None:
    """Bars of rates in % per group (x: the groups), one bar series per rate."""
    xs = range(len(groups))
    for i, (name, values) in enumerate(series):
        ax.bar([x + i * width for x in xs], values, width, label=name)
    ax.set_xticks([x + (len(series) - 1) / 2 * width for x in xs], [g["label"] for _, g in groups],
                  rotation=20, ha="right", fontsize=8)
    _label(ax, xlabel, ylabel, title)
    ax.set_ylim(0, 120)
    ax.legend(fontsize=8, ncol=len(series), loc="upper center")


def _share_bars(ax, names: list[str], series: list[tuple[str, list[float]]], *, xlabel: str, ylabel: str,
                title: str, **tick_style: Any) -> None:
    """Shares in % per category (x: ``names``), one bar series per group."""
    width = 0.8 / len(series)
    for i, (label, shares) in enumerate(series):
        ax.bar([j + i * width for j in range(len(names))], shares, width, label=label)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))], names, **tick_style)
    _label(ax, xlabel, ylabel, title)
    ax.legend(fontsize=7)


def overview_rates(stats: dict[str, Any]) -> Figures:
    groups = _groups(stats)
    if not groups:
        return
    fig, ax = _plt().subplots(figsize=(max(6, 1.6 * len(groups) + 2), 4.5))
    rates = [("refine_rate", "refine rate"), ("empty_refine_rate", "empty-refine rate"), ("refine_fix_rate", "refine-fix rate")]
    series = [(name, [_pct(g[key]) for _, g in groups]) for key, name in rates]
    series.append(("format pass rate", [_pct(g["format"]["pass_rate"]) for _, g in groups]))
    _rate_bars(ax, groups, series, 0.8 / len(series), xlabel="group (run · kind [dataset] · variant or eval method)",
               ylabel="rate (%)", title="Refine usage per group (empty: per span; fix: per applicable refining response)")
    yield "overview_rates.png", fig


def accuracy_by_refine(stats: dict[str, Any]) -> Figures:
    groups = _groups(stats)
    if not groups:
        return
    fig, ax = _plt().subplots(figsize=(max(6, 1.4 * len(groups) + 2), 4.5))
    series = [(side.replace("_", " "), [_pct(g["accuracy"][side]["mean"]) for _, g in groups])
              for side in ("without_refine", "with_refine")]
    _rate_bars(ax, groups, series, 0.38, xlabel="group", ylabel="mean judge score (%)",
               title="Accuracy of responses with and without refinement")
    yield "accuracy_by_refine.png", fig


def refines_per_response(stats: dict[str, Any]) -> Figures:
    groups = _groups(stats)
    if not groups:
        return
    fig, ax = _plt().subplots(figsize=(7, 4.5))
    maxk = max((int(k) for _, g in groups for k in g["refines_per_response"]), default=0)
    ks = list(range(0, min(maxk, 10) + 1))  # the last bar counts every k >= ks[-1]
    series = []
    for _, g in groups:
        dist = {int(k): v for k, v in g["refines_per_response"].items()}
        vals = [dist.get(k, 0) for k in ks[:-1]] + [sum(v for k, v in dist.items() if k >= ks[-1])]
        series.append((g["label"], [100 * v / g["n_responses"] for v in vals]))
    names = [str(k) for k in ks[:-1]] + [f"{ks[-1]}+" if maxk > ks[-1] else str(ks[-1])]
    _share_bars(ax, names, series, xlabel="refine spans per response", ylabel="share of responses (%)",
                title="Distribution of refine spans per response")
    yield "refines_per_response.png", fig


def refine_positions(stats: dict[str, Any]) -> Figures:
    spanned = _groups_with(stats, "n_spans")
    if not spanned:
        return
    fig, ax = _plt().subplots(figsize=(7, 4.5))
    for g in spanned:
        h = g["position_hist"]
        if not h["n"]:
            continue
        centers = [(a + b) / 2 for a, b in zip(h["bin_edges"][:-1], h["bin_edges"][1:])]
        ax.plot(centers, [100 * c / h["n"] for c in h["counts"]], marker="o", label=g["label"])
    ax.set_xlim(0, 1)
    _label(ax, "refine start / think length (0 = start of think, 1 = end)", "share of refine spans (%)",
           "Where refines start inside the think block")
    ax.legend(fontsize=7)
    yield "refine_positions.png", fig


def refine_lengths(stats: dict[str, Any]) -> Figures:
    spanned = _groups_with(stats, "n_spans")
    if not spanned:
        return
    fig, ax = _plt().subplots(figsize=(8, 4.5))
    edges = spanned[0]["refine_length_tokens"]["bin_edges"]
    names = [f"{a}-{b - 1}" if b is not None and b - a > 1 else (str(a) if b is not None else f"{a}+") for a, b in zip(edges[:-1], edges[1:])]
    series = [(g["label"], [100 * c / g["refine_length_tokens"]["n"] for c in g["refine_length_tokens"]["bin_counts"]]) for g in spanned]
    _share_bars(ax, names, series, xlabel="refine length (whitespace tokens)", ylabel="share of refine spans (%)",
                title="Refine span lengths", fontsize=8)
    yield "refine_lengths.png", fig


def refine_outcomes(stats: dict[str, Any]) -> Figures:
    with_outcomes = _groups_with(stats, "refine_outcomes")
    if not with_outcomes:
        return
    extra = sorted({o for g in with_outcomes for o in g["refine_outcomes"]} - set(OUTCOME_ORDER))
    order = [o for o in OUTCOME_ORDER if any(o in g["refine_outcomes"] for g in with_outcomes)] + extra
    fig, ax = _plt().subplots(figsize=(8, 4.5))
    series = []
    for g in with_outcomes:
        total = sum(g["refine_outcomes"].values())
        series.append((g["label"], [100 * g["refine_outcomes"].get(o, 0) / total for o in order]))
    _share_bars(ax, order, series, xlabel="refine outcome (vs. mean plain accuracy of the query)",
                ylabel="share of rollouts (%)", title="Refine reward outcomes (better +1, worse -1, tie = tie_value, none 0)")
    yield "refine_outcomes.png", fig


# --------------------------------------------------------------------------- training trends


def _trend_usage(ax, t: dict[str, Any]) -> None:
    ax.plot(t["steps"], [_pct(v) for v in t["refine_rate"]], marker=".", label="refine rate")
    ax.plot(t["steps"], [_pct(v) for v in t["empty_refine_rate"]], marker=".", label="empty-refine rate")
    ax.set_title("Refine usage (refine rollouts)")
    ax.set_ylabel("rate (%)")
    ax.legend(fontsize=8)


def _trend_format(ax, t: dict[str, Any]) -> None:
    ax.plot(t["steps"], [_pct(v) for v in t["format_pass_rate"]], marker=".", color="tab:green")
    ax.set_title("Format pass rate (refine rollouts)")
    ax.set_ylabel("rate (%)")


def _trend_accuracy(ax, t: dict[str, Any], val: dict[str, Any]) -> None:
    ax.plot(t["steps"], [_pct(v) for v in t["acc_refine"]], marker=".", label="refine rollouts")
    ax.plot(t["steps"], [_pct(v) for v in t["acc_plain"]], marker=".", label="plain rollouts (mean)")
    for ds, v in val.items():
        ax.plot(v["steps"], [_pct(a) for a in v["acc"]], marker="s", linestyle="--", label=f"in-training eval: {ds}")
    ax.set_title("Accuracy: refine rollouts vs. plain baseline")
    ax.set_ylabel("mean judge score (%)")
    ax.legend(fontsize=8)


def _trend_length(ax, t: dict[str, Any]) -> None:
    ax.plot(t["steps"], [_num(v) for v in t["response_tokens_refine"]], marker=".", label="refine")
    ax.plot(t["steps"], [_num(v) for v in t["response_tokens_plain"]], marker=".", label="plain")
    ax.set_title("Mean response length")
    ax.set_ylabel("tokens (record's response_tokens)")
    ax.legend(fontsize=8)


def _step_axis(ax) -> None:
    ax.set_xlabel("training step")
    ax.xaxis.set_major_locator(_integer_ticks())
    ax.grid(alpha=0.3)


def training_trends(stats: dict[str, Any]) -> Figures:
    """One 2x2 figure per training run: usage, format, accuracy (with in-training evals), length."""
    for run_id, t in stats["trends"].items():
        fig, axes = _plt().subplots(2, 2, figsize=(10, 7))
        _trend_usage(axes[0][0], t)
        _trend_format(axes[0][1], t)
        _trend_accuracy(axes[1][0], t, stats.get("val_trends", {}).get(run_id, {}))
        _trend_length(axes[1][1], t)
        for row in axes:
            for ax in row:
                _step_axis(ax)
        fig.suptitle(f"Training trends · {run_id}")
        yield trend_plot(run_id), fig


def _metric_keys(series: dict[str, list]) -> list[str]:
    """The preferred ``pasr/*`` keys first, then other ``pasr/*`` and ``rrr/*`` keys; any keys if none."""
    keys = [k for k in PREFERRED_METRICS if k in series]
    keys += [k for k in series if k.startswith(("pasr/", "rrr/")) and k not in keys]
    return (keys or list(series))[:MAX_METRIC_PANELS]


def metrics_series(stats: dict[str, Any]) -> Figures:
    """One grid per ``metrics.jsonl``, a panel per key."""
    for label, m in stats["metrics_trends"].items():
        keys = _metric_keys(m["series"])
        if not keys or not m["steps"]:
            continue
        cols = 3
        rows = (len(keys) + cols - 1) // cols
        fig, axes = _plt().subplots(rows, cols, figsize=(11, 2.8 * rows), squeeze=False)
        for i, k in enumerate(keys):
            ax = axes[i // cols][i % cols]
            ax.plot(m["steps"], [_num(v) for v in m["series"][k]], marker=".")
            ax.set_title(k, fontsize=9)
            ax.set_xlabel("training step")
            ax.xaxis.set_major_locator(_integer_ticks())
            ax.set_ylabel("value (as logged)")
            ax.grid(alpha=0.3)
        for j in range(len(keys), rows * cols):
            axes[j // cols][j % cols].axis("off")
        fig.suptitle(f"metrics.jsonl · {label}")
        yield metrics_plot(label), fig


def rrr_trends(stats: dict[str, Any]) -> Figures:
    """One figure per Reflect, Retry, Reward training run: first-attempt and retry accuracy
    (and the recovered rate) per step, with the run's in-training evaluations as points."""
    r = stats.get("rrr") or {}
    evals = r.get("evals", {})
    for run_id, t in r.get("train", {}).items():
        fig, ax = _plt().subplots(figsize=(8, 4.5))
        ax.plot(t["steps"], [_pct(v) for v in t["first_attempt_acc"]], marker=".", label="first-attempt accuracy")
        ax.plot(t["steps"], [_pct(v) for v in t["retry_acc"]], marker=".", label="retry accuracy")
        ax.plot(t["steps"], [_pct(v) for v in t["recovered_rate"]], marker=".", linestyle=":", label="recovered (failed queries)")
        for e in evals.values():
            if e["kind"] == "val" and e["run_id"] == run_id:
                ax.plot([e["step"]], [_pct(e["first_attempt_acc"])], marker="s", linestyle="", color="tab:blue",
                        label=f"eval {e['dataset']} step {e['step']}: first attempt")
                ax.plot([e["step"]], [_pct(e["final_acc"])], marker="^", linestyle="", color="tab:purple",
                        label=f"eval {e['dataset']} step {e['step']}: after retry")
        _label(ax, "training step", "rate (%)", f"Reflect, Retry, Reward · {run_id}")
        ax.xaxis.set_major_locator(_integer_ticks())
        ax.set_ylim(-2, 102)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        yield rrr_plot(run_id), fig


# --------------------------------------------------------------------------- paired runs


def transitions(stats: dict[str, Any]) -> Figures:
    """One right/wrong before x after heatmap per compared pair of eval runs."""
    for i, tr in enumerate(stats["transitions"], 1):
        c = tr["counts"]
        grid = [[c["right->right"], c["right->wrong"]], [c["wrong->right"], c["wrong->wrong"]]]
        fig, ax = _plt().subplots(figsize=(5.5, 4.8))
        im = ax.imshow(grid, cmap="Blues", vmin=0)
        top = max(max(row) for row in grid) or 1
        for r in range(2):
            for col in range(2):
                v = grid[r][col]
                ax.text(col, r, str(v), ha="center", va="center", fontsize=14, color="white" if v > top / 2 else "black")
        ax.set_xticks([0, 1], ["right", "wrong"])
        ax.set_yticks([0, 1], ["right", "wrong"])
        ax.set_xlabel(f"after: {tr['after']}")
        ax.set_ylabel(f"before: {tr['before']}")
        ax.set_title(f"Answer transitions ({tr['n_pairs']} paired samples)")
        cb = fig.colorbar(im, ax=ax, label="samples")
        cb.ax.yaxis.set_major_locator(_integer_ticks())
        yield transition_plot(i), fig


FIGURES = (overview_rates, refines_per_response, accuracy_by_refine, refine_positions, refine_lengths,
           refine_outcomes, training_trends, rrr_trends, metrics_series, transitions)


def make_plots(stats: dict[str, Any], out: Path) -> list[str]:
    """Write every plot that has data; returns the file names (relative to ``out``)."""
    plt = _plt()
    written: list[str] = []
    for draw in FIGURES:
        for name, fig in draw(stats):
            fig.tight_layout()
            fig.savefig(out / name, dpi=100)
            plt.close(fig)
            written.append(name)
    return written
