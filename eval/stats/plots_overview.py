"""The six overview figures of ``pasr stats`` (:data:`eval.stats.plot_names.OVERVIEW_PLOTS`),
always drawn, one bar or line per group: refine usage, refine spans per response, accuracy with
and without a refine, where refines start in the think block, refine lengths, and the refine
reward's outcomes (titled with what the runs' reward paid for each).

They show PASR's numbers (refines, format): groups of Reflect, Retry, Reward records are left out
of them (their figure is :mod:`eval.stats.plots_rrr`), and a figure without a PASR group says so
in its "no data" frame. How none of them may mislead: :mod:`eval.stats.plots`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from eval.stats import plot_parts as pp
from eval.stats import plot_style as ps
from rewards.refine import COMPARED_OUTCOMES
from rewards.refine import OUTCOMES as OUTCOME_ORDER


def _nothing_to_draw(values: Iterable[float | None]) -> bool:
    """No value, or every value 0: bars of nothing."""
    return not any(ps.finite(values))


def _no_groups_why(stats: dict[str, Any]) -> str:
    if any(g.get("rrr") for g in stats["groups"].values()):
        return "no PASR rollouts in these inputs (Reflect, Retry, Reward records have no refine spans or format)"
    return "no PASR rollouts in these inputs"


def _groups(stats: dict[str, Any]) -> list[tuple[str, dict]]:
    """The PASR groups with responses (RRR groups have no refine or format numbers)."""
    return [(k, g) for k, g in stats["groups"].items() if g["n_responses"] and not g.get("rrr")][
        : pp.MAX_GROUPS_PER_PLOT
    ]


def _groups_with(stats: dict[str, Any], key: str) -> list[dict]:
    """The plotted groups that have something under ``key`` (refine spans, refine outcomes)."""
    return [g for _, g in _groups(stats) if g[key]]


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
    pp.labels(ax, xlabel, ylabel, title)
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
    pp.legend(ax, outside=True, fontsize=8)


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
    pp.labels(ax, xlabel, ylabel, title)
    ps.rate_axis(ax)
    pp.legend(ax, outside=True, fontsize=7)


def overview_rates(stats: dict[str, Any]) -> pp.Figures:
    groups = _groups(stats)
    fig, ax = ps.pyplot().subplots(figsize=(max(6, 1.6 * len(groups) + 2), 4.5))
    title = "Refine usage per group (empty: per span; fix, break: per applicable refining response)"
    if not groups:
        pp.labels(ax, "group", "rate (%)", title)
        ps.no_data(ax, _no_groups_why(stats), rate=True)
    else:
        rates = [
            ("refine_rate", "refine rate"),
            ("empty_refine_rate", "empty-refine rate"),
            ("refine_fix_rate", "refine-fix rate"),
            ("refine_break_rate", "refine-break rate"),
        ]
        series = [(name, [pp.pct(g[key]) for _, g in groups]) for key, name in rates]
        series.append(("format pass rate", [pp.pct(g["format"]["pass_rate"]) for _, g in groups]))
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


def accuracy_by_refine(stats: dict[str, Any]) -> pp.Figures:
    groups = _groups(stats)
    fig, ax = ps.pyplot().subplots(figsize=(max(6, 1.4 * len(groups) + 2), 4.5))
    title = "Accuracy of responses with and without refinement"
    if not groups:
        pp.labels(ax, "group", "mean judge score (%)", title)
        ps.no_data(ax, _no_groups_why(stats), rate=True)
    else:
        series = [
            (side.replace("_", " "), [pp.pct(g["accuracy"][side]["mean"]) for _, g in groups])
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


def refines_per_response(stats: dict[str, Any]) -> pp.Figures:
    groups = _groups(stats)
    fig, ax = ps.pyplot().subplots(figsize=(7, 4.5))
    title = "Distribution of refine spans per response"
    if not groups:
        pp.labels(ax, "refine spans per response", "share of responses (%)", title)
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


def refine_positions(stats: dict[str, Any]) -> pp.Figures:
    spanned = _groups_with(stats, "n_spans")
    placed = [g for g in spanned if g["position_hist"]["n"]]
    fig, ax = ps.pyplot().subplots(figsize=(7, 4.5))
    pp.labels(
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
    pp.legend(ax, fontsize=7)
    yield "refine_positions.png", fig


def refine_lengths(stats: dict[str, Any]) -> pp.Figures:
    spanned = [g for g in _groups_with(stats, "n_spans") if g["refine_length_tokens"]["n"]]
    fig, ax = ps.pyplot().subplots(figsize=(8, 4.5))
    if not spanned:
        pp.labels(ax, "refine length (whitespace tokens)", "share of refine spans (%)", "Refine span lengths")
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


def refine_outcomes(stats: dict[str, Any]) -> pp.Figures:
    """Shares of refine outcomes per group with a refine that was paid against a baseline (an
    evaluation without plain answers has only ``none`` / ``no_baseline``: no reward to show),
    titled with what the runs' reward paid for each."""
    with_outcomes = [
        g for g in _groups_with(stats, "refine_outcomes") if any(g["refine_outcomes"].get(o) for o in COMPARED_OUTCOMES)
    ]
    modes = {g["run_id"]: pp.reward_mode(stats, g["run_id"]) for g in with_outcomes}
    described = {m["describe"] if m else None for m in modes.values()}
    fig, ax = ps.pyplot().subplots(figsize=(10 if len(described) > 1 else 8, 4.5))
    one_mode = next(iter(modes.values())) if len(described) == 1 else None
    if one_mode:
        title = f"Refine reward outcomes · {one_mode['describe']}"
        xlabel = f"refine outcome (vs. {one_mode['basis']})"
    else:
        title = (
            "Refine reward outcomes · " + pp.NOT_RECORDED
            if described == {None}
            else "Refine reward outcomes (each run's reward in the legend)"
        )
        xlabel = "refine outcome (vs. the baseline of the run's reward)"
    if not with_outcomes:
        pp.labels(ax, "refine outcome", "share of rollouts (%)", "Refine reward outcomes")
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
            label = ps.wrap(f"{label} · {mode['describe'] if mode else pp.NOT_RECORDED}", 2.6, 7)
        series.append((label, [100 * g["refine_outcomes"].get(o, 0) / total for o in order]))
    pays = one_mode["pays"] if one_mode else {}
    names = [f"{o}\n({pays[o]})" if o in pays else o for o in order]
    _share_bars(ax, names, series, xlabel=xlabel, ylabel="share of rollouts (%)", title=title)
    yield "refine_outcomes.png", fig
