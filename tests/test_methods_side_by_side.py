"""benchmarks/methods_side_by_side: every method on the held-out problems, one table and one plot.

End to end with the tiny random model as every model (a few questions, a few tokens: the
plumbing, not a result), and the pure parts: N from token counts, the paired table, which chats
get the ``<think>`` prefill.
"""

from __future__ import annotations

import json

import pytest

from benchmarks import methods_side_by_side as bench
from data.records import iter_records

# ----------------------------------------------------------------------------- pure parts


def test_candidates_follow_the_token_ratio_rounded_half_up():
    assert bench.choose_candidates(65.0, 22.0)["n"] == 3  # 2.95
    assert bench.choose_candidates(55.0, 22.0)["n"] == 3  # 2.5 rounds up
    assert bench.choose_candidates(54.0, 22.0)["n"] == 2
    c = bench.choose_candidates(120.0, 20.0)
    assert c == {"n": 6, "pasr_tokens": 120.0, "plain_tokens": 20.0, "ratio": 6.0, "floor": 2}


def test_candidates_never_below_the_floor():
    assert bench.choose_candidates(30.0, 40.0)["n"] == 2  # ratio 0.75: one candidate would choose nothing
    assert bench.choose_candidates(30.0, 0.0) == {
        "n": 2,
        "pasr_tokens": 30.0,
        "plain_tokens": 0.0,
        "ratio": None,
        "floor": 2,
    }
    assert bench.choose_candidates(None, 20.0)["n"] == 2
    assert bench.choose_candidates(10.0, 10.0, floor=1)["n"] == 1


def test_paired_table_against_the_reference():
    correct = {
        "pasr-trained": {"q1": True, "q2": True, "q3": False, "q4": False, "q5": True},
        "warm-up": {"q1": False, "q2": True, "q3": True, "q4": False, "q5": False},
        "same": {"q1": True, "q2": True, "q3": False, "q4": False, "q5": True},
        "partial": {"q1": False, "q9": True},  # only q1 is shared
    }
    table = bench.paired_table(correct)
    assert table["pasr-trained"] is None
    assert {k: table["warm-up"][k] for k in ("wins", "losses", "n_paired")} == {"wins": 1, "losses": 2, "n_paired": 5}
    assert table["warm-up"]["p"] == pytest.approx(1.0)
    assert table["same"] == {"wins": 0, "losses": 0, "p": 1.0, "n_paired": 5}
    assert table["partial"] == {"wins": 0, "losses": 1, "p": 1.0, "n_paired": 1}
    five = bench.paired_table(
        {"pasr-trained": {f"q{i}": False for i in range(5)}, "x": {f"q{i}": True for i in range(5)}}
    )
    assert (five["x"]["wins"], five["x"]["losses"]) == (5, 0) and five["x"]["p"] == pytest.approx(0.0625)


# ----------------------------------------------------------------------------- end to end


@pytest.mark.slow  # minutes of subprocess training runs: make test-slow
def test_runs_end_to_end_on_the_tiny_model(tiny_model_dir, tmp_path, monkeypatch):
    import benchmarks.training_stages as stages

    monkeypatch.setattr(stages, "cpu_info", lambda: {"model": "test cpu", "dtype": "float32"})  # no dtype probe
    out, png, run = tmp_path / "result.json", tmp_path / "plot.png", tmp_path / "run"
    tiny = str(tiny_model_dir)
    argv = [
        "--base",
        tiny,
        "--warmup",
        tiny,
        "--pasr",
        tiny,
        "--limit",
        "3",
        "--max-new-tokens",
        "6",
        "--max-rounds",
        "1",
        "--threads",
        "1",
        "--dtype",
        "float32",
        "--device",
        "cpu",
        "--batch-size",
        "8",
        "--out-dir",
        str(run),
        "--out",
        str(out),
        "--png",
        str(png),
        "--no-progress",
    ]
    assert bench.main(argv) == 0

    result = json.loads(out.read_text())
    assert [r["key"] for r in result["rows"]] == [r.key for r in bench.ROWS]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    by_key = {r["key"]: r for r in result["rows"]}
    for r in result["rows"]:
        assert r["n"] == 3 and 0.0 <= r["acc"] <= 1.0 and r["tokens_per_question"] > 0, r
        assert (run / "rows" / r["key"] / "samples.jsonl").is_file() and (
            run / "rows" / r["key"] / "summary.json"
        ).is_file()
        assert r["wall_s"] is not None and r["wall_s"] >= 0
        if r["key"] == bench.REFERENCE:
            assert r["vs_pasr_trained"] is None
        else:
            v = r["vs_pasr_trained"]
            assert v["n_paired"] == 3 and v["wins"] + v["losses"] <= 3 and 0.0 <= v["p"] <= 1.0
    # the baselines run on the warm-up; best-of-N and majority vote share N, at least 2
    assert {by_key[k]["model"] for k in ("self-refine-latest", "self-refine-best", "best-of-n", "majority", "rrr")} == {
        "warm-up"
    }
    n = result["candidates"]["n"]
    assert n >= 2 and by_key["best-of-n"]["candidates"] == by_key["majority"]["candidates"] == n
    assert by_key["best-of-n"]["select"] == "score" and by_key["majority"]["select"] == "majority"
    assert "first_attempt_accuracy" in by_key["rrr"]
    assert result["settings"]["dataset"]["seed"] == 1235 and result["settings"]["prefill"] == "<think>"
    assert result["machine"]["cpu"]["model"] == "test cpu" and set(result["commit"]) == {"sha", "dirty"}

    # the local engine's held-out problems, and its <think> prefill on answers under its prompts only
    from data.synthetic import generate_problems

    heldout = generate_problems(3, seed=1235, difficulty=1, split="test")
    records = list(iter_records(run / "rows" / bench.REFERENCE / "samples.jsonl"))
    assert sorted(r.prompt for r in records) == sorted(p.question for p in heldout)
    assert all(r.response.startswith("<think>") for r in records)
    sr = next(iter_records(run / "rows" / "self-refine-latest" / "samples.jsonl"))
    passes = {p["variant"]: p["text"] for p in sr.extra["passes"]}
    assert passes["self_refine:answer"].startswith("<think>")
    assert not passes["self_refine:feedback:1"].startswith("<think>")
    rrr = next(iter_records(run / "rows" / "rrr" / "samples.jsonl"))
    assert not rrr.extra["passes"][0]["text"].startswith("<think>")

    # a rerun resumes: nothing is generated again and the table is the same
    before = {r["key"]: (r["acc"], r["tokens_per_question"]) for r in result["rows"]}
    assert bench.main(argv) == 0
    again = json.loads(out.read_text())
    assert {r["key"]: (r["acc"], r["tokens_per_question"]) for r in again["rows"]} == before
    # rows made with the prefill are not mixed with rows without it
    with pytest.raises(SystemExit, match="other settings"):
        bench.main([*argv, "--no-prefill"])


def test_compare_legend_of_every_row_fits_the_figure():
    """Ten runs on one dataset (this benchmark's plot): the legend stays inside the figure and the
    figure grows to hold it instead of squeezing the panel (eval/compare.py)."""
    from eval.compare import scatter_figure

    runs = [
        {
            "model": f"model-{i}",
            "method": "best-of-n",
            "candidates": 3,
            "select": "majority",
            "datasets": {
                "synthetic-heldout": {
                    "accuracy": 0.1 * i,
                    "mean_tokens": 10.0 + 5 * i,
                    "n_samples": 3,
                    "expected_samples": 3,
                }
            },
        }
        for i in range(10)
    ]
    fig = scatter_figure(runs)
    renderer = fig.canvas.get_renderer()
    legend = fig.legends[0].get_window_extent(renderer)
    assert len(fig.legends[0].get_texts()) == 10
    assert legend.x0 >= 0 and legend.x1 <= fig.bbox.width and legend.y0 >= 0
    assert fig.axes[0].get_window_extent(renderer).height / fig.dpi > 2.5  # inches: the panel keeps its room
    assert fig.axes[0].get_window_extent(renderer).y0 > legend.y1  # above the legend, not under it
