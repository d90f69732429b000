"""``pasr stats``' figure of a compared pair of evaluations (:func:`transitions`): the 2x2
right/wrong BEFORE x AFTER matrix of the paired samples as a heatmap with its counts, titled with
the accuracy before and after and the net gain. Which two are compared, in which order, and the
counts themselves are :mod:`eval.stats.pairing`'s. How no figure may mislead: :mod:`eval.stats.plots`.
"""

from __future__ import annotations

from typing import Any

from eval.stats import plot_parts as pp
from eval.stats import plot_style as ps
from eval.stats.plot_names import transition_plot


def transitions(stats: dict[str, Any]) -> pp.Figures:
    """One right/wrong before x after heatmap per compared pair of eval runs."""
    for i, tr in enumerate(stats["transitions"], 1):
        c = tr["counts"]
        grid = [[c["right->right"], c["right->wrong"]], [c["wrong->right"], c["wrong->wrong"]]]
        fig, ax = ps.pyplot().subplots(figsize=(5.5, 4.8))
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
        cb.ax.yaxis.set_major_locator(pp.integer_ticks())
        yield transition_plot(i), fig
