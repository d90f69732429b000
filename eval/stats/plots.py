"""PNG plots for ``pasr stats`` (matplotlib, Agg backend), drawn from the ``stats.json`` dict.

One function per figure, each yielding ``(file name, figure)``, and :func:`make_plots` saving them
in order. The six overview figures are always drawn; the others, one per training run, metrics
file, Reflect, Retry, Reward run or compared pair, and one with two or more training runs side by
side (:data:`OVERLAY_PLOT`). None may mislead: a figure (or panel) with nothing to draw keeps
its frame and says "no data" and what is missing in its middle, instead of an empty chart; a legend
lists only the series that drew something (no swatch for bars all 0 high: a note names those), and
is left out without one; rates and shares are on a fixed 0-100 % axis, other values on an axis of
a minimum span with the values printed (a flat line is drawn flat); a refine reward is titled with
the reward the run paid (its ``config.yaml``, ``stats["runs"]``), and runs are named by their
directory; titles are wrapped to the figure (:mod:`eval.stats.plot_style`). The file names are
made here only (:data:`OVERVIEW_PLOTS`, :func:`trend_plot`, :func:`metrics_plot`,
:func:`transition_plot`, :func:`rrr_plot`, :data:`OVERLAY_PLOT`), so that the report links exactly
what was drawn.
The per-group figures are PASR's (refines, format): groups of Reflect, Retry, Reward records
are left out of them and get their own figure (:func:`rrr_trends`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from eval.stats import plot_style as ps
from eval.stats.refine_term import refine_term_figures
from eval.stats.runs import display
from rewards.refine import COMPARED_OUTCOMES
from rewards.refine import OUTCOMES as OUTCOME_ORDER

MAX_GROUPS_PER_PLOT = 8
MAX_METRIC_PANELS = 15  # room for every preferred metric below
# metrics.jsonl keys plotted first (the per-step `pasr/*` metrics of recipe/metrics.py)
PREFERRED_METRICS = (
    "pasr/refine_rate",
    "pasr/format_pass_rate",
    "pasr/acc_refine",
    "pasr/acc_plain",
    "pasr/empty_refine_rate",
    "pasr/refine_fix_rate",
    "pasr/refine_break_rate",
    "pasr/draft_acc",
    "pasr/reward_mean",
    "pasr/refine_reward_mean",
    "pasr/response_length/mean",
    "pasr/refine_tags_per_response",
    "pasr/judge_errors",
    "eval/acc",
)
OVERVIEW_PLOTS = (
    "overview_rates.png",
    "refines_per_response.png",
    "accuracy_by_refine.png",
    "refine_positions.png",
    "refine_lengths.png",
    "refine_outcomes.png",
)
OVERLAY_PLOT = "runs_overlay.png"
# metrics.jsonl keys whose values are rates in [0, 1] (at least MIN_RATE_SPAN of axis); any other
# value gets MIN_REL_SPAN of its largest magnitude (1 when it is 0)
RATE_KEY = re.compile(r"rate|acc|ratio|share|frac|outcome/")
MIN_RATE_SPAN = 0.1
MIN_REL_SPAN = 0.2
REWARD_AXIS = (-1.0, 1.0)  # the refine reward of every compare mode (sign, margin; a run's old draft) is in [-1, 1]

Figures = Iterator[tuple[str, Any]]  # (file name, matplotlib figure)


_plt = ps.pyplot


def _integer_ticks():
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


safe_name = ps.safe_name


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


def _nothing_to_draw(values: Iterable[float | None]) -> bool:
    """No value, or every value 0: bars of nothing."""
    return not any(ps.finite(values))


def _has_data(artist) -> bool:
    """Whether a legend handle drew anything: a line or points with a finite value, a bar series
    with a bar of finite, non-zero height (bars all 0 high draw nothing to match a swatch to)."""
    if hasattr(artist, "get_ydata"):
        return bool(ps.finite(artist.get_ydata()))
    if hasattr(artist, "patches"):
        return any(h != 0 for h in ps.finite(p.get_height() for p in artist.patches))
    if hasattr(artist, "get_offsets"):
        return bool(ps.finite(v for xy in artist.get_offsets() for v in xy))
    return True


def _legend(ax, *, outside: bool = False, **kw: Any) -> None:
    """A legend of the series that have data; none at all without one. ``outside``: right of
    the axes (bars on a fixed 0-100 % axis reach its top). Bar series that are 0 wherever they
    have a value are named under the legend ("0 % wherever measured: ..."), not given a swatch."""
    handles = list(zip(*ax.get_legend_handles_labels()))
    pairs = [(h, lab) for h, lab in handles if _has_data(h)]
    zero = [
        lab
        for h, lab in handles
        if hasattr(h, "patches") and not _has_data(h) and ps.finite(p.get_height() for p in h.patches)
    ]
    if not pairs:
        return
    if outside:
        kw = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0, **kw}
    ax.legend(*zip(*pairs), **kw)
    if zero:  # below the legend (right of the axes: bar charts have theirs outside), at the axes' foot
        size = kw.get("fontsize", 8)
        ax.text(
            1.01,
            0.0,
            ps.wrap("no bar, 0 wherever measured: " + ", ".join(zero), 1.3, size),
            transform=ax.transAxes,
            ha="left",
            va="bottom",
            fontsize=size,
            color="0.25",
        )


def _no_groups_why(stats: dict[str, Any]) -> str:
    if any(g.get("rrr") for g in stats["groups"].values()):
        return "no PASR rollouts in these inputs (Reflect, Retry, Reward records have no refine spans or format)"
    return "no PASR rollouts in these inputs"


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
    ps.title(ax, title)


def _rate_bars(
    ax,
    groups: list[tuple[str, dict]],
    series: list[tuple[str, list[float]]],
    width: float,
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    why_none: str,
    why_zero: str,
) -> None:
    """Bars of rates in % per group (x: the groups), one bar series per rate; "no data" with
    ``why_none`` when every rate is n/a, with ``why_zero`` when every one is 0 % or n/a."""
    xs = range(len(groups))
    _label(ax, xlabel, ylabel, title)
    ax.set_xticks(
        [x + (len(series) - 1) / 2 * width for x in xs],
        [g["label"] for _, g in groups],
        rotation=20,
        ha="right",
        fontsize=8,
    )
    values = [v for _, vs in series for v in vs]
    if _nothing_to_draw(values):
        ax.set_xlim(-0.5, len(groups) - 0.5 + (len(series) - 1) * width)
        ps.no_data(ax, why_zero if ps.finite(values) else why_none, rate=True, keep_xticks=True)
        return
    for i, (name, vals) in enumerate(series):
        ax.bar([x + i * width for x in xs], vals, width, label=name)
    ps.rate_axis(ax)
    _legend(ax, outside=True, fontsize=8)


def _share_bars(
    ax,
    names: list[str],
    series: list[tuple[str, list[float]]],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    **tick_style: Any,
) -> None:
    """Shares in % per category (x: ``names``), one bar series per group (at least one)."""
    width = 0.8 / len(series)
    for i, (label, shares) in enumerate(series):
        ax.bar([j + i * width for j in range(len(names))], shares, width, label=label)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))], names, **tick_style)
    _label(ax, xlabel, ylabel, title)
    ps.rate_axis(ax)
    _legend(ax, outside=True, fontsize=7)


def overview_rates(stats: dict[str, Any]) -> Figures:
    groups = _groups(stats)
    fig, ax = _plt().subplots(figsize=(max(6, 1.6 * len(groups) + 2), 4.5))
    title = "Refine usage per group (empty: per span; fix, break: per applicable refining response)"
    if not groups:
        _label(ax, "group", "rate (%)", title)
        ps.no_data(ax, _no_groups_why(stats), rate=True)
    else:
        rates = [
            ("refine_rate", "refine rate"),
            ("empty_refine_rate", "empty-refine rate"),
            ("refine_fix_rate", "refine-fix rate"),
            ("refine_break_rate", "refine-break rate"),
        ]
        series = [(name, [_pct(g[key]) for _, g in groups]) for key, name in rates]
        series.append(("format pass rate", [_pct(g["format"]["pass_rate"]) for _, g in groups]))
        _rate_bars(
            ax,
            groups,
            series,
            0.8 / len(series),
            xlabel="group (run · kind [dataset] · variant or eval method)",
            ylabel="rate (%)",
            title=title,
            why_none="no rate in these groups",
            why_zero="every rate is 0 % or n/a: no refine spans and no well-formed response in these groups",
        )
    yield "overview_rates.png", fig


def accuracy_by_refine(stats: dict[str, Any]) -> Figures:
    groups = _groups(stats)
    fig, ax = _plt().subplots(figsize=(max(6, 1.4 * len(groups) + 2), 4.5))
    title = "Accuracy of responses with and without refinement"
    if not groups:
        _label(ax, "group", "mean judge score (%)", title)
        ps.no_data(ax, _no_groups_why(stats), rate=True)
    else:
        series = [
            (side.replace("_", " "), [_pct(g["accuracy"][side]["mean"]) for _, g in groups])
            for side in ("without_refine", "with_refine")
        ]
        _rate_bars(
            ax,
            groups,
            series,
            0.38,
            xlabel="group",
            ylabel="mean judge score (%)",
            title=title,
            why_none="no judged response in these groups",
            why_zero="every judged response in these groups scored 0",
        )
    yield "accuracy_by_refine.png", fig


def refines_per_response(stats: dict[str, Any]) -> Figures:
    groups = _groups(stats)
    fig, ax = _plt().subplots(figsize=(7, 4.5))
    title = "Distribution of refine spans per response"
    if not groups:
        _label(ax, "refine spans per response", "share of responses (%)", title)
        ps.no_data(ax, _no_groups_why(stats), rate=True)
        yield "refines_per_response.png", fig
        return
    maxk = max((int(k) for _, g in groups for k in g["refines_per_response"]), default=0)
    ks = list(range(0, min(maxk, 10) + 1))  # the last bar counts every k >= ks[-1]
    series = []
    for _, g in groups:
        dist = {int(k): v for k, v in g["refines_per_response"].items()}
        vals = [dist.get(k, 0) for k in ks[:-1]] + [sum(v for k, v in dist.items() if k >= ks[-1])]
        series.append((g["label"], [100 * v / g["n_responses"] for v in vals]))
    names = [str(k) for k in ks[:-1]] + [f"{ks[-1]}+" if maxk > ks[-1] else str(ks[-1])]
    _share_bars(ax, names, series, xlabel="refine spans per response", ylabel="share of responses (%)", title=title)
    yield "refines_per_response.png", fig


NO_SPANS = "no refine spans in these rollouts"


def refine_positions(stats: dict[str, Any]) -> Figures:
    spanned = _groups_with(stats, "n_spans")
    placed = [g for g in spanned if g["position_hist"]["n"]]
    fig, ax = _plt().subplots(figsize=(7, 4.5))
    _label(
        ax,
        "refine start / think length (0 = start of think, 1 = end)",
        "share of refine spans (%)",
        "Where refines start inside the think block",
    )
    if not placed:
        why = (
            (NO_SPANS if _groups(stats) else _no_groups_why(stats))
            if not spanned
            else "no refine span in a well-formed think block (positions are measured only there)"
        )
        ps.no_data(ax, why, rate=True)
        yield "refine_positions.png", fig
        return
    for g in placed:
        h = g["position_hist"]
        centers = [(a + b) / 2 for a, b in zip(h["bin_edges"][:-1], h["bin_edges"][1:])]
        ax.plot(centers, [100 * c / h["n"] for c in h["counts"]], marker="o", label=g["label"], clip_on=False)
    ax.set_xlim(0, 1)
    ps.rate_axis(ax)
    _legend(ax, fontsize=7)
    yield "refine_positions.png", fig


def refine_lengths(stats: dict[str, Any]) -> Figures:
    spanned = [g for g in _groups_with(stats, "n_spans") if g["refine_length_tokens"]["n"]]
    fig, ax = _plt().subplots(figsize=(8, 4.5))
    if not spanned:
        _label(ax, "refine length (whitespace tokens)", "share of refine spans (%)", "Refine span lengths")
        ps.no_data(ax, NO_SPANS if _groups(stats) else _no_groups_why(stats), rate=True)
        yield "refine_lengths.png", fig
        return
    edges = spanned[0]["refine_length_tokens"]["bin_edges"]
    names = [
        f"{a}-{b - 1}" if b is not None and b - a > 1 else (str(a) if b is not None else f"{a}+")
        for a, b in zip(edges[:-1], edges[1:])
    ]
    series = [
        (g["label"], [100 * c / g["refine_length_tokens"]["n"] for c in g["refine_length_tokens"]["bin_counts"]])
        for g in spanned
    ]
    _share_bars(
        ax,
        names,
        series,
        xlabel="refine length (whitespace tokens)",
        ylabel="share of refine spans (%)",
        title="Refine span lengths",
        fontsize=8,
    )
    yield "refine_lengths.png", fig


def reward_mode(stats: dict[str, Any], run_id: str) -> dict[str, Any] | None:
    """The refine reward a training run paid (``stats["runs"]``, from its config.yaml), or None."""
    return (stats.get("runs", {}).get(run_id) or {}).get("reward")


def run_label(stats: dict[str, Any], run_id: str) -> str:
    """A run by its directory (``stats["runs"]``), else by its run id."""
    return (stats.get("runs", {}).get(run_id) or {}).get("label") or run_id


NOT_RECORDED = "reward not recorded (no config.yaml beside the rollouts)"


def refine_outcomes(stats: dict[str, Any]) -> Figures:
    """Shares of refine outcomes per group with a refine that was paid against a baseline (an
    evaluation without plain answers has only ``none`` / ``no_baseline``: no reward to show),
    titled with what the runs' reward paid for each."""
    with_outcomes = [
        g for g in _groups_with(stats, "refine_outcomes") if any(g["refine_outcomes"].get(o) for o in COMPARED_OUTCOMES)
    ]
    modes = {g["run_id"]: reward_mode(stats, g["run_id"]) for g in with_outcomes}
    described = {m["describe"] if m else None for m in modes.values()}
    fig, ax = _plt().subplots(figsize=(10 if len(described) > 1 else 8, 4.5))
    one_mode = next(iter(modes.values())) if len(described) == 1 else None
    if one_mode:
        title = f"Refine reward outcomes · {one_mode['describe']}"
        xlabel = f"refine outcome (vs. {one_mode['basis']})"
    else:
        title = (
            "Refine reward outcomes · " + NOT_RECORDED
            if described == {None}
            else "Refine reward outcomes (each run's reward in the legend)"
        )
        xlabel = "refine outcome (vs. the baseline of the run's reward)"
    if not with_outcomes:
        _label(ax, "refine outcome", "share of rollouts (%)", "Refine reward outcomes")
        why = (
            "no refine outcomes against a baseline in these rollouts (training refine rollouts record them; "
            "an evaluation without plain answers has none)"
        )
        ps.no_data(ax, why if _groups(stats) else _no_groups_why(stats), rate=True)
        yield "refine_outcomes.png", fig
        return
    extra = sorted({o for g in with_outcomes for o in g["refine_outcomes"]} - set(OUTCOME_ORDER))
    order = [o for o in OUTCOME_ORDER if any(o in g["refine_outcomes"] for g in with_outcomes)] + extra
    series = []
    for g in with_outcomes:
        total = sum(g["refine_outcomes"].values())
        label = g["label"]
        if len(described) > 1:  # the group, then its run's reward, in lines that leave the axes room
            mode = modes[g["run_id"]]
            label = ps.wrap(f"{label} · {mode['describe'] if mode else NOT_RECORDED}", 2.6, 7)
        series.append((label, [100 * g["refine_outcomes"].get(o, 0) / total for o in order]))
    pays = one_mode["pays"] if one_mode else {}
    names = [f"{o}\n({pays[o]})" if o in pays else o for o in order]
    _share_bars(ax, names, series, xlabel=xlabel, ylabel="share of rollouts (%)", title=title)
    yield "refine_outcomes.png", fig


# --------------------------------------------------------------------------- training trends


def _value_axis(ax, values: Iterable[float | None]) -> None:
    """Any other value: at least :data:`MIN_REL_SPAN` of its largest magnitude (1 when it is 0),
    never below 0 for values that are all >= 0 (counts, lengths)."""
    vals = ps.finite(values)
    if not vals:
        return
    top = max(abs(v) for v in vals)
    ps.span_axis(ax, vals, MIN_REL_SPAN * top if top else 1.0, lo=0.0 if min(vals) >= 0 else None)


def _lines(
    ax,
    steps: list[int],
    series: list[tuple[str | None, list[float | None], dict[str, Any]]],
    *,
    rate: bool,
    why: str,
    axis=None,
) -> bool:
    """Lines over the training steps (rates in %); "no data" (``why``) and False when no line has a
    value. ``axis(ax, values)`` sets the y axis of values that are no rate (default: :func:`_value_axis`)."""
    if not ps.finite(v for _, values, _ in series for v in values):
        ps.no_data(ax, why, rate=rate)
        return False
    xs = []
    for label, values, style in series:
        style = dict(style)
        x = style.pop("steps", steps)
        xs += x
        ys = [_pct(v) if rate else _num(v) for v in values]
        # not clipped: a marker on the 0 or 100 % edge of the fixed axis is drawn whole
        ax.plot(x, ys, **{"marker": ".", "label": label, "clip_on": False, **style})
    _one_step_range(ax, xs)
    if rate:
        ps.rate_axis(ax)
    else:
        (axis or _value_axis)(ax, [v for _, values, _ in series for v in values])
    return True


def _one_step_range(ax, steps: list[int]) -> None:
    """A single training step: one step either side of it (else the axis is a fraction of a step wide)."""
    if steps and min(steps) == max(steps):
        ax.set_xlim(steps[0] - 1, steps[0] + 1)


def _trend_usage(ax, t: dict[str, Any]) -> None:
    ax.set_title("Refine usage (refine rollouts)")
    ax.set_ylabel("rate (%)")
    if _lines(
        ax,
        t["steps"],
        [("refine rate", t["refine_rate"], {}), ("empty-refine rate", t["empty_refine_rate"], {})],
        rate=True,
        why="no refine rollouts at these steps",
    ):
        _legend(ax, fontsize=8)


def _trend_format(ax, t: dict[str, Any]) -> None:
    ax.set_title("Format pass rate (refine rollouts)")
    ax.set_ylabel("rate (%)")
    _lines(
        ax,
        t["steps"],
        [(None, t["format_pass_rate"], {"color": "tab:green"})],
        rate=True,
        why="no refine rollouts at these steps",
    )


def _trend_accuracy(ax, t: dict[str, Any], val: dict[str, Any]) -> None:
    ax.set_title("Accuracy: refine rollouts vs. plain baseline")
    ax.set_ylabel("mean judge score (%)")
    # the plain line dashed: where both are equal, both stay visible
    series = [("refine rollouts", t["acc_refine"], {}), ("plain rollouts (mean)", t["acc_plain"], {"linestyle": "--"})]
    series += [
        (f"in-training eval: {ds}", v["acc"], {"steps": v["steps"], "marker": "s", "linestyle": ":"})
        for ds, v in sorted(val.items(), key=lambda kv: (kv[1]["steps"][:1], kv[0]))
    ]
    if _lines(ax, t["steps"], series, rate=True, why="no judged rollout at these steps"):
        _legend(ax, fontsize=8)


def _trend_length(ax, t: dict[str, Any]) -> None:
    ax.set_title("Mean response length")
    ax.set_ylabel("tokens (record's response_tokens)")
    if _lines(
        ax,
        t["steps"],
        [("refine", t["response_tokens_refine"], {}), ("plain", t["response_tokens_plain"], {"linestyle": "--"})],
        rate=False,
        why="no response lengths at these steps",
    ):
        _legend(ax, fontsize=8)


def reward_axis(ax, values: Iterable[float | None]) -> None:
    """A refine reward: the whole [-1, 1] it can take (wider if a tie or empty value is), with 0 marked."""
    vals = ps.finite(values)
    lo, hi = min([REWARD_AXIS[0], *vals]), max([REWARD_AXIS[1], *vals])
    ax.set_ylim(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
    ax.axhline(0.0, color="0.6", linewidth=0.8, zorder=0)


def _trend_refine_reward(ax, t: dict[str, Any], mode: dict[str, Any] | None) -> None:
    ps.title(
        ax, f"Refine reward, mean of judged refine rollouts · {mode['describe'] if mode else NOT_RECORDED}", fontsize=10
    )
    ax.set_ylabel("refine reward")
    values = t.get("refine_reward", [None] * len(t["steps"]))
    if _lines(
        ax,
        t["steps"],
        [(None, values, {"color": "tab:purple"})],
        rate=False,
        why="no judged refine rollout with a refine reward at these steps",
        axis=reward_axis,
    ):
        ps.value_note(ax, ps.value_words(values))


def _trend_total_reward(ax, t: dict[str, Any]) -> None:
    ps.title(ax, "Total reward (format + accuracy + refine, weighted), mean of judged refine rollouts", fontsize=10)
    ax.set_ylabel("reward")
    values = t.get("total_reward", [None] * len(t["steps"]))
    if _lines(
        ax,
        t["steps"],
        [(None, values, {"color": "tab:brown"})],
        rate=False,
        why="no judged refine rollout with a reward at these steps",
        axis=_value_axis,
    ):
        ps.value_note(ax, ps.value_words(values))


def _step_axis(ax) -> None:
    ax.set_xlabel("training step")
    ax.xaxis.set_major_locator(_integer_ticks())
    ax.grid(alpha=0.3)


def training_trends(stats: dict[str, Any]) -> Figures:
    """One 3x2 figure per training run: usage, format, accuracy (with in-training evals), length,
    refine reward (titled with the run's reward) and total reward."""
    for run_id, t in stats["trends"].items():
        fig, axes = _plt().subplots(3, 2, figsize=(10, 10.5))
        for row in axes:
            for ax in row:
                _step_axis(ax)  # before the panels: a "no data" panel takes its ticks and grid away
        _trend_usage(axes[0][0], t)
        _trend_format(axes[0][1], t)
        _trend_accuracy(axes[1][0], t, stats.get("val_trends", {}).get(run_id, {}))
        _trend_length(axes[1][1], t)
        _trend_refine_reward(axes[2][0], t, reward_mode(stats, run_id))
        _trend_total_reward(axes[2][1], t)
        ps.suptitle(fig, f"Training trends · {run_label(stats, run_id)}")
        yield trend_plot(run_id), fig


def _metric_keys(series: dict[str, list]) -> list[str]:
    """The preferred ``pasr/*`` keys first, then other ``pasr/*`` and ``rrr/*`` keys; any keys if none."""
    keys = [k for k in PREFERRED_METRICS if k in series]
    keys += [k for k in series if k.startswith(("pasr/", "rrr/")) and k not in keys]
    return (keys or list(series))[:MAX_METRIC_PANELS]


def metric_axis(ax, key: str, values: list[float | None]) -> None:
    """The y axis of one metrics.jsonl key: a rate in [0, 1] (:data:`RATE_KEY`) at least
    :data:`MIN_RATE_SPAN` wide inside [0, 1], a refine reward on [-1, 1], any other value by
    :func:`_value_axis`; the values printed in the corner."""
    vals = ps.finite(values)
    if RATE_KEY.search(key) and vals and 0 <= min(vals) and max(vals) <= 1:
        ps.span_axis(ax, vals, MIN_RATE_SPAN, lo=0.0, hi=1.0)
    elif "refine_reward" in key:
        reward_axis(ax, vals)
    else:
        _value_axis(ax, vals)
    ps.value_note(ax, ps.value_words(values))


def _metrics_where(m: dict[str, Any], label: str) -> str:
    """A metrics.jsonl by its run directory."""
    return display(Path(m["file"]).parent) if m.get("file") else label


def metrics_series(stats: dict[str, Any]) -> Figures:
    """One grid per ``metrics.jsonl``, a panel per key ("no data" for a file without a step or a number)."""
    for label, m in stats["metrics_trends"].items():
        keys = _metric_keys(m["series"])
        where = _metrics_where(m, label)
        if not keys or not m["steps"]:
            fig, ax = _plt().subplots(figsize=(8, 3.5))
            ps.title(ax, f"metrics.jsonl · {where}")
            ps.no_data(
                ax,
                "no training step logged in this metrics.jsonl"
                if not m["steps"]
                else "no numeric value logged in this metrics.jsonl",
            )
            yield metrics_plot(label), fig
            continue
        cols = 3
        rows = (len(keys) + cols - 1) // cols
        fig, axes = _plt().subplots(rows, cols, figsize=(11, 2.8 * rows), squeeze=False)
        for i, k in enumerate(keys):
            ax = axes[i // cols][i % cols]
            _step_axis(ax)
            ps.title(ax, k, fontsize=9)
            ax.set_ylabel("value (as logged)")
            values = m["series"][k]
            if ps.finite(values):
                steps = [s for s, v in zip(m["steps"], values) if v is not None]  # a key logged at some steps
                ax.plot(steps, [v for v in values if v is not None], marker=".", clip_on=False)
                metric_axis(ax, k, values)
                _one_step_range(ax, steps)
            else:
                ps.no_data(ax, "no value logged at these steps")
        for j in range(len(keys), rows * cols):
            axes[j // cols][j % cols].axis("off")
        shown = (
            f"{len(keys)} of {len(m['series'])} keys, every one in stats.json" if len(keys) < len(m["series"]) else ""
        )
        ps.suptitle(fig, f"metrics.jsonl · {where}" + (f" ({shown})" if shown else ""))
        yield metrics_plot(label), fig


def rrr_trends(stats: dict[str, Any]) -> Figures:
    """One figure per Reflect, Retry, Reward training run: first-attempt and retry accuracy
    (and the recovered rate) per step, with the run's in-training evaluations as points."""
    r = stats.get("rrr") or {}
    evals = r.get("evals", {})
    for run_id, t in r.get("train", {}).items():
        fig, ax = _plt().subplots(figsize=(8, 4.5))
        _label(ax, "training step", "rate (%)", f"Reflect, Retry, Reward · {run_id}")
        ax.xaxis.set_major_locator(_integer_ticks())
        ax.grid(alpha=0.3)
        series: list[tuple[str | None, list, dict[str, Any]]] = [
            ("first-attempt accuracy", t["first_attempt_acc"], {}),
            ("retry accuracy", t["retry_acc"], {}),
            ("recovered (failed queries)", t["recovered_rate"], {"linestyle": ":"}),
        ]
        for e in evals.values():
            if e["kind"] == "val" and e["run_id"] == run_id:
                series.append(
                    (
                        f"eval {e['dataset']} step {e['step']}: first attempt",
                        [e["first_attempt_acc"]],
                        {"steps": [e["step"]], "marker": "s", "linestyle": "", "color": "tab:blue"},
                    )
                )
                series.append(
                    (
                        f"eval {e['dataset']} step {e['step']}: after retry",
                        [e["final_acc"]],
                        {"steps": [e["step"]], "marker": "^", "linestyle": "", "color": "tab:purple"},
                    )
                )
        if _lines(ax, t["steps"], series, rate=True, why="no scored Reflect, Retry, Reward rollout at these steps"):
            _legend(ax, fontsize=7)
        yield rrr_plot(run_id), fig


# --------------------------------------------------------------------------- paired runs


def transitions(stats: dict[str, Any]) -> Figures:
    """One right/wrong before x after heatmap per compared pair of eval runs."""
    for i, tr in enumerate(stats["transitions"], 1):
        c = tr["counts"]
        grid = [[c["right->right"], c["right->wrong"]], [c["wrong->right"], c["wrong->wrong"]]]
        fig, ax = _plt().subplots(figsize=(5.5, 4.8))
        size = ps.fontsize("axes.labelsize")
        ax.set_xlabel(ps.wrap(f"AFTER: {tr.get('after_label', tr['after'])}", 0.8 * fig.get_figwidth(), size))
        ax.set_ylabel(ps.wrap(f"BEFORE: {tr.get('before_label', tr['before'])}", 0.8 * fig.get_figheight(), size))
        n = tr["n_pairs"]
        acc = (
            f": accuracy {100 * sum(grid[0]) / n:.1f}% -> {100 * (grid[0][0] + grid[1][0]) / n:.1f}%, "
            f"net {grid[1][0] - grid[0][1]:+d}"
            if n
            else ""
        )
        order = f". BEFORE first: {tr['order']}" if tr.get("order") else ""
        ps.title(ax, f"Answer transitions{acc} ({n} paired samples){order}", fontsize=10)
        if not any(v for row in grid for v in row):
            ps.no_data(ax, "no judged sample answered by both runs")
            yield transition_plot(i), fig
            continue
        im = ax.imshow(grid, cmap="Blues", vmin=0)
        top = max(max(row) for row in grid) or 1
        for r in range(2):
            for col in range(2):
                v = grid[r][col]
                ax.text(
                    col, r, str(v), ha="center", va="center", fontsize=14, color="white" if v > top / 2 else "black"
                )
        ax.set_xticks([0, 1], ["right", "wrong"])
        ax.set_yticks([0, 1], ["right", "wrong"])
        cb = fig.colorbar(im, ax=ax, label="samples")
        cb.ax.yaxis.set_major_locator(_integer_ticks())
        yield transition_plot(i), fig


# --------------------------------------------------------------------------- runs side by side

# (title, trends column, metrics.jsonl key, axis kind) of the overlay's panels
RUN_LINESTYLES = ("-", "--", "-.", ":")
OVERLAY_PANELS = (
    ("Refine rate (refine rollouts)", "refine_rate", "pasr/refine_rate", "rate"),
    ("Format pass rate (refine rollouts)", "format_pass_rate", "pasr/format_pass_rate", "rate"),
    ("Accuracy of refine rollouts", "acc_refine", "pasr/acc_refine", "rate"),
    ("Refine reward (mean of judged refine rollouts)", "refine_reward", "pasr/refine_reward_mean", "reward"),
    ("Mean response length (refine rollouts, tokens)", "response_tokens_refine", "pasr/response_length/mean", "value"),
)


def _overlay_runs(
    stats: dict[str, Any],
) -> list[tuple[str, dict[str, tuple[list, list]], dict[str, tuple[list, list]], str]]:
    """(label, {panel column: (steps, values)}, {held-out set: (steps, accuracy)}, its reward in
    words) per training run: from its rollouts when two or more runs have them, else from two or
    more metrics.jsonl."""

    def reward(run_id: str) -> str:
        mode = reward_mode(stats, run_id)
        return mode["describe"] if mode else NOT_RECORDED

    runs = []
    if len(stats["trends"]) >= 2:
        for run_id, t in stats["trends"].items():
            cols = {col: (t["steps"], t.get(col, [None] * len(t["steps"]))) for _, col, _, _ in OVERLAY_PANELS}
            held = {ds: (v["steps"], v["acc"]) for ds, v in stats.get("val_trends", {}).get(run_id, {}).items()}
            runs.append((run_label(stats, run_id), cols, held, reward(run_id)))
    elif len(stats["metrics_trends"]) >= 2:
        for label, m in stats["metrics_trends"].items():

            def series(key: str, m: dict = m) -> tuple[list, list]:
                values = m["series"].get(key, [])
                return [s for s, v in zip(m["steps"], values) if v is not None], [v for v in values if v is not None]

            cols = {col: series(key) for _, col, key, _ in OVERLAY_PANELS}
            runs.append((_metrics_where(m, label), cols, {"eval/acc": series("eval/acc")}, reward(label)))
    drew = [r for r in runs if any(ps.finite(v for _, values in [*r[1].values(), *r[2].values()] for v in values))]
    return drew[:MAX_GROUPS_PER_PLOT]


def runs_overlay(stats: dict[str, Any]) -> Figures:
    """Two or more training runs on shared axes, one colour per run (labelled by its directory):
    refine rate, format, accuracy, refine reward, length, and the in-training evaluations."""
    runs = _overlay_runs(stats)
    if len(runs) < 2:
        return
    plt = _plt()
    fig, axes = plt.subplots(3, 2, figsize=(11, 10.5))
    panels = [ax for row in axes for ax in row]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax in panels:
        _step_axis(ax)
    for ax, (title, col, _, kind) in zip(panels, OVERLAY_PANELS):
        ps.title(ax, title, fontsize=10)
        ax.set_ylabel({"rate": "rate (%)", "reward": "refine reward", "value": "tokens"}[kind])
        # a line style per run too: runs with equal values stay visible over each other
        series = [
            (
                label,
                cols[col][1],
                {
                    "steps": cols[col][0],
                    "color": colors[i % len(colors)],
                    "linestyle": RUN_LINESTYLES[i % len(RUN_LINESTYLES)],
                },
            )
            for i, (label, cols, _, _) in enumerate(runs)
        ]
        _lines(
            ax,
            [],
            series,
            rate=kind == "rate",
            why="no value in these runs",
            axis=reward_axis if kind == "reward" else None,
        )
    ax = panels[len(OVERLAY_PANELS)]
    ps.title(ax, "In-training evaluations: accuracy (refine prompt)", fontsize=10)
    ax.set_ylabel("accuracy (%)")
    markers = "sovD^<>p"
    series = []
    for i, (label, _, held, _) in enumerate(runs):
        for j, (ds, (steps, acc)) in enumerate(sorted(held.items(), key=lambda kv: (kv[1][0][:1], kv[0]))):
            series.append(
                (
                    f"{label}: {ds}",
                    acc,
                    {
                        "steps": steps,
                        "color": colors[i % len(colors)],
                        "marker": markers[j % len(markers)],
                        "linestyle": ":",
                    },
                )
            )
    if _lines(ax, [], series, rate=True, why="no in-training evaluation in these runs"):
        _legend(ax, fontsize=7)
    # one entry per run: its directory and the refine reward it paid (what two runs most often differ in)
    handles = [
        plt.Line2D(
            [],
            [],
            color=colors[i % len(colors)],
            linestyle=RUN_LINESTYLES[i % len(RUN_LINESTYLES)],
            marker=".",
            label=f"{label} · refine reward {reward}",
        )
        for i, (label, _, _, reward) in enumerate(runs)
    ]
    fig.legend(handles=handles, loc="lower center", ncol=1, fontsize=8, frameon=False)
    ps.suptitle(fig, f"Training runs side by side ({len(runs)} runs)")
    fig.set_layout_engine("tight", rect=(0, 0.01 + 0.02 * len(runs), 1, 1))  # room for the legend
    yield OVERLAY_PLOT, fig


FIGURES = (
    overview_rates,
    refines_per_response,
    accuracy_by_refine,
    refine_positions,
    refine_lengths,
    refine_outcomes,
    training_trends,
    runs_overlay,
    rrr_trends,
    metrics_series,
    refine_term_figures,
    transitions,
)


MONTAGE_PLOT = "montage.png"


def montage_figure(out: Path, names: list[str], *, cols: int = 3, width_in: float = 15.0):
    """The plots ``names`` (files in ``out``) tiled ``cols`` to a row, each under its file name; a
    plot much wider than tall (many groups side by side) takes two cells, to stay readable."""
    import matplotlib.image as mpimg

    cell = width_in / cols
    rows: list[list[tuple[str, Any, int]]] = [[]]
    for name in names:
        img = mpimg.imread(out / name)
        span = min(cols, 2 if img.shape[1] / img.shape[0] > 2.2 else 1)
        if sum(s for _, _, s in rows[-1]) + span > cols:
            rows.append([])
        rows[-1].append((name, img, span))
    rows = [row for row in rows if row]
    heights = [max(img.shape[0] / img.shape[1] * span * cell for _, img, span in row) + 0.3 for row in rows]
    fig = _plt().figure(figsize=(width_in, sum(heights)))
    grid = fig.add_gridspec(
        len(rows),
        cols,
        height_ratios=heights,
        left=0.003,
        right=0.997,
        bottom=0.003,
        top=1 - 0.3 / sum(heights),
        wspace=0.02,
        hspace=0.3 / (sum(heights) / len(rows)),
    )
    for r, row in enumerate(rows):
        c = 0
        for name, img, span in row:
            ax = fig.add_subplot(grid[r, c : c + span])
            ax.imshow(img, interpolation="antialiased")
            ax.set_axis_off()
            ax.set_title(name, fontsize=9)
            c += span
    return fig


def montage(out: Path, names: list[str], *, dpi: int = 80) -> Path:
    """:func:`montage_figure` saved as ``out/montage.png`` in 256 colours, so that a page of plots
    stays a few hundred KB: one image to glance at, or to put in the docs."""
    from PIL import Image

    fig = montage_figure(out, names)
    fig.set_dpi(dpi)
    fig.canvas.draw()
    rgba = Image.frombuffer("RGBA", fig.canvas.get_width_height(), fig.canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    _plt().close(fig)
    dest = out / MONTAGE_PLOT
    rgba.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(dest, optimize=True)
    return dest


def make_plots(stats: dict[str, Any], out: Path) -> list[str]:
    """Write every plot (see the module docstring); returns the file names (relative to ``out``)."""
    plt = _plt()
    written: list[str] = []
    for draw in FIGURES:
        for name, fig in draw(stats):
            if fig.get_layout_engine() is None:
                fig.tight_layout()
            fig.savefig(out / name, dpi=100)
            plt.close(fig)
            written.append(name)
    return written
