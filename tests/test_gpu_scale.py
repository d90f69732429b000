"""``recipe/scripts/gpu_scale.sh`` (benchmarks/gpu_scale.py) on a machine without a GPU: the
commands and the plan (dry run), and the whole orchestration end to end on the tiny model (the
warm-ups side by side, PASR and its control from each, the budget's stop, the evaluations, the
JSON rebuilt from the run directory)."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from benchmarks import gpu_scale


def _settings_of(cmd_line: str) -> dict[str, str]:
    """The ``key=value`` overrides of a printed command, the last of each key winning."""
    return dict(part.split("=", 1) for part in cmd_line.split() if "=" in part)


def test_dry_run_prints_every_command_and_the_plan(capsys, tmp_path):
    assert gpu_scale.main(["--dry-run", "--run-dir", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    lines = {line.split(":", 1)[0]: line.split(":", 1)[1] for line in out.splitlines() if line.startswith("seed_")}
    assert set(lines) == {f"seed_{s}/{run}" for s in (1, 2, 3) for run in ("warmup", "pasr", "control")}
    for s in (1, 2, 3):
        warm = _settings_of(lines[f"seed_{s}/warmup"])
        assert warm["warmup.seed"] == warm["trainer.seed"] == str(s)
        assert warm["warmup.lr_schedule"] == "cosine" and warm["trainer.steps"] == "0"
        assert warm["trainer.eval_after_warmup"] == "true"
        pasr, control = (_settings_of(lines[f"seed_{s}/{arm}"]) for arm in ("pasr", "control"))
        for run in (pasr, control):
            assert run["warmup.seed"] == run["trainer.seed"] == str(s)
            assert run["model.path"].endswith(f"seed_{s}/warmup/checkpoints/step_000100")
            assert run["warmup.steps"] == "0" and run["trainer.steps"] == "100"
            assert run["rollout.queries_per_step"] == "16"
            assert run["pasr.n_refine"] == run["pasr.n_plain"] == "8"
            assert run["trainer.eval_at_end"] == "true" and run["model.device"] == "cuda"
        assert "pasr.weights.refine" not in pasr and control["pasr.weights.refine"] == "0"
        assert {k: v for k, v in control.items() if k != "pasr.weights.refine"} == pasr  # everything else equal
    assert "stopped run:" in out and "trainer.eval_at_start=true" in out
    # the plan: its basis, each phase's expected time, the steps that fit the default budget
    assert "8.76 s a step on an NVIDIA H200" in out and "256 rollouts" in out
    for phase in ("1. warm-ups", "2. RL runs", "3. evaluations"):
        assert phase in out
    plan = gpu_scale.plan(gpu_scale.build_parser().parse_args([]), _cfg())
    assert plan["step_s"] == pytest.approx(8.76)  # the measured basis: the same rollouts, the same six runs
    assert f"about {plan['steps_fit']} steps fit" in out
    # warm-ups 21 + 62 = 83 s and the K=4 samples of their evaluations ~12.5 s (estimated:
    # benchmarks.sampled_rows); (420 - 60 - 95.5 - 16) / 8.76: the asked 100 steps do not fit
    assert plan["phases_s"]["warmups"] == 96 and plan["steps_fit"] == 28
    greedy = gpu_scale.plan(gpu_scale.build_parser().parse_args(["--eval-sampled-k", "0"]), _cfg())
    assert greedy["phases_s"]["warmups"] == 83 and greedy["steps_fit"] == 29  # (420 - 60 - 83 - 16) / 8.76
    for s in (1, 2, 3):  # every evaluation samples: the warm-ups', the RL runs' own and the stopped runs'
        assert all(_settings_of(lines[f"seed_{s}/{r}"])["trainer.eval_sampled_k"] == "4" for r in ("warmup", "pasr"))
    assert "trainer.eval_sampled_k=4" in out.split("stopped run:", 1)[1].splitlines()[0]
    # a quarter of the rollouts a step, twice as slow for sharing: half the measured step
    half = gpu_scale.plan(
        gpu_scale.build_parser().parse_args(["--side-by-side", "2"]), _cfg(["--n-refine", "2", "--n-plain", "2"])
    )
    assert half["step_s"] == pytest.approx(8.76 / 4 * 2, abs=0.01)


def _cfg(argv=()):
    from benchmarks.gpu_check import local_settings

    args = gpu_scale.build_parser().parse_args(list(argv))
    args.seed = 1
    return local_settings(gpu_scale.with_(args, local_override=gpu_scale.common_overrides(args, 1)))


def test_the_paper_reward_goes_to_both_arms(capsys, tmp_path):
    gpu_scale.main(["--dry-run", "--reward", "paper", "--seeds", "1", "--run-dir", str(tmp_path / "run")])
    out = capsys.readouterr().out
    lines = {line.split(":", 1)[0]: line for line in out.splitlines() if line.startswith("seed_")}
    for arm in ("pasr", "control"):
        assert all(o in lines[f"seed_1/{arm}"] for o in gpu_scale.PAPER_EXACT)
    assert "pasr.weights.refine" not in lines["seed_1/warmup"]


def test_the_script_runs_the_module(tmp_path):
    import subprocess

    from benchmarks.watched_run import ROOT

    out = subprocess.run(
        ["bash", str(ROOT / "recipe/scripts/gpu_scale.sh"), "--dry-run", "--seeds", "4", "--run-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "seed_4/control:" in out and "pasr.weights.refine=0" in out and "steps fit" in out


def test_a_run_directory_of_something_else_is_not_cleared(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(SystemExit, match="not a gpu_scale run directory"):
        gpu_scale.prepare_root(tmp_path, "gpu_scale")
    assert (tmp_path / "mine.txt").read_text() == "keep me"


@pytest.mark.slow  # a minute or more of subprocess training runs, six at once: make test-slow
def test_two_seeds_end_to_end_on_the_tiny_model_then_the_report_from_files(tmp_path, tiny_cpu_args, capsys):
    root, out = tmp_path / "run", tmp_path / "gpu_scale.json"
    common = [
        *tiny_cpu_args,
        "--seeds",
        "1",
        "2",
        "--steps",
        "2",
        "--queries-per-step",
        "2",
        "--n-refine",
        "2",
        "--n-plain",
        "1",
        "--eval-size",
        "4",
        "--run-dir",
        str(root),
    ]
    assert gpu_scale.main([*common, "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["complete"] and result["question"] == gpu_scale.QUESTION
    assert result["device"].startswith("cpu: ") and result["wall_s"] > 0
    assert result["commit"] is None or len(result["commit"]) == 40
    assert set(result["timings"]["phases"]) == {"warmups", "rl", "evals"}
    assert set(result["seeds"]) == {"seed_1", "seed_2"}
    for name, seed in result["seeds"].items():
        s = int(name.removeprefix("seed_"))
        for row in ("warmup", "pasr", "control"):
            r = seed["rows"][row]
            assert r["n"] == 4 and {"acc", "refine_fix_rate", "refine_break_rate", "tokens"} <= set(r)
        assert seed["steps"] == {"pasr": 2, "control": 2}
        for test in ("pasr_vs_warmup", "pasr_vs_control", "control_vs_warmup"):
            t = seed["tests"][test]
            assert t["wins"] + t["losses"] <= 4 and 0 <= t["p"] <= 1
            assert seed["sampled"]["tests"][test]["n"] == 4  # on per-question means of 4 samples at T=0.5
        assert all(seed["sampled"]["rows"][row]["k"] == 4 for row in ("warmup", "pasr", "control"))
        # the runs' own configs: warmup.seed = trainer.seed = the seed; the control alone without the refine term
        for run in ("warmup", "pasr", "control"):
            cfg = yaml.safe_load((root / name / run / "config.yaml").read_text())
            assert cfg["warmup"]["seed"] == cfg["trainer"]["seed"] == s, run
            assert cfg["warmup"]["lr_schedule"] == "cosine"
        pasr, control = (yaml.safe_load((root / name / arm / "config.yaml").read_text()) for arm in ("pasr", "control"))
        assert pasr["pasr"]["weights"]["refine"] == 1.0 and control["pasr"]["weights"]["refine"] == 0.0
        assert {**control["pasr"], "weights": None} == {**pasr["pasr"], "weights": None}
        assert control["pasr"]["weights"]["acc"] == pasr["pasr"]["weights"]["acc"]
        assert control["algo"] == pasr["algo"] and control["rollout"] == pasr["rollout"]
        assert seed["configs"]["control"]["weights"]["refine"] == 0.0
    pooled = result["pooled"]
    assert pooled["n_seeds"] == 2
    for test in ("pasr_vs_warmup", "pasr_vs_control"):
        t = pooled["tests"][test]
        assert t["wins"] == sum(result["seeds"][s]["tests"][test]["wins"] for s in result["seeds"])
        assert t["losses"] == sum(result["seeds"][s]["tests"][test]["losses"] for s in result["seeds"])
        assert set(result["p"][test]) == {"seed_1", "seed_2", "pooled"}
    for s in ("seed_1", "seed_2"):
        for arm in ("pasr", "control"):
            curve = result["curves"][f"{s}/{arm}"]
            assert curve["step"] == [1, 2]
            for key in ("pasr/acc_refine", "pasr/refine_rate", "pasr/reward_mean", "actor/lr", "timing_s/step"):
                assert len(curve[key]) == 2 and all(v is not None for v in curve[key]), key

    # --report rebuilds the same result from the run directory alone
    again = tmp_path / "again.json"
    assert gpu_scale.main(["--report", str(root), "--out", str(again)]) == 0
    assert json.loads(again.read_text()) == result
    assert "pooled" in capsys.readouterr().out

    # a command cut off before seed 2's control was evaluated: the rest is still reported
    (root / "seed_2" / "control" / "eval" / "final.jsonl").unlink()
    gpu_scale.main(["--report", str(root), "--out", str(again)])
    cut = json.loads(again.read_text())
    seed_2 = cut["seeds"]["seed_2"]
    assert seed_2["rows"]["control"] is None and seed_2["tests"]["pasr_vs_control"] is None
    assert seed_2["steps"] == {"pasr": 2, "control": None} and seed_2["rows"]["pasr"]["n"] == 4
    assert cut["seeds"]["seed_1"] == result["seeds"]["seed_1"] and cut["pooled"]["n_seeds"] == 1
    assert cut["pooled"]["tests"]["pasr_vs_warmup"] == {
        **result["seeds"]["seed_1"]["tests"]["pasr_vs_warmup"],
        "seeds_up": cut["pooled"]["tests"]["pasr_vs_warmup"]["seeds_up"],
        "seeds_down": cut["pooled"]["tests"]["pasr_vs_warmup"]["seeds_down"],
    }


@pytest.mark.slow  # a minute or more of subprocess training runs: make test-slow
def test_the_budget_stops_the_rl_runs_and_their_checkpoints_are_evaluated(tmp_path, tiny_cpu_args):
    """RL runs asked for far more steps than the budget holds get SIGINT during one same step (the
    trainer's own stop: that step, its checkpoint), and the last phase evaluates those checkpoints."""
    root, out = tmp_path / "run", tmp_path / "gpu_scale.json"
    gpu_scale.main(
        [
            *tiny_cpu_args,
            "--seeds",
            "1",
            "--steps",
            "1000",
            "--queries-per-step",
            "2",
            "--n-refine",
            "2",
            "--n-plain",
            "1",
            "--eval-size",
            "4",
            "--commit",
            "c0ffee",
            "--budget-s",
            "75",
            "--eval-reserve-s",
            "15",
            "--eval-grace-s",
            "60",
            "--run-dir",
            str(root),
            "--out",
            str(out),
        ]
    )
    result = json.loads(out.read_text())
    seed = result["seeds"]["seed_1"]
    for arm in ("pasr", "control"):
        assert not (root / "seed_1" / arm / "eval" / "final.jsonl").exists()
        events = json.loads((root / f"seed_1_{arm}.log.events.json").read_text())
        assert events["signals"][0][1] == "SIGINT" and events["rc"] == 130
        assert 1 <= seed["steps"][arm] < 1000 and seed["rows"][arm]["n"] == 4
        assert len(result["curves"][f"seed_1/{arm}"]["step"]) == seed["steps"][arm]
    assert seed["steps"]["pasr"] == seed["steps"]["control"]  # stopped after the same step, compared there
    assert result["complete"] and result["pooled"]["n_seeds"] == 1 and result["commit"] == "c0ffee"

    # packed as gpu_loan.sh packs a machine's run (no checkpoints) and moved: the steps still read
    packed = tmp_path / "packed"
    shutil.copytree(root, packed, ignore=shutil.ignore_patterns("checkpoints"))
    again = tmp_path / "again.json"
    png = tmp_path / "scale.png"
    assert gpu_scale.main(["--report", str(packed), "--out", str(again), "--plot", str(png)]) == 0
    assert json.loads(again.read_text())["seeds"] == result["seeds"]
    assert png.stat().st_size > 10_000


def test_plot_scale_draws_each_seeds_curves_and_rows(tmp_path, monkeypatch):
    row = {"acc": 0.6, "n": 300, "refine_fix_rate": 0.2, "refine_break_rate": 0.1}
    test = {"wins": 3, "losses": 9, "p": 0.15}
    curve = {"step": [1, 2, 3], "pasr/acc_refine": [0.5, 0.6, None], "pasr/refine_fix_rate": [0.3, 0.2, 0.4]}
    result = {
        "device": "NVIDIA H200",
        "commit": "abc1234" * 6,
        "seeds": {
            f"seed_{s}": {
                "rows": {"warmup": row, "pasr": {**row, "acc": 0.55}, "control": None},
                "steps": {"pasr": 3, "control": None},
                "tests": {"pasr_vs_warmup": test, "pasr_vs_control": None},
            }
            for s in (1, 2)
        },
        "curves": {"seed_1/pasr": curve, "seed_1/control": curve, "seed_2/pasr": curve},
        "pooled": {"tests": {"pasr_vs_warmup": test}},
    }
    import matplotlib.pyplot as plt

    drawn = []
    real = plt.Figure.savefig

    def keep(fig, *a, **k):
        drawn.append(fig)
        return real(fig, *a, **k)

    monkeypatch.setattr(plt.Figure, "savefig", keep)
    path = gpu_scale.plot_scale(result, tmp_path / "p.png")
    assert path.stat().st_size > 10_000
    axes = drawn[0].axes
    assert len(axes) == 4 * 2  # three curve panels and the rows, a column per seed
    # seed 2 has no control run: one line in its curve panels, and its bars only for the rows it has
    seed_2_acc = axes[1]
    assert [line.get_label() for line in seed_2_acc.get_lines()] == ["PASR"]
    assert len(axes[-1].patches) == 2 and "pooled PASR vs warm-up 3/9, p 0.15" in drawn[0]._suptitle.get_text()


def _dump(path, query_ids, right) -> None:
    """A greedy evaluation dump: one refine record a question, right for the ids in ``right``."""
    from data.records import RolloutRecord, write_records

    records = [
        RolloutRecord(
            "r", q, "synthetic", "refine", "?", "<answer>1</answer>", 5, True, "ok", 0, "1", "1", float(q in right)
        )
        for q in query_ids
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_records(path, records, append=False)


def test_the_report_pools_mean_at_k_and_its_tests_over_the_seeds(tmp_path, capsys):
    """Each seed's rows and tests on per-question means of its sampled scores (beside its greedy
    dumps), and the pool over the seeds: mean@K averaged, the test on the union of the questions."""
    from recipe.local_engine.sampled_eval import write_scores
    from recipe.paired_tests import paired_means_test, question_means

    root = tmp_path / "run"
    (root).mkdir()
    (root / "settings.json").write_text('{"seeds": [1, 2]}')
    qs = ["q1", "q2", "q3"]
    scores = {
        "warmup": {"q1": [0, 0, 0, 0], "q2": [1, 0, 0, 0], "q3": [1, 1, 1, 1]},
        "pasr": {"q1": [1, 0, 0, 0], "q2": [1, 1, 0, 0], "q3": [1, 1, 1, 1]},
        "control": {"q1": [0, 0, 0, 0], "q2": [1, 0, 0, 0], "q3": [1, 1, 1, 0]},
    }
    for seed in (1, 2):
        d = root / f"seed_{seed}"
        for name, dump in (
            ("warmup", d / "warmup" / "eval" / "warmup.jsonl"),
            ("pasr", d / "pasr" / "eval" / "final.jsonl"),
            ("control", d / "control_eval" / "eval" / "base.jsonl"),  # a stopped run's evaluation
        ):
            _dump(dump, qs, {"q3"})
            write_scores(dump.with_name(f"{dump.stem}.sampled.json"), scores[name], k=4, temperature=0.5, seed=seed)
    result = gpu_scale.build_result(root)
    one = result["seeds"]["seed_1"]["sampled"]
    assert one["rows"]["pasr"] == {"mean_at_k": pytest.approx(1.75 / 3), "k": 4, "temperature": 0.5, "n": 3}
    means = {name: question_means(v) for name, v in scores.items()}
    assert one["tests"]["pasr_vs_control"] == paired_means_test(means["control"], means["pasr"])
    pool = result["pooled"]["sampled"]
    assert pool["rows"]["warmup"]["mean_at_k"] == pytest.approx(1.25 / 3) and pool["rows"]["warmup"]["n_seeds"] == 2
    union = {name: {f"{i}:{q}": m for i in (0, 1) for q, m in means[name].items()} for name in means}
    assert pool["tests"]["pasr_vs_warmup"] == {
        **paired_means_test(union["warmup"], union["pasr"]),
        "seeds_up": 2,
        "seeds_down": 0,
    }
    assert pool["tests"]["pasr_vs_warmup"]["n"] == 6 and pool["tests"]["pasr_vs_warmup"]["wins"] == 4
    gpu_scale.print_report(result)
    out = capsys.readouterr().out
    assert "seed_1: mean@4 at T=0.5 (per-question means): warmup 0.417  pasr 0.583  control 0.333" in out
    assert "pooled: mean@4 at T=0.5" in out and "  pasr_vs_warmup: +0.167 (4 up, 0 down, 2 same)" in out


def test_a_run_without_an_evaluation_is_reported_by_what_happened_to_it(tmp_path, capsys):
    """No row of None (a fresh H200's gpu_scale, 2026-11-28): a run never started, one stopped
    before its first checkpoint and one that checkpointed but was not evaluated each say so."""
    root = tmp_path / "run"
    d = root / "seed_1"
    (root / "settings.json").parent.mkdir(parents=True)
    (root / "settings.json").write_text('{"seeds": [1]}')
    _dump(d / "warmup" / "eval" / "warmup.jsonl", ["q1", "q2"], {"q1"})
    # pasr: stopped by the budget's SIGTERM during its first step, no checkpoint
    (d / "pasr").mkdir(parents=True)
    (root / "seed_1_pasr.log").write_text("    1.0 loading\n")
    (root / "seed_1_pasr.log.events.json").write_text('{"cmd": [], "signals": [[9.0, "SIGTERM", 1]], "rc": -15}')
    # control: never started (the command ended first)
    result = gpu_scale.build_result(root)
    missing = result["seeds"]["seed_1"]["missing"]
    assert set(missing) == {"pasr", "control"}
    stopped = {"status": "stopped before its first checkpoint", "why": "signal SIGTERM", "logged_step": 0}
    assert missing["pasr"] == stopped
    assert missing["control"]["status"] == "not started"
    gpu_scale.print_report(result)
    out = capsys.readouterr().out
    seed_row = next(line for line in out.splitlines() if line.startswith("seed_1  "))
    assert "None" not in seed_row and "stopped before its first checkpoint" in seed_row, seed_row
    assert "seed_1 pasr: stopped before its first checkpoint (signal SIGTERM)" in out
    assert "seed_1 control: not started (the command ended before it started)" in out


def test_a_budget_past_the_commands_timeout_is_cut_to_end_inside_it(capsys):
    from types import SimpleNamespace

    from benchmarks.gpu_phases import OUTER_MARGIN_S, fit_outer_timeout

    args = fit_outer_timeout(SimpleNamespace(budget_s=430.0, eval_grace_s=20.0), "gpu_check", "450")
    assert args.budget_s == 450 - OUTER_MARGIN_S - 20.0  # the 2026-11-28 loan's 430 + 20 = 450 left no room
    assert "--budget-s 430 cut to 415" in capsys.readouterr().err
    kept = fit_outer_timeout(SimpleNamespace(budget_s=300.0, eval_grace_s=0.0), "gpu_check", "450")
    assert kept.budget_s == 300.0
    assert fit_outer_timeout(SimpleNamespace(budget_s=900.0, eval_grace_s=0.0), "x", "").budget_s == 900.0
