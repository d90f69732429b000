"""``pasr eval compare DIR...``: eval runs side by side, and accuracy against output tokens.

Reads each run directory's ``summary.json``; prints one table with a row per (model, method)
and, per dataset, accuracy and mean output tokens; writes a scatter plot with one panel per
dataset (x: mean output tokens, y: accuracy, a point per run). The paper's claim is a point
up and to the left of its baselines.

When a reflect-retry run is among them, each dataset also gets its first-attempt accuracy and
the share of samples it retried (``-`` for the other methods), so a Reflect, Retry, Reward
checkpoint's gain from the retry stands beside its first answer. Without one the table is as
it always was.

The method column names how a run chose its answer where it had a choice
(:func:`eval.summary.method_label`: ``self-refine (select best)``, ``best-of-n (8 candidates,
select majority)``), so runs of one method with different ``--select`` are told apart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eval.reflect_retry import METHOD as REFLECT_RETRY
from eval.best_of_n import METHOD as BEST_OF_N
from eval.stats import plot_style as ps
from eval.summary import SUMMARY_JSON, method_label


class CompareError(ValueError):
    """A run directory cannot be compared (one line)."""


def load_runs(dirs: list[str]) -> list[dict[str, Any]]:
    runs = []
    for d in dirs:
        path = Path(d) / SUMMARY_JSON if Path(d).is_dir() else Path(d)
        if not path.is_file():
            raise CompareError(f"{d}: no {SUMMARY_JSON} (is it a `pasr eval` run directory?)")
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
            summary["datasets"]  # noqa: B018 - required key
        except (ValueError, KeyError, TypeError):
            raise CompareError(f"{path}: not a pasr eval summary") from None
        summary["_dir"] = str(d)
        runs.append(summary)
    if not runs:
        raise CompareError("no run directories given")
    return runs


def run_label(run: dict[str, Any]) -> str:
    model = str(run.get("model", "?"))
    if "/" in model:
        model = model.rstrip("/").rsplit("/", 1)[-1]
    return f"{model} / {method_label(run)}"


def dataset_order(runs: list[dict[str, Any]]) -> list[str]:
    order: list[str] = []
    for run in runs:
        for ds in run["datasets"]:
            if ds not in order:
                order.append(ds)
    return order


def _cell(v: dict[str, Any] | None) -> tuple[str, str]:
    if not v or not v.get("n_samples"):
        return "-", "-"
    acc = "n/a" if v.get("accuracy") is None else f"{100 * v['accuracy']:.1f}"
    tok = "n/a" if v.get("mean_tokens") is None else f"{v['mean_tokens']:.0f}"
    if v.get("n_samples", 0) < v.get("expected_samples", 0) or v.get("errors"):
        acc += "*"
    return acc, tok


def _retry_cells(run: dict[str, Any], v: dict[str, Any] | None) -> tuple[str, str]:
    """First-attempt accuracy and retry rate (%) of a reflect-retry run's dataset; ``-`` otherwise."""
    if run.get("method") != REFLECT_RETRY or not v or not v.get("n_samples"):
        return "-", "-"
    return tuple("n/a" if v.get(k) is None else f"{100 * v[k]:.1f}" for k in ("first_attempt_accuracy", "retry_rate"))


def comparison_table(runs: list[dict[str, Any]]) -> str:
    """A Markdown table: one row per run, accuracy (%) and mean output tokens per dataset."""
    datasets = dataset_order(runs)
    retry = any(run.get("method") == REFLECT_RETRY for run in runs)
    whats = ("acc %", "tokens") + (("1st acc %", "retried %") if retry else ())
    head = ["model", "method"] + [f"{ds} {what}" for ds in datasets for what in whats]
    rows = []
    for run in runs:
        model = str(run.get("model", "?")).rstrip("/").rsplit("/", 1)[-1]
        cells = [model, method_label(run)]
        for ds in datasets:
            v = run["datasets"].get(ds)
            cells += list(_cell(v)) + (list(_retry_cells(run, v)) if retry else [])
        rows.append(cells)
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))) + " |"

    sep = "| " + " | ".join(("-" * w if i < 2 else "-" * (w - 1) + ":") for i, w in enumerate(widths)) + " |"
    out = [line(head), sep, *(line(r) for r in rows)]
    if any("*" in c for r in rows for c in r):
        out.append("")
        out.append("* unfinished run, or samples with generation/judge errors (see that run's summary.md)")
    return "\n".join(out)


def _token_axis(ax, xs: list[float]) -> None:
    """Room around the points on the tokens axis, never below 0 tokens, and never a range of
    nothing (one run, or runs of the same length)."""
    lo, hi = min(xs), max(xs)
    pad = 0.25 * (hi - lo) if hi - lo >= 1 else max(1.0, 0.25 * hi)
    ax.set_xlim(max(0.0, lo - pad), hi + pad)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def scatter_figure(runs: list[dict[str, Any]]):
    """The figure of :func:`scatter`, laid out, not saved. Accuracy is on a fixed 0-100 % axis;
    a dataset no run has both numbers for gets a "no data" panel."""
    plt = _pyplot()

    datasets = dataset_order(runs)
    fig, axes = plt.subplots(1, max(1, len(datasets)), figsize=(5 * max(1, len(datasets)), 4.2), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    markers = {"plain": "o", "pasr": "*", "self-refine": "s", REFLECT_RETRY: "^", BEST_OF_N: "P"}
    labels_seen = set()
    for ax in axes[0]:
        ax.set_xlabel("mean output tokens per sample")
        ax.set_ylabel("accuracy (%)")
        ps.rate_axis(ax)
    if not datasets:
        ps.title(axes[0][0], "no dataset")
        ps.no_data(axes[0][0], "no dataset in these runs' summary.json", rate=True)
    for ax, ds in zip(axes[0], datasets):
        ps.title(ax, ds)
        xs = []
        for i, run in enumerate(runs):
            v = run["datasets"].get(ds)
            if not v or v.get("accuracy") is None or v.get("mean_tokens") is None:
                continue
            label = run_label(run)
            ax.scatter(
                v["mean_tokens"], 100 * v["accuracy"], s=90, color=colors[i % len(colors)],
                marker=markers.get(run.get("method"), "D"), label=None if label in labels_seen else label,
                edgecolors="black", linewidths=0.5, zorder=3, clip_on=False,
            )  # fmt: skip
            labels_seen.add(label)
            ax.annotate(label, (v["mean_tokens"], 100 * v["accuracy"]), textcoords="offset points",
                        xytext=(6, 4 if v["accuracy"] < 0.9 else -10), fontsize=7)  # below a point at the top
            xs.append(v["mean_tokens"])
        if xs:
            _token_axis(ax, xs)
            ax.grid(True, alpha=0.3)
        else:
            ps.no_data(ax, f"no run has an accuracy and a mean token count for {ds}", rate=True)
    ps.suptitle(fig, "pasr eval: accuracy vs output tokens (up and left is better)")
    handles, labels = [], []
    for ax in axes[0]:
        h, lab = ax.get_legend_handles_labels()
        for hh, ll in zip(h, lab):
            if ll not in labels:
                handles.append(hh)
                labels.append(ll)
    bottom = 0.0
    if handles:
        # as many columns (at most 4) as fit the figure's width (ten runs in four columns ran off
        # both edges of a one-panel figure), and the figure made taller by the legend's height,
        # so a long legend does not squeeze the panels
        renderer = fig.canvas.get_renderer()
        for ncol in range(min(4, len(labels)), 0, -1):
            legend = fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
            if ncol == 1 or legend.get_window_extent(renderer).width <= fig.bbox.width:
                break
            legend.remove()
        width, height = fig.get_size_inches()
        legend_in = legend.get_window_extent(renderer).height / fig.dpi
        fig.set_size_inches(width, height + legend_in)
        bottom = legend_in / (height + legend_in) + 0.01
    fig.tight_layout(rect=(0, bottom, 1, 1))
    return fig


def scatter(runs: list[dict[str, Any]], out_png: str | Path) -> Path:
    """Accuracy vs mean output tokens, one panel per dataset, one point per run."""
    fig = scatter_figure(runs)
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    _pyplot().close(fig)
    return out
