"""PNG plots for ``pasr stats`` (matplotlib, Agg backend), drawn from the ``stats.json`` dict:
the list of figures (:data:`FIGURES`), :func:`make_plots` saving them in order, and the montage
that tiles them (``--montage``). The figures are drawn by one module per family:

* :mod:`eval.stats.plots_overview`: the six overview figures, always drawn (refine usage, refines
  per response, accuracy with and without a refine, refine positions and lengths, refine outcomes);
* :mod:`eval.stats.plots_training`: one per training run, one per metrics file, and one with two or
  more training runs side by side (:data:`OVERLAY_PLOT`);
* :mod:`eval.stats.plots_rrr`: one per Reflect, Retry, Reward training run;
* :mod:`eval.stats.refine_term`: one per run that logged the refine term's reach;
* :mod:`eval.stats.plots_transitions`: one per compared pair of evaluations.

Each function yields ``(file name, figure)``. None may mislead: a figure (or panel) with nothing to
draw keeps its frame and says "no data" and what is missing in its middle, instead of an empty
chart; a legend lists only the series that drew something (no swatch for bars all 0 high: a note
names those), and is left out without one; rates and shares are on a fixed 0-100 % axis, other
values on an axis of a minimum span with the values printed (a flat line is drawn flat); a refine
reward is titled with the reward the run paid (its ``config.yaml``, ``stats["runs"]``), and runs
are named by their directory; titles are wrapped to the figure (:mod:`eval.stats.plot_style`; the
pieces the families share: :mod:`eval.stats.plot_parts`). The file names are made in
:mod:`eval.stats.plot_names` only (re-exported here: :data:`OVERVIEW_PLOTS`, :func:`trend_plot`,
:func:`metrics_plot`, :func:`transition_plot`, :func:`rrr_plot`, :data:`OVERLAY_PLOT`), so that
the report links exactly what was drawn. The per-group figures are PASR's (refines, format):
groups of Reflect, Retry, Reward records are left out of them and get their own figure
(:func:`rrr_trends`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eval.stats import plot_style as ps
from eval.stats.plot_names import (
    MONTAGE_PLOT,
    OVERLAY_PLOT,
    OVERVIEW_PLOTS,
    metrics_plot,
    rrr_plot,
    transition_plot,
    trend_plot,
)
from eval.stats.plot_parts import has_data as _has_data
from eval.stats.plots_overview import (
    COMPARED_OUTCOMES,
    OUTCOME_ORDER,
    accuracy_by_refine,
    overview_rates,
    refine_lengths,
    refine_outcomes,
    refine_positions,
    refines_per_response,
)
from eval.stats.plots_rrr import rrr_trends
from eval.stats.plots_training import metrics_series, runs_overlay, training_trends
from eval.stats.plots_transitions import transitions
from eval.stats.refine_term import refine_term_figures

# what other modules and the tests import from here (the names the figures and files had before
# the families were modules of their own)
__all__ = [
    "COMPARED_OUTCOMES",
    "FIGURES",
    "MONTAGE_PLOT",
    "OUTCOME_ORDER",
    "OVERLAY_PLOT",
    "OVERVIEW_PLOTS",
    "_has_data",
    "_plt",
    "accuracy_by_refine",
    "make_plots",
    "metrics_plot",
    "metrics_series",
    "montage",
    "montage_figure",
    "overview_rates",
    "refine_lengths",
    "refine_outcomes",
    "refine_positions",
    "refine_term_figures",
    "refines_per_response",
    "rrr_plot",
    "rrr_trends",
    "runs_overlay",
    "training_trends",
    "transition_plot",
    "transitions",
    "trend_plot",
]

_plt = ps.pyplot


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
