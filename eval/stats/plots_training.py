"""``pasr stats``' figures over training steps: one 3x2 figure per training run's rollouts
(refine usage, format, accuracy with its in-training evaluations, length, refine reward, total
reward), one grid per ``metrics.jsonl`` (a panel per logged key, the ``pasr/*`` ones first), and
two or more training runs side by side on shared axes (:data:`eval.stats.plot_names.OVERLAY_PLOT`).
A refine reward is titled with the reward the run paid and drawn on its whole [-1, 1]; runs are
named by their directory. How none of them may mislead: :mod:`eval.stats.plots`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from eval.stats import plot_parts as pp
from eval.stats import plot_style as ps
from eval.stats.plot_names import OVERLAY_PLOT, metrics_plot, trend_plot
from eval.stats.runs import display

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
# metrics.jsonl keys whose values are rates in [0, 1] (at least MIN_RATE_SPAN of axis); any other
# value gets plot_parts.MIN_REL_SPAN of its largest magnitude (1 when it is 0)
RATE_KEY = re.compile(r"rate|acc|ratio|share|frac|outcome/")
MIN_RATE_SPAN = 0.1


def _trend_usage(ax, t: dict[str, Any]) -> None:
    ax.set_title("Refine usage (refine rollouts)")
    ax.set_ylabel("rate (%)")
    if pp.lines(
        ax,
        t["steps"],
        [("refine rate", t["refine_rate"], {}), ("empty-refine rate", t["empty_refine_rate"], {})],
        rate=True,
        why="no refine rollouts at these steps",
    ):
        pp.legend(ax, fontsize=8)


def _trend_format(ax, t: dict[str, Any]) -> None:
    ax.set_title("Format pass rate (refine rollouts)")
    ax.set_ylabel("rate (%)")
    pp.lines(
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
    if pp.lines(ax, t["steps"], series, rate=True, why="no judged rollout at these steps"):
        pp.legend(ax, fontsize=8)


def _trend_length(ax, t: dict[str, Any]) -> None:
    ax.set_title("Mean response length")
    ax.set_ylabel("tokens (record's response_tokens)")
    if pp.lines(
        ax,
        t["steps"],
        [("refine", t["response_tokens_refine"], {}), ("plain", t["response_tokens_plain"], {"linestyle": "--"})],
        rate=False,
        why="no response lengths at these steps",
    ):
        pp.legend(ax, fontsize=8)


def _trend_refine_reward(ax, t: dict[str, Any], mode: dict[str, Any] | None) -> None:
    ps.title(
        ax,
        f"Refine reward, mean of judged refine rollouts · {mode['describe'] if mode else pp.NOT_RECORDED}",
        fontsize=10,
    )
    ax.set_ylabel("refine reward")
    values = t.get("refine_reward", [None] * len(t["steps"]))
    if pp.lines(
        ax,
        t["steps"],
        [(None, values, {"color": "tab:purple"})],
        rate=False,
        why="no judged refine rollout with a refine reward at these steps",
        axis=pp.reward_axis,
    ):
        ps.value_note(ax, ps.value_words(values))


def _trend_total_reward(ax, t: dict[str, Any]) -> None:
    ps.title(ax, "Total reward (format + accuracy + refine, weighted), mean of judged refine rollouts", fontsize=10)
    ax.set_ylabel("reward")
    values = t.get("total_reward", [None] * len(t["steps"]))
    if pp.lines(
        ax,
        t["steps"],
        [(None, values, {"color": "tab:brown"})],
        rate=False,
        why="no judged refine rollout with a reward at these steps",
        axis=pp.value_axis,
    ):
        ps.value_note(ax, ps.value_words(values))


def training_trends(stats: dict[str, Any]) -> pp.Figures:
    """One 3x2 figure per training run: usage, format, accuracy (with in-training evals), length,
    refine reward (titled with the run's reward) and total reward."""
    for run_id, t in stats["trends"].items():
        fig, axes = ps.pyplot().subplots(3, 2, figsize=(10, 10.5))
        for row in axes:
            for ax in row:
                pp.step_axis(ax)  # before the panels: a "no data" panel takes its ticks and grid away
        _trend_usage(axes[0][0], t)
        _trend_format(axes[0][1], t)
        _trend_accuracy(axes[1][0], t, stats.get("val_trends", {}).get(run_id, {}))
        _trend_length(axes[1][1], t)
        _trend_refine_reward(axes[2][0], t, pp.reward_mode(stats, run_id))
        _trend_total_reward(axes[2][1], t)
        ps.suptitle(fig, f"Training trends · {pp.run_label(stats, run_id)}")
        yield trend_plot(run_id), fig


def _metric_keys(series: dict[str, list]) -> list[str]:
    """The preferred ``pasr/*`` keys first, then other ``pasr/*`` and ``rrr/*`` keys; any keys if none."""
    keys = [k for k in PREFERRED_METRICS if k in series]
    keys += [k for k in series if k.startswith(("pasr/", "rrr/")) and k not in keys]
    return (keys or list(series))[:MAX_METRIC_PANELS]


def metric_axis(ax, key: str, values: list[float | None]) -> None:
    """The y axis of one metrics.jsonl key: a rate in [0, 1] (:data:`RATE_KEY`) at least
    :data:`MIN_RATE_SPAN` wide inside [0, 1], a refine reward on [-1, 1], any other value by
    :func:`eval.stats.plot_parts.value_axis`; the values printed in the corner."""
    vals = ps.finite(values)
    if RATE_KEY.search(key) and vals and 0 <= min(vals) and max(vals) <= 1:
        ps.span_axis(ax, vals, MIN_RATE_SPAN, lo=0.0, hi=1.0)
    elif "refine_reward" in key:
        pp.reward_axis(ax, vals)
    else:
        pp.value_axis(ax, vals)
    ps.value_note(ax, ps.value_words(values))


def _metrics_where(m: dict[str, Any], label: str) -> str:
    """A metrics.jsonl by its run directory."""
    return display(Path(m["file"]).parent) if m.get("file") else label


def metrics_series(stats: dict[str, Any]) -> pp.Figures:
    """One grid per ``metrics.jsonl``, a panel per key ("no data" for a file without a step or a number)."""
    for label, m in stats["metrics_trends"].items():
        keys = _metric_keys(m["series"])
        where = _metrics_where(m, label)
        if not keys or not m["steps"]:
            fig, ax = ps.pyplot().subplots(figsize=(8, 3.5))
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
        fig, axes = ps.pyplot().subplots(rows, cols, figsize=(11, 2.8 * rows), squeeze=False)
        for i, k in enumerate(keys):
            ax = axes[i // cols][i % cols]
            pp.step_axis(ax)
            ps.title(ax, k, fontsize=9)
            ax.set_ylabel("value (as logged)")
            values = m["series"][k]
            if ps.finite(values):
                steps = [s for s, v in zip(m["steps"], values) if v is not None]  # a key logged at some steps
                ax.plot(steps, [v for v in values if v is not None], marker=".", clip_on=False)
                metric_axis(ax, k, values)
                pp.one_step_range(ax, steps)
            else:
                ps.no_data(ax, "no value logged at these steps")
        for j in range(len(keys), rows * cols):
            axes[j // cols][j % cols].axis("off")
        shown = (
            f"{len(keys)} of {len(m['series'])} keys, every one in stats.json" if len(keys) < len(m["series"]) else ""
        )
        ps.suptitle(fig, f"metrics.jsonl · {where}" + (f" ({shown})" if shown else ""))
        yield metrics_plot(label), fig


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
        mode = pp.reward_mode(stats, run_id)
        return mode["describe"] if mode else pp.NOT_RECORDED

    runs = []
    if len(stats["trends"]) >= 2:
        for run_id, t in stats["trends"].items():
            cols = {col: (t["steps"], t.get(col, [None] * len(t["steps"]))) for _, col, _, _ in OVERLAY_PANELS}
            held = {ds: (v["steps"], v["acc"]) for ds, v in stats.get("val_trends", {}).get(run_id, {}).items()}
            runs.append((pp.run_label(stats, run_id), cols, held, reward(run_id)))
    elif len(stats["metrics_trends"]) >= 2:
        for label, m in stats["metrics_trends"].items():

            def series(key: str, m: dict = m) -> tuple[list, list]:
                values = m["series"].get(key, [])
                return [s for s, v in zip(m["steps"], values) if v is not None], [v for v in values if v is not None]

            cols = {col: series(key) for _, col, key, _ in OVERLAY_PANELS}
            runs.append((_metrics_where(m, label), cols, {"eval/acc": series("eval/acc")}, reward(label)))
    drew = [r for r in runs if any(ps.finite(v for _, values in [*r[1].values(), *r[2].values()] for v in values))]
    return drew[: pp.MAX_GROUPS_PER_PLOT]


def runs_overlay(stats: dict[str, Any]) -> pp.Figures:
    """Two or more training runs on shared axes, one colour per run (labelled by its directory):
    refine rate, format, accuracy, refine reward, length, and the in-training evaluations."""
    runs = _overlay_runs(stats)
    if len(runs) < 2:
        return
    plt = ps.pyplot()
    fig, axes = plt.subplots(3, 2, figsize=(11, 10.5))
    panels = [ax for row in axes for ax in row]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax in panels:
        pp.step_axis(ax)
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
        pp.lines(
            ax,
            [],
            series,
            rate=kind == "rate",
            why="no value in these runs",
            axis=pp.reward_axis if kind == "reward" else None,
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
    if pp.lines(ax, [], series, rate=True, why="no in-training evaluation in these runs"):
        pp.legend(ax, fontsize=7)
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
