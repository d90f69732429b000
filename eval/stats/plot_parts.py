"""The pieces ``pasr stats``' figure families share (:mod:`eval.stats.plots_overview`,
:mod:`eval.stats.plots_training`, :mod:`eval.stats.plots_rrr`, :mod:`eval.stats.plots_transitions`):
a legend of the series that drew something, lines over training steps with their y axis (a rate on
0-100 %, a refine reward on [-1, 1], any other value on an axis of a minimum span), the training
step axis, and a run by its directory and the refine reward it paid (``stats["runs"]``). Here once,
so that every family draws them alike; the axes themselves (wrapped titles, "no data" frames, the
span and rate axes) are :mod:`eval.stats.plot_style`, shared with ``pasr eval compare``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from eval.stats import plot_style as ps

MAX_GROUPS_PER_PLOT = 8  # groups (overview figures) or runs (side by side) in one figure, at most
MIN_REL_SPAN = 0.2
REWARD_AXIS = (-1.0, 1.0)  # the refine reward of every compare mode (sign, margin; a run's old draft) is in [-1, 1]

Figures = Iterator[tuple[str, Any]]  # (file name, matplotlib figure)


def integer_ticks():
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def pct(v: float | None) -> float:
    return float("nan") if v is None else 100.0 * v


def _num(v: float | None) -> float:
    return float("nan") if v is None else v


def has_data(artist) -> bool:
    """Whether a legend handle drew anything: a line or points with a finite value, a bar series
    with a bar of finite, non-zero height (bars all 0 high draw nothing to match a swatch to)."""
    if hasattr(artist, "get_ydata"):
        return bool(ps.finite(artist.get_ydata()))
    if hasattr(artist, "patches"):
        return any(h != 0 for h in ps.finite(p.get_height() for p in artist.patches))
    if hasattr(artist, "get_offsets"):
        return bool(ps.finite(v for xy in artist.get_offsets() for v in xy))
    return True


def legend(ax, *, outside: bool = False, **kw: Any) -> None:
    """A legend of the series that have data; none at all without one. ``outside``: right of
    the axes (bars on a fixed 0-100 % axis reach its top). Bar series that are 0 wherever they
    have a value are named under the legend ("0 % wherever measured: ..."), not given a swatch."""
    handles = list(zip(*ax.get_legend_handles_labels()))
    pairs = [(h, lab) for h, lab in handles if has_data(h)]
    zero = [
        lab
        for h, lab in handles
        if hasattr(h, "patches") and not has_data(h) and ps.finite(p.get_height() for p in h.patches)
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


def labels(ax, xlabel: str, ylabel: str, title: str) -> None:
    """Both axis labels and the title (wrapped to the axes)."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ps.title(ax, title)


def reward_mode(stats: dict[str, Any], run_id: str) -> dict[str, Any] | None:
    """The refine reward a training run paid (``stats["runs"]``, from its config.yaml), or None."""
    return (stats.get("runs", {}).get(run_id) or {}).get("reward")


def run_label(stats: dict[str, Any], run_id: str) -> str:
    """A run by its directory (``stats["runs"]``), else by its run id."""
    return (stats.get("runs", {}).get(run_id) or {}).get("label") or run_id


NOT_RECORDED = "reward not recorded (no config.yaml beside the rollouts)"


def value_axis(ax, values: Iterable[float | None]) -> None:
    """Any other value: at least :data:`MIN_REL_SPAN` of its largest magnitude (1 when it is 0),
    never below 0 for values that are all >= 0 (counts, lengths)."""
    vals = ps.finite(values)
    if not vals:
        return
    top = max(abs(v) for v in vals)
    ps.span_axis(ax, vals, MIN_REL_SPAN * top if top else 1.0, lo=0.0 if min(vals) >= 0 else None)


def lines(
    ax,
    steps: list[int],
    series: list[tuple[str | None, list[float | None], dict[str, Any]]],
    *,
    rate: bool,
    why: str,
    axis=None,
) -> bool:
    """Lines over the training steps (rates in %); "no data" (``why``) and False when no line has a
    value. ``axis(ax, values)`` sets the y axis of values that are no rate (default: :func:`value_axis`)."""
    if not ps.finite(v for _, values, _ in series for v in values):
        ps.no_data(ax, why, rate=rate)
        return False
    xs = []
    for label, values, style in series:
        style = dict(style)
        x = style.pop("steps", steps)
        xs += x
        ys = [pct(v) if rate else _num(v) for v in values]
        # not clipped: a marker on the 0 or 100 % edge of the fixed axis is drawn whole
        ax.plot(x, ys, **{"marker": ".", "label": label, "clip_on": False, **style})
    one_step_range(ax, xs)
    if rate:
        ps.rate_axis(ax)
    else:
        (axis or value_axis)(ax, [v for _, values, _ in series for v in values])
    return True


def one_step_range(ax, steps: list[int]) -> None:
    """A single training step: one step either side of it (else the axis is a fraction of a step wide)."""
    if steps and min(steps) == max(steps):
        ax.set_xlim(steps[0] - 1, steps[0] + 1)


def reward_axis(ax, values: Iterable[float | None]) -> None:
    """A refine reward: the whole [-1, 1] it can take (wider if a tie or empty value is), with 0 marked."""
    vals = ps.finite(values)
    lo, hi = min([REWARD_AXIS[0], *vals]), max([REWARD_AXIS[1], *vals])
    ax.set_ylim(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
    ax.axhline(0.0, color="0.6", linewidth=0.8, zorder=0)


def step_axis(ax) -> None:
    ax.set_xlabel("training step")
    ax.xaxis.set_major_locator(integer_ticks())
    ax.grid(alpha=0.3)
