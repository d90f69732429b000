"""benchmarks/pasr_ab.py (issue #62) on a machine without a GPU: the commands of every seed and arm
and the plan (dry run); the scheduler's order, its refusal to start what cannot end and its stop
after one same step, on a stand-in trainer (tests/ab_fake_trainer.py); the run-level statistics
on known inputs; the report from a hand-written run directory (tests/ab_run_files.py), with a seed
missing an arm, a run stopped before its first checkpoint, and directories that hold no run; the
``rollout.seed`` key the drift arm rests on; and, slow, the whole benchmark on the tiny model."""

from __future__ import annotations

import json
import math
import shutil
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from benchmarks import ab_plan, ab_stats, pasr_ab
from benchmarks.ab_report import build_result
from tests.ab_run_files import CORRECT, MIXED, N, write_log, write_run

ARMS = ("control", "control_drift", "pasr_paper", "pasr_cpu")


def _settings_of(cmd_line: str) -> dict[str, str]:
    """The ``key=value`` overrides of a printed command, the last of each key winning."""
    return dict(part.split("=", 1) for part in cmd_line.split() if "=" in part)


# --------------------------------------------------------------------------- commands and plan
def test_dry_run_prints_every_seed_and_arm_and_the_plan(capsys, tmp_path):
    assert pasr_ab.main(["--dry-run", "--device", "cpu", "--run-dir", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    lines = {line.split(":", 1)[0]: line.split(":", 1)[1] for line in out.splitlines() if line.startswith("seed_")}
    assert set(lines) == {f"seed_{s}/{r}" for s in (1, 2, 3, 4, 5) for r in ("warmup", *ARMS)}
    for s in (1, 2, 3, 4, 5):
        warm = _settings_of(lines[f"seed_{s}/warmup"])
        assert warm["warmup.seed"] == warm["trainer.seed"] == str(s)  # the seed varies the whole run
        assert warm["warmup.lr_schedule"] == "cosine" and warm["warmup.refine_fraction"] == "0.4"
        assert warm["trainer.steps"] == "0" and warm["trainer.eval_after_warmup"] == "true"
        arms = {arm: _settings_of(lines[f"seed_{s}/{arm}"]) for arm in ARMS}
        for arm, run in arms.items():
            assert run["warmup.seed"] == run["trainer.seed"] == str(s), arm  # the same query order
            assert run["model.path"].endswith(f"seed_{s}/warmup/checkpoints/step_000100")
            assert run["warmup.steps"] == "0" and run["trainer.steps"] == "10"  # the demo preset's
            assert run["trainer.eval_at_end"] == "true" and run["trainer.eval_sampled_k"] == "4"
            assert run["model.threads"] == "1" and run["data.eval_size"] == "300"
        control = arms["control"]
        assert control["pasr.weights.refine"] == "0"
        # the drift arm: the control with another rollout seed, nothing else
        assert arms["control_drift"] == {**control, "rollout.seed": str(s + 1000)}
        paper = {k: v for k, v in arms["pasr_paper"].items() if not k.startswith("pasr.")}
        assert paper == {k: v for k, v in control.items() if not k.startswith("pasr.")}
        assert all(arms["pasr_paper"][o.split("=")[0]] == o.split("=")[1] for o in pasr_ab.PAPER_EXACT)
        assert {k: v for k, v in control.items() if k != "pasr.weights.refine"} == arms["pasr_cpu"]
    assert "stopped arm:" in out and "trainer.eval_at_start=true" in out.split("stopped arm:")[1].splitlines()[0]
    assert "5 seeds x (warm-up + 4 arms) = 25 runs of 10 RL steps" in out
    assert "seeds x 4 arms x 10 steps fit" in out and "all 5 seeds fit" in out


def test_the_plan_plays_the_schedule():
    """Two slots at full speed: the warm-ups of seeds 1 and 2 side by side (10 s), then seed 1's
    arms (5 s each) two by two, then seed 2's; a third run side by side slows them all by 3 / 2."""
    jobs = [ab_plan.Job(f"seed_{s}/warmup", s, 10.0) for s in (1, 2)]
    jobs += [ab_plan.Job(f"seed_{s}/{a}", s, 5.0, needs=f"seed_{s}/warmup") for s in (1, 2) for a in ARMS]
    order = [jobs[0], *jobs[2:6], jobs[1], *jobs[6:]]  # the runner's order: a seed's warm-up, then its arms
    spans = ab_plan.simulate(order, parallel=2, capacity=2)
    assert spans["seed_1/warmup"] == spans["seed_2/warmup"] == (0.0, 10.0)
    assert spans["seed_1/control"] == (10.0, 15.0) and spans["seed_1/pasr_cpu"] == (15.0, 20.0)
    assert max(end for _, end in spans.values()) == 30.0
    three = ab_plan.simulate([ab_plan.Job(f"j{i}", 1, 6.0) for i in range(3)], parallel=3, capacity=2)
    assert all(span == (0.0, 9.0) for span in three.values())


def test_the_plan_says_what_fits_the_budget():
    cfg = SimpleNamespace(
        rollout=SimpleNamespace(queries_per_step=8),
        pasr=SimpleNamespace(n_refine=4, n_plain=2),
        warmup=SimpleNamespace(steps=10),
    )
    basis = ab_plan.Basis("test", 2, 0.0, 0.0, 1.0, 1.0, 48, 0.0, 0.0)  # a warm-up step 1 s, an RL step 1 s
    args = SimpleNamespace(
        seeds=[1, 2], steps=20, parallel=2, eval_size=0, eval_sampled_k=0, budget_s=60.0, eval_reserve_s=0.0
    )
    p = ab_plan.plan(args, ARMS, cfg, basis)
    # warm-ups 10 s side by side, then 8 arms two by two: 10 + 4 * steps
    assert p["whole_s"] == 10 + 4 * 20 and p["steps_fit"] == 12 and p["seeds_fit"] == 1
    assert "1 of 2 seeds x 4 arms x 20 steps fit; all 2 seeds fit 12 steps" in ab_plan.plan_lines(p, ARMS)[-1]


def test_a_measured_result_is_the_plans_basis(tmp_path):
    measured = {"timings": {"measured": {"device_kind": "cpu", "parallel": 3, "rl_step_s": 7.0, "rollouts": 6}}}
    b = ab_plan.basis_for("cpu", measured)
    assert (b.rl_step_s, b.rollouts, b.capacity, b.warmup_step_s) == (7.0, 6, 3, ab_plan.CPU.warmup_step_s)
    assert ab_plan.basis_for("cuda", measured) == ab_plan.GPU  # measured on another kind of device


# --------------------------------------------------------------------------- statistics
def test_run_level_statistics_on_known_inputs():
    from scipy.stats import ttest_1samp

    values = {
        "s1": {"control": 0.50, "control_drift": 0.52, "pasr_paper": 0.50, "pasr_cpu": 0.60},
        "s2": {"control": 0.40, "control_drift": 0.37, "pasr_paper": 0.45, "pasr_cpu": 0.48},
        "s3": {"control": 0.60, "control_drift": 0.60, "pasr_paper": 0.58, "pasr_cpu": 0.65},
        "s4": {"control": 0.55, "control_drift": 0.56, "pasr_paper": 0.55, "pasr_cpu": 0.61},
    }
    out = ab_stats.run_level(values, ARMS)
    assert set(out) == {"control_drift", "pasr_paper", "pasr_cpu"}
    cpu = out["pasr_cpu"]
    diffs = [0.10, 0.08, 0.05, 0.06]
    assert list(cpu["per_seed"]) == ["s1", "s2", "s3", "s4"]
    assert cpu["per_seed"]["s1"] == pytest.approx(0.10) and cpu["mean"] == pytest.approx(0.0725)
    assert (cpu["up"], cpu["down"], cpu["same"], cpu["n"]) == (4, 0, 0, 4)
    assert cpu["p_sign"] == pytest.approx(0.125)  # 4 of 4 up: 2 / 16
    assert cpu["p_t"] == pytest.approx(ttest_1samp(diffs, 0).pvalue)
    assert cpu["p_wilcoxon"] == pytest.approx(0.125)  # exact (four sizes): all on one side, 2 / 16
    d = cpu["vs_drift"]
    drift = [0.02, -0.03, 0.0, 0.01]
    assert d["drift_rms"] == pytest.approx(math.sqrt(sum(x * x for x in drift) / 4))
    assert d["drift_mean_abs"] == pytest.approx(0.015)
    assert d["beyond_drift"] and d["seeds_up_beyond_drift"] == 4 and d["most_seeds_up_beyond_drift"]
    paper = out["pasr_paper"]  # 0, +0.05, -0.02, 0: beyond its seed's drift only on s2 (0.05 > 0.03)
    assert (paper["up"], paper["down"], paper["same"]) == (1, 1, 2)
    assert paper["vs_drift"]["seeds_up_beyond_drift"] == 1 and paper["vs_drift"]["seeds_down_beyond_drift"] == 1
    assert not paper["vs_drift"]["most_seeds_up_beyond_drift"]
    assert out["control_drift"]["vs_drift"] is None and out["control_drift"]["mean"] == pytest.approx(0.0)


def test_degenerate_seed_differences():
    assert ab_stats.t_test_p([0.1]) is None  # one seed: no spread to test against
    assert ab_stats.t_test_p([0.0, 0.0]) == 1.0
    assert ab_stats.t_test_p([0.1, 0.1]) is None
    s = ab_stats.over_seeds([])
    assert s["n"] == 0 and s["mean"] is None and s["p_sign"] == 1.0


def test_run_level_refuses_a_seed_without_an_arm():
    values = {"s1": {"control": 0.5, "control_drift": 0.5, "pasr_paper": 0.6, "pasr_cpu": None}}
    with pytest.raises(ab_stats.MissingArm, match="s1: no value for pasr_cpu"):
        ab_stats.run_level(values, ARMS)
    with pytest.raises(ab_stats.MissingArm, match="need the control and control_drift arms"):
        ab_stats.run_level({}, ("control", "pasr_cpu"))


# --------------------------------------------------------------------------- the report, from files
def test_report_from_files(tmp_path, capsys):
    root, out = write_run(tmp_path / "run"), tmp_path / "ab.json"
    assert pasr_ab.main(["--report", str(root), "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["complete"] and not result["seeds_left_out"] and result["arms"] == list(ARMS)
    for name, seed in result["seeds"].items():
        s = int(name.removeprefix("seed_"))
        assert seed["usable"]
        for run in ("warmup", *ARMS):
            r = seed["runs"][run]
            assert r["status"] == "evaluated" and r["greedy"]["acc"] == pytest.approx(CORRECT[s][run] / N)
            assert r["sampled"]["k"] == 2 and r["step"] == (0 if run == "warmup" else 3)
        assert seed["runs"]["control_drift"]["config"]["rollout.seed"] == s + 1000
    greedy = result["stats"]["greedy"]
    assert greedy["seeds"] == ["seed_1", "seed_2", "seed_3"]
    cpu = greedy["arms"]["pasr_cpu"]
    assert [round(v, 3) for v in cpu["per_seed"].values()] == [0.15, 0.1, 0.15]
    assert cpu["vs_drift"]["seeds_up_beyond_drift"] == 3 and cpu["vs_drift"]["drift_rms"] == pytest.approx(
        math.sqrt((0.05**2 + 0.05**2) / 3)
    )
    assert greedy["arms"]["pasr_paper"]["vs_drift"]["seeds_up_beyond_drift"] == 0  # +0.05 against a drift of 0.05
    assert greedy["pooled"]["pasr_cpu"] == {"wins": 8, "losses": 0, "p": pytest.approx(2 / 256)}  # questions: secondary
    sampled = result["stats"]["mean_at_k"]["arms"]["pasr_cpu"]
    # each arm's wrong questions get one right sample of two in pasr_cpu: mean@2 = right + wrong / 2
    expect = [
        (CORRECT[s]["pasr_cpu"] + (N - CORRECT[s]["pasr_cpu"]) / 2 - CORRECT[s]["control"]) / N for s in (1, 2, 3)
    ]
    assert list(sampled["per_seed"].values()) == pytest.approx(expect)
    assert result["verdict"]["by_arm"]["pasr_cpu/greedy"]["most_seeds"] and result["verdict"]["headline"]
    term = result["refine_term"]
    assert term["control_drift"]["mixed_first_step"] == {f"seed_{s}": MIXED["control_drift"] for s in (1, 2, 3)}
    assert term["control"]["seeds_mixed_at_target"] == 3 and term["control_drift"]["seeds_mixed_at_target"] == 3
    assert term["pasr_cpu"]["live_mean"] == pytest.approx(0.25) and term["control"]["live_mean"] == 0.0
    assert term["pasr_cpu"]["refine_rate_curve"] == {"1": 0.5, "2": 0.6, "3": 0.7}  # JSON keys
    assert result["timings"]["measured"]["rl_step_s"] == 5.0
    printed = capsys.readouterr().out
    assert (
        "| seed_2 | pasr_paper | 3 | 0.650 |" in printed and "| greedy | pasr_cpu | +0.150 +0.100 +0.150 |" in printed
    )
    assert json.loads(out.read_text()) == json.loads(json.dumps(build_result(root)))  # from the files alone


def test_a_seed_without_an_arm_is_left_out_by_name(tmp_path, capsys):
    """The run-level statistics must not average over a seed that lacks an arm: seed 2's
    pasr_paper was stopped before its first checkpoint, so seed 2 is left out, said so, and the
    command exits 1; the statistics run over seeds 1 and 3 alone."""
    root, out = write_run(tmp_path / "run"), tmp_path / "ab.json"
    shutil.rmtree(root / "seed_2" / "pasr_paper" / "eval")
    write_log(root, "seed_2/pasr_paper", rc=130, signals=[[20.0, "SIGINT", 1]])
    assert pasr_ab.main(["--report", str(root), "--out", str(out)]) == 1
    result = json.loads(out.read_text())
    assert not result["complete"]
    assert "pasr_paper (stopped before its first checkpoint: signal SIGINT)" in result["seeds_left_out"]["seed_2"]
    run = result["seeds"]["seed_2"]["runs"]["pasr_paper"]
    assert run["status"] == "stopped before its first checkpoint" and "greedy" not in run  # no row of None
    for kind in ("greedy", "mean_at_k"):
        s = result["stats"][kind]
        assert s["seeds"] == ["seed_1", "seed_3"]
        assert all(set(a["per_seed"]) == {"seed_1", "seed_3"} for a in s["arms"].values())
    printed = capsys.readouterr().out
    assert "| seed_2 | pasr_paper | stopped before its first checkpoint: signal SIGINT |" in printed
    assert "seed_2 left out of the statistics: missing pasr_paper" in printed


def test_no_seed_with_every_arm_writes_nothing(tmp_path, capsys):
    root, out = write_run(tmp_path / "run"), tmp_path / "ab.json"
    out.write_text('{"committed": true}\n')
    for s in (1, 2, 3):
        shutil.rmtree(root / f"seed_{s}" / "control")  # never ran
        (root / f"seed_{s}_control.log").unlink()
    assert pasr_ab.main(["--report", str(root), "--out", str(out)]) == 2
    assert json.loads(out.read_text()) == {"committed": True}
    err = capsys.readouterr().err
    assert "no seed has its warm-up and all four arms evaluated" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("what", ["missing", "empty", "settings only"])
def test_report_refuses_a_directory_without_a_run(tmp_path, capsys, what):
    root, out = tmp_path / "run", tmp_path / "ab.json"
    out.write_text('{"committed": true}\n')
    if what != "missing":
        root.mkdir()
    if what == "settings only":
        (root / "settings.json").write_text('{"seeds": [1]}')
    assert pasr_ab.main(["--report", str(root), "--out", str(out)]) == 2
    assert json.loads(out.read_text()) == {"committed": True}
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"pasr_ab: --report {root}")


# --------------------------------------------------------------------------- the scheduler, on a stand-in trainer
def _fake_cmds(root: Path, seeds, warm_steps=2, arm_steps=3, step_s=0.2, fail=()) -> dict[str, list[str]]:
    script = str(Path(__file__).with_name("ab_fake_trainer.py"))
    cmds = {}
    for s in seeds:
        for run in ("warmup", *ARMS):
            name = f"seed_{s}/{run}"
            kind, steps = ("warmup", warm_steps) if run == "warmup" else ("arm", arm_steps)
            cmds[name] = [sys.executable, script, "--run-dir", str(root / name), "--kind", kind, "--steps", str(steps)]
            cmds[name] += ["--step-s", str(step_s), *(["--fail"] if name in fail else [])]
    return cmds


def _runner(tmp_path, cmds, parallel=2, budget_s=60.0, stop_in_s=None, steps=3, expected=0.0, step_s=1.0):
    from benchmarks.gpu_phases import Progress

    root = tmp_path / "run"
    root.mkdir(exist_ok=True)
    progress = Progress(root, "ab", tmp_path / "out.json", budget_s, name="pasr_ab", build=lambda _: {})
    args = SimpleNamespace(parallel=parallel, steps=steps, keep_checkpoints=True, seeds=[1, 2])
    plan = {"start_s": expected, "eval_s": 0.0, "steps_asked": steps, "rl_step_s": step_s}
    plan |= {"warmup_steps": 2, "warmup_step_s": 0.0}
    cfg = SimpleNamespace(warmup=SimpleNamespace(steps=2))
    stop_at = time.monotonic() + (stop_in_s if stop_in_s is not None else budget_s)
    return pasr_ab.Runner(args, root, cmds, cfg, plan, progress, stop_at), root


def _order(root: Path) -> list[tuple[float, str, str]]:
    lines = (root / "order.log").read_text().split("\n")  # in the order written: start before end
    return [(float(t), what, name) for t, what, name in (x.split() for x in lines if x)]


def test_the_runner_runs_a_seeds_warmup_then_its_arms_two_at_a_time(tmp_path):
    runner, root = _runner(tmp_path, {})
    runner.cmds = cmds = _fake_cmds(root, (1, 2), fail=("seed_2/warmup",))
    runner.pending = list(cmds)
    runner.loop()
    order = _order(root)
    started = [n for _, what, n in order if what == "start"]
    assert set(started[:2]) == {"seed_1/warmup", "seed_2/warmup"}  # nothing else is ready yet
    assert set(started[2:]) == {f"seed_1/{a}" for a in ARMS}  # seed 2's warm-up failed: its arms never start
    going, most = set(), 0
    for _, what, name in order:
        going = going | {name} if what == "start" else going - {name}
        most = max(most, len(going))
    assert most == 2
    ends = {n: t for t, what, n in order if what == "end"}
    assert all(t >= ends["seed_1/warmup"] for t, what, n in order if what == "start" and n.startswith("seed_1/c"))
    assert all("its warm-up left no checkpoint" in runner.skipped[f"seed_2/{a}"] for a in ARMS)
    assert all(runner.ended[f"seed_1/{a}"].rc == 0 for a in ARMS)


def test_a_run_that_cannot_end_before_the_stop_time_is_not_started(tmp_path):
    runner, root = _runner(tmp_path, {}, stop_in_s=30.0, expected=40.0)
    runner.cmds = _fake_cmds(root, (1,))
    runner.pending = list(runner.cmds)
    runner.loop()
    assert not (root / "order.log").exists()
    assert "expected to end after the budget's stop time" in runner.skipped["seed_1/warmup"]


def test_a_slow_start_seen_in_the_first_run_keeps_later_runs_from_starting(tmp_path):
    """The plan expects a start of 0 s (the last loan's machine); this one's runs take 3 s to
    start. The warm-up shows it, so the arms, which the plan would start (3 steps of 1 s end
    before the stop time), are expected to end after it and are not started: no run is cut."""
    runner, root = _runner(tmp_path, {}, stop_in_s=8.5, steps=3, step_s=1.0)
    runner.cmds = _fake_cmds(root, (1,), warm_steps=2, arm_steps=3, step_s=0.2)
    for name, cmd in runner.cmds.items():
        cmd += ["--start-s", "3.0"]
        if not name.endswith("warmup"):
            cmd[cmd.index("--step-s") + 1] = "1.0"
    runner.pending = list(runner.cmds)
    runner.loop()
    assert runner.ended["seed_1/warmup"].rc == 0
    for arm in ARMS:
        why = runner.skipped[f"seed_1/{arm}"]
        assert "expected to end after the budget's stop time" in why and "this run's start" in why, why
    assert all(r.signals == [] for r in runner.ended.values())


def test_at_the_stop_time_a_seeds_arms_stop_after_one_same_step(tmp_path):
    """Four arms side by side, asked for 50 steps: at the stop time each gets SIGINT during the
    step after the furthest one's, finishes it, checkpoints it and exits."""
    runner, root = _runner(tmp_path, {}, parallel=4, stop_in_s=6.0, steps=50, step_s=0.01)  # a plan too hopeful
    runner.cmds = _fake_cmds(root, (1,), arm_steps=50, step_s=0.5)
    runner.pending = list(runner.cmds)
    runner.loop()
    steps = set()
    for arm in ARMS:
        run = runner.ended[f"seed_1/{arm}"]
        assert run.rc == 130 and run.signals[0][1] == "SIGINT"
        steps.add((root / "seed_1" / arm / "checkpoints" / "latest").read_text())
    assert len(steps) == 1 and steps != {"step_000050"}  # all four at one step, short of the 50 asked


# --------------------------------------------------------------------------- rollout.seed
def test_rollout_seed_changes_the_rollouts_and_not_the_queries(tmp_path, tiny_model_dir):
    """The drift arm's premise: ``rollout.seed`` alone changes what the rollouts sample, not which
    queries a step takes; left unset it is ``trainer.seed`` (the same run to the token)."""
    from pasr_cli import main

    def run(name: str, *extra: str) -> list[list[tuple[str, str]]]:
        d = tmp_path / name
        argv = ["train", "--preset", "tiny", "--run-dir", str(d), f"model.path={tiny_model_dir}", "model.threads=1"]
        argv += ["warmup.steps=0", "trainer.steps=2", "trainer.eval_at_start=false", "trainer.eval_after_warmup=false"]
        argv += ["trainer.eval_at_end=false", "trainer.seed=3", *extra]
        assert main(argv) == 0
        return [
            [(r["query_id"], r["response"]) for r in map(json.loads, (d / "rollouts" / f"step_{s:06d}.jsonl").open())]
            for s in (1, 2)
        ]

    plain, same, other = run("a"), run("b", "rollout.seed=3"), run("c", "rollout.seed=1003")
    assert plain == same
    for step_a, step_c in zip(plain, other):
        assert [q for q, _ in step_a] == [q for q, _ in step_c]
        assert [r for _, r in step_a] != [r for _, r in step_c]
    assert yaml.safe_load((tmp_path / "c" / "config.yaml").read_text())["rollout"]["seed"] == 1003


# --------------------------------------------------------------------------- the real engine, tiny
@pytest.mark.slow  # ten subprocess training runs of the tiny model, two at a time: minutes on 2 busy cores
def test_two_seeds_end_to_end_on_the_tiny_model_then_the_report(tmp_path, tiny_cpu_args, capsys):
    root, out = tmp_path / "run", tmp_path / "ab.json"
    argv = [*tiny_cpu_args, "--seeds", "1", "2", "--steps", "2", "--eval-size", "4", "--sampled-k", "2"]
    argv += ["--dtype", "float32", "--run-dir", str(root), "--out", str(out), "--budget-s", "1200"]
    assert pasr_ab.main(argv) == 0
    result = json.loads(out.read_text())
    assert result["complete"] and set(result["seeds"]) == {"seed_1", "seed_2"}
    assert set(result["timings"]["phases"]) == {"runs", "evals"}
    for name, seed in result["seeds"].items():
        s = int(name.removeprefix("seed_"))
        for run in ("warmup", *ARMS):
            r = seed["runs"][run]
            assert r["status"] == "evaluated" and r["greedy"]["n"] == 4 and r["sampled"]["k"] == 2
            cfg = yaml.safe_load((root / name / run / "config.yaml").read_text())
            assert cfg["warmup"]["seed"] == cfg["trainer"]["seed"] == s and cfg["warmup"]["lr_schedule"] == "cosine"
            assert cfg["model"]["rollout_dtype"] == "float32"
        assert all(seed["runs"][a]["step"] == 2 for a in ARMS)
        assert seed["runs"]["control_drift"]["config"]["rollout.seed"] == s + 1000
        assert all(seed["runs"][a]["refine_term"]["mixed_first_step"] is not None for a in ARMS)
        dumps = {a: [json.loads(x) for x in (root / name / a / "rollouts" / "step_000001.jsonl").open()] for a in ARMS}
        ids = {a: [r["query_id"] for r in d] for a, d in dumps.items()}
        assert ids["control"] == ids["control_drift"] == ids["pasr_cpu"]  # one data order per seed
        texts = {a: [r["response"] for r in d] for a, d in dumps.items()}
        assert texts["control"] == texts["pasr_cpu"] != texts["control_drift"]  # step 1: one policy, two seeds
        assert not (root / name / "pasr_cpu" / "checkpoints").exists()  # pruned once evaluated
    for kind in ("greedy", "mean_at_k"):
        assert result["stats"][kind]["seeds"] == ["seed_1", "seed_2"]
    again = tmp_path / "again.json"
    assert pasr_ab.main(["--report", str(root), "--out", str(again)]) == 0
    assert json.loads(again.read_text())["stats"] == result["stats"]
    assert "| seed_2 | pasr_cpu | 2 |" in capsys.readouterr().out
