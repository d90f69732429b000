"""The file names of ``pasr stats``' PNG plots, made here only: the figure families
(:mod:`eval.stats.plots_overview`, :mod:`eval.stats.plots_training`, :mod:`eval.stats.plots_rrr`,
:mod:`eval.stats.plots_transitions`) save under them and the report (:mod:`eval.stats.report`)
links them, so that the report links exactly what was drawn. A module of its own, below both, so
that the report does not import the plotting code and the families do not import
:mod:`eval.stats.plots`, which imports them. (The refine term's plot is named in
:mod:`eval.stats.refine_term`, beside its figure.)
"""

from __future__ import annotations

from eval.stats.plot_style import safe_name

OVERVIEW_PLOTS = (
    "overview_rates.png",
    "refines_per_response.png",
    "accuracy_by_refine.png",
    "refine_positions.png",
    "refine_lengths.png",
    "refine_outcomes.png",
)
OVERLAY_PLOT = "runs_overlay.png"
MONTAGE_PLOT = "montage.png"


def trend_plot(run_id: str) -> str:
    return f"trend_{safe_name(run_id)}.png"


def metrics_plot(label: str) -> str:
    return f"metrics_{safe_name(label)}.png"


def rrr_plot(run_id: str) -> str:
    return f"rrr_{safe_name(run_id)}.png"


def transition_plot(i: int) -> str:
    """File name of the ``i``-th transition matrix (1-based, the order of ``stats["transitions"]``)."""
    return f"transition_{i}.png"
