"""Readable matplotlib axes for the PNG plots of ``pasr stats`` and ``pasr eval compare``.

Text wrapped to a measured width (titles that fit their figure), the "no data" frame of a plot
with nothing to draw, the fixed 0-100 % axis of rates, an axis with a minimum span (a flat line
drawn flat) and the value printed on a panel. Matplotlib is imported by the caller's plotting
code first (Agg backend); these helpers only use it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

NO_DATA = "no data"
NO_DATA_FONTSIZE = 10


def text_width_pt(text: str, fontsize: float) -> float:
    """Width of one line of ``text`` in points, in the default font at ``fontsize``."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import text_to_path

    return text_to_path.get_text_width_height_descent(text, FontProperties(size=fontsize), ismath=False)[0]


def fontsize(rc_name: str) -> float:
    """An rcParams font size (``"axes.titlesize"``: ``"large"``, ...) in points."""
    import matplotlib
    from matplotlib.font_manager import FontProperties

    return FontProperties(size=matplotlib.rcParams[rc_name]).get_size_in_points()


def wrap(text: str, width_in: float, size: float) -> str:
    """``text`` in lines no wider than ``width_in`` inches at ``size`` points, measured: broken
    at spaces, and a word too long for a line of its own in pieces."""
    limit = max(width_in, 0.5) * 72 * 0.95  # the measure is a little short of the drawn width

    def fits(s: str) -> bool:
        return text_width_pt(s, size) <= limit

    lines: list[str] = []
    for paragraph in text.split("\n"):
        line = ""
        for word in paragraph.split(" "):
            candidate = f"{line} {word}" if line else word
            if fits(candidate):
                line = candidate
                continue
            if line:
                lines.append(line)
            line = word
            while len(line) > 1 and not fits(line):
                cut = len(line) - 1
                while cut > 1 and not fits(line[:cut]):
                    cut -= 1
                lines.append(line[:cut])
                line = line[cut:]
        lines.append(line)
    return "\n".join(lines)


def axes_width_in(ax) -> float:
    """The axes' width in inches (its current position: before a tight layout, the default one)."""
    return ax.get_position().width * ax.figure.get_figwidth()


def title(ax, text: str, **kw: Any) -> None:
    """An axes title wrapped to the axes' width."""
    ax.set_title(wrap(text, axes_width_in(ax), kw.get("fontsize") or fontsize("axes.titlesize")), **kw)


def suptitle(fig, text: str) -> None:
    """A figure title wrapped to the figure's width."""
    fig.suptitle(wrap(text, 0.92 * fig.get_figwidth(), fontsize("figure.titlesize")))


def finite(values: Iterable[float | None]) -> list[float]:
    """The values that are numbers (not None, not NaN or infinite)."""
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def rate_axis(ax, top: float = 100) -> None:
    """Rates and shares: always 0 to ``top`` (100 for %), never a negative or a >100 % tick."""
    ax.set_ylim(0, top)
    ax.set_yticks([top * i / 5 for i in range(6)])


def no_data(ax, why: str, *, rate: bool = False, keep_xticks: bool = False) -> None:
    """The axes frame with a centred "no data" and ``why`` (what is missing) instead of a chart.
    A rate axis keeps its 0-100 % scale; any other axis loses its ticks. No legend, no grid."""
    ax.text(
        0.5,
        0.5,
        f"{NO_DATA}\n{wrap(why, 0.85 * axes_width_in(ax), NO_DATA_FONTSIZE)}",
        transform=ax.transAxes,
        ha="center",
        va="center",
        fontsize=NO_DATA_FONTSIZE,
        color="0.3",
        linespacing=1.5,
    )
    if not keep_xticks:
        ax.set_xlim(0, 1)
        ax.tick_params(axis="x", which="both", bottom=False, labelbottom=False)
    if rate:
        rate_axis(ax)
    else:
        ax.set_ylim(0, 1)
        ax.tick_params(axis="y", which="both", left=False, labelleft=False)
    ax.grid(False)
    if ax.get_legend() is not None:
        ax.get_legend().remove()


def span_axis(
    ax, values: Iterable[float | None], min_span: float, lo: float | None = None, hi: float | None = None
) -> None:
    """A y axis at least ``min_span`` wide around ``values``, inside [``lo``, ``hi``]. Auto-scaling
    stretches any range to the axes' height, so a flat 0.25 on a 0.24-0.26 axis reads as a swing;
    here a range narrower than ``min_span`` sits in the middle of an axis ``min_span`` wide."""
    vals = finite(values)
    if not vals:
        return
    a, b = min(vals), max(vals)
    y0, y1 = ax.get_ylim()
    if b - a < min_span:
        y0, y1 = (a + b - min_span) / 2, (a + b + min_span) / 2
        if lo is not None and y0 < lo:
            y0, y1 = lo, lo + min_span
        if hi is not None and y1 > hi:
            y0, y1 = hi - min_span, hi
    if lo is not None:
        y0 = max(y0, lo)
    if hi is not None:
        y1 = min(y1, hi)
    ax.set_ylim(y0, y1)


def value_words(values: Iterable[float | None]) -> str:
    """The numbers behind a line: ``0.25 at every step``, or its last value and its range."""
    vals = finite(values)
    if not vals:
        return ""
    if len(vals) == 1:
        return f"{vals[0]:.3g}"
    if min(vals) == max(vals):
        return f"{vals[0]:.3g} at every step"
    return f"last {vals[-1]:.3g} (min {min(vals):.3g}, max {max(vals):.3g})"


def value_note(ax, text: str) -> None:
    """``text`` (the values of the panel's lines) on a light box in the corner of the axes that
    the lines drawn so far cross least (call it once the limits are set)."""
    if not text:
        return
    corners = (
        (0.02, 0.97, "left", "top"),
        (0.98, 0.97, "right", "top"),
        (0.02, 0.03, "left", "bottom"),
        (0.98, 0.03, "right", "bottom"),
    )
    points = []  # the lines in axes fractions, 20 points per segment (a segment crosses a corner too)
    for line in ax.lines:
        xy = [(x, y) for x, y in zip(line.get_xdata(), line.get_ydata()) if math.isfinite(x) and math.isfinite(y)]
        xy = [tuple(p) for p in ax.transLimits.transform(xy)] if xy else []
        points += xy[:1] + [
            (x0 + (x1 - x0) * k / 20, y0 + (y1 - y0) * k / 20)
            for (x0, y0), (x1, y1) in zip(xy, xy[1:])
            for k in range(1, 21)
        ]

    def crossings(corner: tuple) -> int:
        x, y, ha, va = corner
        return sum(
            (px <= 0.6 if ha == "left" else px >= 0.4) and (py >= 0.8 if va == "top" else py <= 0.2)
            for px, py in points
        )

    x, y, ha, va = min(corners, key=crossings)  # the first of equals: top left
    ax.text(
        x,
        y,
        text,
        transform=ax.transAxes,
        ha=ha,
        va=va,
        fontsize=7,
        color="0.15",
        bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "0.8", "alpha": 0.85},
    )


def pyplot():
    """matplotlib's pyplot on the Agg backend (files only, no display)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def safe_name(text: str) -> str:
    """``text`` as part of a file name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80] or "run"
