"""Plots of `pasr stats` and `pasr eval compare` on empty and degenerate input: a "no data" frame
that says what is missing instead of an empty chart, no legend without entries, rate axes on
0-100 %, titles inside the figure; and the same functions on normal data still drawing it.

The stats dicts come from `pasr stats --no-plots` on the hand-built records of tests/stats_records.py,
or are cut down by hand where a run's series are all missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.compare import run_label, scatter, scatter_figure
from eval.stats import plots
from eval.stats.plot_style import NO_DATA, wrap
from pasr_cli import main
from tests.stats_records import P_RIGHT, P_WRONG, T7, rec, write

PNG = b"\x89PNG\r\n\x1a\n"
OVERVIEW = (
    plots.overview_rates,
    plots.refines_per_response,
    plots.accuracy_by_refine,
    plots.refine_positions,
    plots.refine_lengths,
    plots.refine_outcomes,
)
EMPTY = {"groups": {}, "trends": {}, "val_trends": {}, "metrics_trends": {}, "transitions": [], "rrr": {}}


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plots._plt().close("all")


def stats_of(tmp_path: Path, name: str, records: list) -> dict:
    write(tmp_path / name / "samples.jsonl", records)
    assert main(["stats", str(tmp_path / name), "--out", str(tmp_path / f"{name}_out"), "--no-plots"]) == 0
    return json.loads((tmp_path / f"{name}_out" / "stats.json").read_text())


@pytest.fixture(scope="module")
def normal(dumps, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("normal")
    args = [
        "stats",
        str(dumps / "runA"),
        str(dumps / "a_pasr"),
        str(dumps / "b_plain"),
        "--out",
        str(out),
        "--no-plots",
    ]
    assert main(args) == 0
    return json.loads((out / "stats.json").read_text())


def one(draw, stats: dict):
    [(name, fig)] = list(draw(stats))
    return name, fig


def no_data_text(ax) -> str | None:
    """The axes' "no data" text (its reason included), or None."""
    return next((t.get_text() for t in ax.texts if t.get_text().startswith(NO_DATA)), None)


def drawn(ax) -> bool:
    """Whether the axes drew data: lines, bars, points or an image with a finite value."""
    return any(plots._has_data(a) for a in [*ax.lines, *ax.containers, *ax.collections]) or bool(ax.images)


def assert_no_data(ax, *words: str, rate: bool = True) -> str:
    text = no_data_text(ax)
    assert text is not None, [t.get_text() for t in ax.texts]
    for w in words:
        assert w in text, text
    assert ax.get_legend() is None and not drawn(ax)
    lo, hi = ax.get_ylim()
    assert (lo, hi) == ((0, 100) if rate else (0, 1))
    return text


def assert_rate_axis(ax) -> None:
    assert ax.get_ylim() == (0, 100)
    assert all(0 <= t <= 100 for t in ax.get_yticks())


def assert_fits(fig) -> None:
    """Every title, label and text lies inside the figure once laid out (as make_plots does)."""
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    fig.canvas.draw()
    box = fig.bbox
    texts = [fig._suptitle] if fig._suptitle else []
    for ax in fig.axes:
        texts += [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
    for t in texts:
        if not t.get_text() or not t.get_visible():
            continue
        e = t.get_window_extent()
        assert e.x0 >= -1 and e.x1 <= box.width + 1 and e.y0 >= -1 and e.y1 <= box.height + 1, t.get_text()


def assert_saved(stats: dict, tmp_path: Path, expected: set[str]) -> None:
    written = plots.make_plots(stats, tmp_path)
    assert set(written) == expected
    for name in written:
        assert (tmp_path / name).read_bytes()[:8] == PNG


# ----------------------------------------------------------------------------- per-group figures


@pytest.mark.parametrize("draw", OVERVIEW, ids=lambda d: d.__name__)
def test_overview_figures_without_groups_say_no_data(draw):
    name, fig = one(draw, EMPTY)
    [ax] = fig.axes
    assert_no_data(ax, "no PASR rollouts")
    assert ax.get_title()
    assert_fits(fig)


def test_without_groups_the_overview_figures_are_still_written(tmp_path):
    assert_saved(EMPTY, tmp_path, set(plots.OVERVIEW_PLOTS))


def test_rrr_groups_only_say_why(tmp_path):
    stats = dict(EMPTY, groups={"train/r/rrr": {"rrr": True, "n_responses": 3, "label": "r"}})
    _, fig = one(plots.refine_positions, stats)
    assert_no_data(fig.axes[0], "Reflect, Retry, Reward")


def test_plain_responses_only(tmp_path):
    """No refine span, no well-formed response: every PASR rate 0 %; the spans' figures say so."""
    stats = stats_of(
        tmp_path,
        "plain",
        [
            rec("evS", "q1", "plain", P_RIGHT, "40", 1.0, dataset="gsm8k"),
            rec("evS", "q2", "plain", P_WRONG, "40", 0.0, dataset="gsm8k"),
        ],
    )
    _, fig = one(plots.overview_rates, stats)
    ax = fig.axes[0]
    assert_no_data(ax, "every rate is 0 %", "no refine spans")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["evS · eval gsm8k · plain"]  # which groups are empty
    for draw in (plots.refine_positions, plots.refine_lengths):
        assert_no_data(one(draw, stats)[1].axes[0], "no refine spans in these rollouts")
    assert_no_data(one(plots.refine_outcomes, stats)[1].axes[0], "no refine outcomes")
    # real numbers: a judged half right, and every response with 0 refines
    ax = one(plots.accuracy_by_refine, stats)[1].axes[0]
    assert no_data_text(ax) is None and drawn(ax)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["without refine"]  # "with refine" has no bar
    assert_rate_axis(ax)
    ax = one(plots.refines_per_response, stats)[1].axes[0]
    assert [p.get_height() for p in ax.containers[0].patches] == [100.0]
    assert_rate_axis(ax)
    (tmp_path / "o").mkdir()
    assert_saved(stats, tmp_path / "o", set(plots.OVERVIEW_PLOTS))


def test_refines_only_in_broken_responses_and_unjudged(tmp_path):
    """Spans without a well-formed think block have no position; no judged response, no accuracy."""
    stats = stats_of(tmp_path, "broken", [rec("evB", "q1", "refine", T7, "10", None, dataset="gsm8k", judge_error="x")])
    ax = one(plots.refine_positions, stats)[1].axes[0]
    assert_no_data(ax, "well-formed think block")
    ax = one(plots.accuracy_by_refine, stats)[1].axes[0]
    assert_no_data(ax, "no judged response")
    ax = one(plots.overview_rates, stats)[1].axes[0]  # 100 % refine rate: drawn
    assert no_data_text(ax) is None and drawn(ax)
    assert "refine-fix rate" not in [t.get_text() for t in ax.get_legend().get_texts()]  # n/a: no bar, no entry
    assert_rate_axis(ax)


def test_overview_title_fits_a_one_group_figure(tmp_path):
    stats = stats_of(tmp_path, "one", [rec("evB", "q1", "refine", T7, "10", 1.0, dataset="gsm8k")])
    _, fig = one(plots.overview_rates, stats)
    assert "\n" in fig.axes[0].get_title()  # wrapped: a 6-inch figure is narrower than the title
    assert_fits(fig)


def test_overview_figures_on_normal_data(normal, tmp_path):
    for draw in OVERVIEW:
        _, fig = one(draw, normal)
        ax = fig.axes[0]
        assert no_data_text(ax) is None and drawn(ax), draw.__name__
        assert ax.get_legend() is not None and ax.get_legend().get_texts(), draw.__name__
        assert_rate_axis(ax)
        assert_fits(fig)
    ax = one(plots.overview_rates, normal)[1].axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "refine rate",
        "empty-refine rate",
        "refine-fix rate",
        "format pass rate",
    ]  # refine-break: 0 wherever measured
    assert [t.get_text().replace("\n", " ") for t in ax.texts] == ["no bar, 0 wherever measured: refine-break rate"]
    heights = [p.get_height() for p in ax.containers[0].patches]  # refine rate per group
    assert heights[0] == pytest.approx(80.0)
    ax = one(plots.refine_positions, normal)[1].axes[0]
    assert len(ax.lines) == 3 and ax.get_xlim() == (0, 1)


# ----------------------------------------------------------------------------- per-run figures


def trend(steps: list[int], value=None) -> dict:
    cols = (
        "refine_rate",
        "format_pass_rate",
        "empty_refine_rate",
        "acc_refine",
        "acc_plain",
        "response_tokens_refine",
        "response_tokens_plain",
        "refine_reward",
        "total_reward",
    )
    return {"steps": steps} | {c: [value] * len(steps) for c in cols}


@pytest.mark.parametrize("steps", [[], [0, 1]], ids=["no steps", "all None"])
def test_training_trends_without_values(steps, tmp_path):
    stats = dict(EMPTY, trends={"runZ": trend(steps)})
    name, fig = one(plots.training_trends, stats)
    assert name == "trend_runZ.png" and len(fig.axes) == 6
    for ax, why, rate in zip(
        fig.axes,
        (
            "no refine rollouts",
            "no refine rollouts",
            "no judged rollout",
            "no response lengths",
            "refine rollout with",
            "refine rollout with",
        ),
        (True, True, True, False, False, False),
    ):
        assert_no_data(ax, why, rate=rate)
        assert not ax.xaxis.get_gridlines() or not any(g.get_visible() for g in ax.xaxis.get_gridlines())
    assert_fits(fig)
    assert_saved(stats, tmp_path, set(plots.OVERVIEW_PLOTS) | {"trend_runZ.png"})


def test_training_trends_all_zero_one_step():
    """A single step of zeros: lines on 0 %, no axis below it (was -0.06 to 0.06), and a step axis
    of whole steps (was 2.84 to 3.16)."""
    _, fig = one(plots.training_trends, dict(EMPTY, trends={"runZ": trend([3], 0.0)}))
    for ax in fig.axes[:3]:
        assert no_data_text(ax) is None and drawn(ax)
        assert_rate_axis(ax)
    for ax in fig.axes:
        assert ax.get_xlim() == (2, 4) and all(float(t).is_integer() for t in ax.get_xticks())
    assert fig.axes[3].get_ylim() == (0, 1)  # tokens: 0, not a negative axis
    assert fig.axes[4].get_ylim() == pytest.approx((-1.1, 1.1))  # the refine reward: its whole range
    assert fig.axes[5].get_ylim() == (0, 1)  # the total reward, 0: as the tokens


def test_training_trends_on_normal_data(normal):
    _, fig = one(plots.training_trends, normal)
    usage, fmt, acc, length, refine_reward, total = fig.axes
    for ax in (usage, fmt, acc):
        assert no_data_text(ax) is None and drawn(ax)
        assert_rate_axis(ax)
    assert [t.get_text() for t in acc.get_legend().get_texts()] == [
        "refine rollouts",
        "plain rollouts (mean)",
        "in-training eval: heldout",
    ]
    assert fmt.get_legend() is None and list(fmt.lines[0].get_ydata()) == [100.0, 50.0]
    assert list(length.lines[0].get_ydata()) == [22.0, 26.0] and length.get_ylim()[0] > 0  # tokens: autoscaled
    # judged refine rollouts' refine rewards: step 0 +1, -0.5, 0; step 1 +1 (the judge error left out)
    assert list(refine_reward.lines[0].get_ydata()) == pytest.approx([1 / 6, 1.0])
    assert_no_data(total, "with a reward", rate=False)  # these records carry no total_reward
    assert_fits(fig)


def test_metrics_without_steps_or_values(tmp_path):
    stats = dict(
        EMPTY,
        metrics_trends={
            "empty": {"file": "m.jsonl", "steps": [], "series": {}},
            "holes": {
                "file": "n.jsonl",
                "steps": [0, 1],
                "series": {"pasr/refine_rate": [None, None], "pasr/x": [0.0, 0.0]},
            },
        },
    )
    figs = dict(plots.metrics_series(stats))
    [ax] = figs["metrics_empty.png"].axes
    assert_no_data(ax, "no training step", rate=False)
    rate, zeros = figs["metrics_holes.png"].axes[:2]
    assert_no_data(rate, "no value logged", rate=False)
    assert drawn(zeros) and zeros.get_ylim() == (0, 1)
    for fig in figs.values():
        assert_fits(fig)
    assert_saved(stats, tmp_path, set(plots.OVERVIEW_PLOTS) | {"metrics_empty.png", "metrics_holes.png"})


def test_metrics_on_normal_data(normal):
    [(name, fig)] = list(plots.metrics_series(normal))
    ax = fig.axes[0]
    assert name == "metrics_runA.png" and ax.get_title() == "pasr/refine_rate"
    assert list(ax.lines[0].get_ydata()) == [0.5, 0.75] and no_data_text(ax) is None


def rrr_train(value) -> dict:
    return {"steps": [1, 2], "first_attempt_acc": [value] * 2, "retry_acc": [value] * 2, "recovered_rate": [value] * 2}


def test_rrr_trends_without_values(tmp_path):
    stats = dict(EMPTY, rrr={"train": {"rrrZ": rrr_train(None)}, "evals": {}})
    name, fig = one(plots.rrr_trends, stats)
    assert name == "rrr_rrrZ.png"
    assert_no_data(fig.axes[0], "no scored Reflect, Retry, Reward rollout")
    assert_fits(fig)
    assert_saved(stats, tmp_path, set(plots.OVERVIEW_PLOTS) | {"rrr_rrrZ.png"})


def test_rrr_trends_on_normal_data():
    ev = {"kind": "val", "run_id": "rrrZ", "dataset": "held", "step": 2, "first_attempt_acc": 1.0, "final_acc": 1.0}
    stats = dict(EMPTY, rrr={"train": {"rrrZ": rrr_train(0.5) | {"recovered_rate": [None, 0.0]}}, "evals": {"e": ev}})
    ax = one(plots.rrr_trends, stats)[1].axes[0]
    assert no_data_text(ax) is None and len(ax.lines) == 5
    assert_rate_axis(ax)  # was -2 to 102
    assert len(ax.get_legend().get_texts()) == 5


def transition(counts: dict[str, int]) -> dict:
    return {"before": "evP:plain", "after": "evR:pasr", "counts": counts, "n_pairs": sum(counts.values())}


def test_transitions_without_pairs(tmp_path):
    zero = {"right->right": 0, "right->wrong": 0, "wrong->right": 0, "wrong->wrong": 0}
    stats = dict(EMPTY, transitions=[transition(zero)])
    name, fig = one(plots.transitions, stats)
    [ax] = fig.axes  # no colour bar of nothing
    assert name == "transition_1.png" and not ax.images
    assert_no_data(ax, "no judged sample answered by both runs", rate=False)
    assert_fits(fig)
    assert_saved(stats, tmp_path, set(plots.OVERVIEW_PLOTS) | {"transition_1.png"})


def test_transitions_on_normal_data(normal):
    _, fig = next(plots.transitions(normal))  # the eval runs' pair (runA's in-training evaluations are the second)
    ax = fig.axes[0]
    assert ax.images and sorted(t.get_text() for t in ax.texts) == ["1", "1", "1", "2"]


def test_long_titles_and_labels_are_wrapped():
    long_run = "a-very-long-run-identifier-" * 6
    _, fig = one(plots.rrr_trends, dict(EMPTY, rrr={"train": {long_run: rrr_train(0.5)}, "evals": {}}))
    assert fig.axes[0].get_title().count("\n") >= 1
    assert_fits(fig)
    assert wrap("one two three", 100, 10) == "one two three"


# ----------------------------------------------------------------------------- pasr eval compare


def run(method: str, **datasets) -> dict:
    return {"model": "org/m", "method": method, "datasets": datasets}


def test_compare_without_numbers_says_no_data(tmp_path):
    runs = [
        run(
            "plain",
            gsm8k={"accuracy": None, "mean_tokens": None, "n_samples": 0},
            math={"accuracy": 0.5, "mean_tokens": 40.0, "n_samples": 2},
        )
    ]
    fig = scatter_figure(runs)
    gsm8k, math = fig.axes
    assert_no_data(gsm8k, "no run has an accuracy", "gsm8k")
    assert no_data_text(math) is None and drawn(math)
    assert_rate_axis(math)
    assert_fits(fig)
    out = scatter(runs, tmp_path / "cmp.png")
    assert out.read_bytes()[:8] == PNG


def test_compare_all_zero_has_no_negative_axis():
    """One run, accuracy 0 and 0 tokens: was a -0.06 to 0.06 % axis both ways."""
    fig = scatter_figure([run("plain", gsm8k={"accuracy": 0.0, "mean_tokens": 0.0, "n_samples": 2})])
    ax = fig.axes[0]
    assert_rate_axis(ax)
    assert ax.get_xlim()[0] == 0 and ax.get_xlim()[1] > 0 and drawn(ax)


def test_compare_without_datasets(tmp_path):
    fig = scatter_figure([run("plain")])
    [ax] = fig.axes
    assert_no_data(ax, "no dataset")
    assert not fig.legends
    assert scatter([run("plain")], tmp_path / "c.png").read_bytes()[:8] == PNG


def test_compare_on_normal_data():
    runs = [
        run("plain", gsm8k={"accuracy": 0.4, "mean_tokens": 300.0, "n_samples": 5}),
        run("pasr", gsm8k={"accuracy": 1.0, "mean_tokens": 250.0, "n_samples": 5}),
    ]
    fig = scatter_figure(runs)
    ax = fig.axes[0]
    assert no_data_text(ax) is None and len(ax.collections) == 2
    assert_rate_axis(ax)
    lo, hi = ax.get_xlim()
    assert 0 <= lo < 250 and hi > 300
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [run_label(r) for r in runs]
    assert_fits(fig)
