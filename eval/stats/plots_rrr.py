"""``pasr stats``' figure of a Reflect, Retry, Reward training run (:func:`rrr_trends`): per step,
first-attempt and retry accuracy and the share of failed queries recovered, with the run's
in-training evaluations as points. RRR groups are left out of the overview figures
(:mod:`eval.stats.plots_overview`): they have no refine spans or format to show, these are their
numbers (:mod:`eval.stats.rrr`). How no figure may mislead: :mod:`eval.stats.plots`.
"""

from __future__ import annotations

from typing import Any

from eval.stats import plot_parts as pp
from eval.stats import plot_style as ps
from eval.stats.plot_names import rrr_plot


def rrr_trends(stats: dict[str, Any]) -> pp.Figures:
    """One figure per Reflect, Retry, Reward training run: first-attempt and retry accuracy
    (and the recovered rate) per step, with the run's in-training evaluations as points."""
    r = stats.get("rrr") or {}
    evals = r.get("evals", {})
    for run_id, t in r.get("train", {}).items():
        fig, ax = ps.pyplot().subplots(figsize=(8, 4.5))
        pp.labels(ax, "training step", "rate (%)", f"Reflect, Retry, Reward · {run_id}")
        ax.xaxis.set_major_locator(pp.integer_ticks())
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
        if pp.lines(ax, t["steps"], series, rate=True, why="no scored Reflect, Retry, Reward rollout at these steps"):
            pp.legend(ax, fontsize=7)
        yield rrr_plot(run_id), fig
