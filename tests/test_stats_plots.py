"""`pasr stats` plots that cannot mislead (issue 53), asserted on the matplotlib objects: a flat
metric on an axis of a minimum span with its value printed, titles with the run's own refine
reward, no legend swatch for bars of height 0, a refine-reward panel, two training runs overlaid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.stats import plots
from pasr_cli import main
from tests.stats_records import P_RIGHT, P_WRONG, T1, T2, T3, rec, write

EMPTY = {"groups": {}, "trends": {}, "val_trends": {}, "metrics_trends": {}, "transitions": [], "rrr": {}, "runs": {}}


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plots._plt().close("all")


def _metric_axes(series: dict[str, list]) -> dict:
    steps = list(range(1, 1 + len(next(iter(series.values())))))
    stats = dict(EMPTY, metrics_trends={"r": {"file": "r/metrics.jsonl", "steps": steps, "series": series}})
    [(_, fig)] = list(plots.metrics_series(stats))
    return {ax.get_title(): ax for ax in fig.axes if ax.get_title()}


def _notes(ax) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_flat_metrics_are_drawn_flat_with_their_value():
    """A flat 0.25 was drawn on a 0.24-0.26 axis (auto-scaled), reading as a swing."""
    axes = _metric_axes(
        {
            "pasr/acc_refine": [0.25, 0.25, 0.25],
            "pasr/refine_rate": [0.25, 0.26, 0.24],
            "pasr/response_length/mean": [40.0, 40.2, 40.1],
            "pasr/reward_mean": [-0.5, -0.5, -0.5],
            "pasr/refine_tags_per_response": [1.4, 1.5, 1.45],  # not a rate: no [0, 1] axis
        }
    )
    lo, hi = axes["pasr/acc_refine"].get_ylim()
    assert hi - lo == pytest.approx(0.1) and lo < 0.25 < hi and 0 <= lo and hi <= 1
    assert _notes(axes["pasr/acc_refine"]) == ["0.25 at every step"]
    lo, hi = axes["pasr/refine_rate"].get_ylim()
    assert hi - lo == pytest.approx(0.1) and lo == pytest.approx(0.2)  # 0.24-0.26 centred
    assert _notes(axes["pasr/refine_rate"]) == ["last 0.24 (min 0.24, max 0.26)"]
    lo, hi = axes["pasr/response_length/mean"].get_ylim()
    assert hi - lo == pytest.approx(0.2 * 40.2) and lo < 40 and hi > 40.2
    lo, hi = axes["pasr/reward_mean"].get_ylim()
    assert hi - lo == pytest.approx(0.1) and lo < -0.5 < hi  # negative values keep their sign
    lo, hi = axes["pasr/refine_tags_per_response"].get_ylim()
    assert hi - lo == pytest.approx(0.3) and hi > 1


def test_rates_near_the_edge_stay_inside_zero_to_one():
    axes = _metric_axes({"pasr/format_pass_rate": [1.0, 0.99, 1.0], "pasr/refine_fix_rate": [0.0, 0.01, 0.0]})
    assert axes["pasr/format_pass_rate"].get_ylim() == pytest.approx((0.9, 1.0))
    assert axes["pasr/refine_fix_rate"].get_ylim() == pytest.approx((0.0, 0.1))


def _training_run(root: Path, name: str, config: str, rewards: tuple[float, float]) -> Path:
    """A local training run: config.yaml, and two steps of refine and plain rollouts whose judged
    refine rollouts carry the given refine rewards (step 1: ``rewards[0]``, step 2: ``rewards[1]``)."""
    run = root / name
    steps = []
    for step, reward in enumerate(rewards, 1):
        steps.append(
            [
                rec(
                    name,
                    "q1",
                    "refine",
                    T1,
                    "40",
                    1.0,
                    step=step,
                    refine_reward=reward,
                    refine_outcome="better",
                    total_reward=2.0 + reward,
                ),
                rec(
                    name,
                    "q1",
                    "refine",
                    T3,
                    "40",
                    0.0,
                    step=step,
                    refine_reward=0.0,
                    refine_outcome="none",
                    total_reward=1.0,
                ),
                rec(
                    name,
                    "q1",
                    "refine",
                    T2,
                    "40",
                    1.0,
                    step=step,
                    refine_reward=-0.5 if "sign" in config else 0.0,
                    refine_outcome="tie",
                    total_reward=1.5,
                ),
                rec(name, "q1", "plain", P_RIGHT, "40", 1.0, step=step),
                rec(name, "q1", "plain", P_WRONG, "40", 0.0, step=step, sample_index=1),
            ]
        )
        write(run / "rollouts" / f"step_{step:06d}.jsonl", steps[-1])
    write(run / "eval" / "final.jsonl", [rec(name, "h1", "refine", T1, "40", 1.0, step=2, dataset="final")])
    (run / "config.yaml").write_text(config)
    return run


MARGIN = "method: pasr\npasr:\n  refine_compare: margin\n  tie_value: 0.0\n  empty_refine_value: 0.0\n"
SIGN = "method: pasr\npasr:\n  refine_compare: sign\n  tie_value: -0.5\n  empty_refine_value: null\n"


def _stats(tmp_path: Path, *runs: Path) -> dict:
    out = tmp_path / "report"
    assert main(["stats", *map(str, runs), "--out", str(out), "--no-plots"]) == 0
    return json.loads((out / "stats.json").read_text())


def test_refine_outcomes_title_is_the_runs_own_reward(tmp_path):
    """Under `margin` the title said "better +1, worse -1" (the paper's sign reward)."""
    s = _stats(tmp_path, _training_run(tmp_path, "m", MARGIN, (0.5, 0.25)))
    assert s["runs"]["m"]["reward"]["refine_compare"] == "margin"
    [(_, fig)] = list(plots.refine_outcomes(s))
    ax = fig.axes[0]
    title = ax.get_title().replace("\n", " ")
    assert "margin: better/worse acc - plain mean, tie 0, empty refine 0" in title and "+1" not in title
    assert [t.get_text() for t in ax.get_xticklabels()] == ["better\n(+diff)", "tie\n(0)", "none\n(0)"]
    assert "vs. the mean plain accuracy of the query" in ax.get_xlabel()

    s = _stats(tmp_path, _training_run(tmp_path, "s", SIGN, (1.0, 1.0)))
    title = next(plots.refine_outcomes(s))[1].axes[0].get_title().replace("\n", " ")
    assert "sign: better +1, worse -1, tie -0.5, no refine 0" in title


def test_refine_outcomes_of_two_rewards_name_each_in_the_legend(tmp_path):
    s = _stats(
        tmp_path, _training_run(tmp_path, "m", MARGIN, (0.5, 0.25)), _training_run(tmp_path, "s", SIGN, (1.0, 1.0))
    )
    ax = next(plots.refine_outcomes(s))[1].axes[0]
    assert "each run's reward in the legend" in ax.get_title()
    labels = [t.get_text().replace("\n", " ") for t in ax.get_legend().get_texts()]
    assert labels == [
        "m · train · refine · margin: better/worse acc - plain mean, tie 0, empty refine 0, no refine 0",
        "s · train · refine · sign: better +1, worse -1, tie -0.5, no refine 0",
    ]


def test_refine_outcomes_without_a_config_say_the_reward_is_not_recorded(tmp_path):
    run = _training_run(tmp_path, "m", MARGIN, (0.5, 0.25))
    (run / "config.yaml").unlink()
    title = next(plots.refine_outcomes(_stats(tmp_path, run)))[1].axes[0].get_title().replace("\n", " ")
    assert "reward not recorded" in title and "+1" not in title


def test_evaluations_without_a_baseline_are_not_refine_outcomes(tmp_path):
    """An in-training evaluation has no plain answers: its refines are all `no_baseline`, no reward."""
    run = _training_run(tmp_path, "m", MARGIN, (0.5, 0.25))
    write(
        run / "eval" / "warmup.jsonl",
        [rec("m", "h1", "refine", T1, "40", 1.0, step=1, dataset="warmup", refine_outcome="no_baseline")],
    )
    ax = next(plots.refine_outcomes(_stats(tmp_path, run)))[1].axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["m · train · refine"]


def test_no_legend_entry_for_bars_of_height_zero(tmp_path):
    """Every refine here is right: the refine-break rate is 0 % in every group, no bar to match a swatch to."""
    s = _stats(tmp_path, _training_run(tmp_path, "m", MARGIN, (0.5, 0.25)))
    ax = next(plots.overview_rates(s))[1].axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "refine-break rate" not in labels and "refine rate" in labels
    notes = [t.replace("\n", " ") for t in _notes(ax)]
    assert any("refine-break rate" in t and "0 wherever measured" in t for t in notes), notes
    heights = {c.get_label(): [p.get_height() for p in c.patches] for c in ax.containers}
    assert all(h in (0.0,) or h != h for h in heights["refine-break rate"])  # drawn as 0 (or n/a), not dropped


def test_refine_reward_panel(tmp_path):
    s = _stats(tmp_path, _training_run(tmp_path, "m", MARGIN, (0.5, 0.25)))
    assert s["trends"]["m"]["refine_reward"] == pytest.approx([0.5 / 3, 0.25 / 3])
    [(_, fig)] = list(plots.training_trends(s))
    assert fig._suptitle.get_text() == f"Training trends · {tmp_path / 'm'}"  # the run directory
    [ax] = [a for a in fig.axes if a.get_title().startswith("Refine reward")]
    assert "margin" in ax.get_title().replace("\n", " ")
    assert list(ax.lines[0].get_ydata()) == pytest.approx([0.5 / 3, 0.25 / 3])
    lo, hi = ax.get_ylim()
    assert lo <= -1 and hi >= 1  # a small reward is small on the axis of its whole range
    assert _notes(ax) == ["last 0.0833 (min 0.0833, max 0.167)"]


def test_two_training_runs_overlaid_by_directory(tmp_path):
    m = _training_run(tmp_path, "m", MARGIN, (0.5, 0.25))
    sgn = _training_run(tmp_path, "s", SIGN, (1.0, 1.0))
    s = _stats(tmp_path, m, sgn)
    [(name, fig)] = list(plots.runs_overlay(s))
    assert name == plots.OVERLAY_PLOT
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        f"{m} · refine reward margin: better/worse acc - plain mean, tie 0, empty refine 0, no refine 0",
        f"{sgn} · refine reward sign: better +1, worse -1, tie -0.5, no refine 0",
    ]
    panels = {ax.get_title().replace("\n", " "): ax for ax in fig.axes}
    reward = panels["Refine reward (mean of judged refine rollouts)"]
    assert [line.get_label() for line in reward.lines if not line.get_label().startswith("_")] == [str(m), str(sgn)]
    assert [list(line.get_ydata()) for line in reward.lines[:2]] == [
        pytest.approx([0.5 / 3, 0.25 / 3]),
        pytest.approx([(1 - 0.5) / 3] * 2),
    ]
    assert reward.get_ylim()[0] <= -1 and reward.get_ylim()[1] >= 1  # one axis for both
    assert panels["Refine rate (refine rollouts)"].get_ylim() == (0, 100)
    held = panels["In-training evaluations: accuracy (refine prompt)"]
    assert [t.get_text() for t in held.get_legend().get_texts()] == [f"{m}: final", f"{sgn}: final"]
    assert next(plots.runs_overlay(dict(s, trends={"m": s["trends"]["m"]})), None) is None  # one run: none


def test_overlay_in_the_report_and_every_plot_in_the_montage(tmp_path, capsys):
    m, sgn = _training_run(tmp_path, "m", MARGIN, (0.5, 0.25)), _training_run(tmp_path, "s", SIGN, (1.0, 1.0))
    out = tmp_path / "o"
    assert main(["stats", str(m), str(sgn), "--out", str(out), "--montage"]) == 0
    s = json.loads((out / "stats.json").read_text())
    assert plots.OVERLAY_PLOT in s["plots"] and (out / plots.OVERLAY_PLOT).read_bytes()[:4] == b"\x89PNG"
    assert f"]({plots.OVERLAY_PLOT})" in (out / "report.md").read_text()
    fig = plots.montage_figure(out, s["plots"])
    assert [ax.get_title() for ax in fig.axes] == s["plots"] and all(ax.images for ax in fig.axes)
    data = (out / plots.MONTAGE_PLOT).read_bytes()
    assert data[:4] == b"\x89PNG" and len(data) < 400_000 and str(out / plots.MONTAGE_PLOT) in capsys.readouterr().out
    assert main(["stats", str(m), "--out", str(out), "--montage", "--no-plots"]) == 2
    assert capsys.readouterr().err.strip() == "pasr stats: error: --montage tiles the plots: drop --no-plots"
