"""``recipe/scripts/gpu_check.sh`` (benchmarks/gpu_check.py) on a machine without a GPU: the verl
runs it starts are composed and checked like ``recipe.main_pasr`` does and train what the local
engine trains; the orchestration (warm-up, a SIGTERM during a step, the checkpoint it must leave,
the resume, evaluations, the JSON) runs end to end against ``tests/fake_verl_driver.py``, which
stops through the recipe's real ``DriverStopHandler`` and ``StopAwareLoader``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import gpu_check
from benchmarks.gpu_check import local_settings, parse_args, verl_overrides
from benchmarks.watched_run import parse_step_line

FAKE = str(Path(__file__).with_name("fake_verl_driver.py"))
REQUIRED = ("device", "wall_s", "steps", "resumed", "warmup", "pasr", "p_pasr_vs_warmup", "timings")
ROW = ("acc", "format", "refine_rate", "refine_fix_rate")


def test_step_line_is_read_through_rays_prefix():
    line = (
        "(PasrTaskRunner pid=7) step:12 - timing_s/gen:3.25 - pasr/acc_refine:np.float64(0.5) - note:abc"
        " - perf/x:1e-3 - actor/lr:np.float64(-2.5e-06)"
    )  # numpy 2 scalars as verl's console prints them
    step, metrics = parse_step_line(line)
    assert step == 12
    assert metrics == {"timing_s/gen": 3.25, "pasr/acc_refine": 0.5, "perf/x": 0.001, "actor/lr": -2.5e-06}
    assert parse_step_line("Training Progress: step 3") is None


def test_verl_runs_train_what_the_local_engine_trains(tmp_path):
    """The composed verl config has the local default's reward, group sizes, batch, budget and
    optimizer, and passes the recipe's preflight (GPU and vLLM seams aside)."""
    from recipe.verl_engine.config import compose_config, pasr_config, preflight

    args = parse_args([])
    args.steps = 10
    cfg = local_settings(args)
    config = compose_config(
        verl_overrides(args, cfg, tmp_path / "t.parquet", tmp_path / "v.parquet", tmp_path / "warm", tmp_path / "ckpt")
    )
    preflight(config, local_gpus=lambda: 1, find_module=lambda name: True)
    verl_pasr, local = pasr_config(config), cfg.pasr
    for key in (
        "n_refine",
        "n_plain",
        "tie_value",
        "zeta",
        "empty_refine_value",
        "refine_compare",
        "weights",
        "prompts",
        "prefill_think",
    ):
        assert getattr(verl_pasr, key) == getattr(local, key), key
    ar = config.actor_rollout_ref
    assert ar.rollout.n == local.n_refine
    assert config.data.train_batch_size == ar.actor.ppo_mini_batch_size == cfg.rollout.queries_per_step
    assert config.data.max_response_length == cfg.rollout.max_new_tokens
    assert ar.rollout.temperature == cfg.rollout.temperature
    assert ar.actor.optim.lr == cfg.algo.lr and ar.actor.optim.lr_warmup_steps == cfg.algo.lr_warmup_steps
    assert ar.actor.optim.weight_decay == 0.0
    assert ar.actor.kl_loss_coef == cfg.algo.kl_coef and ar.actor.use_kl_loss
    assert config.trainer.total_training_steps == 10 and config.trainer.n_gpus_per_node == 1
    assert not config.trainer.val_before_train and config.trainer.test_freq == -1
    # the small-model start-up (setup=small_one_gpu): eager vLLM without the FlashInfer autotune (verl
    # passes it to vllm serve), one agent-loop worker, no DataLoader workers, no compile, no dashboard
    assert ar.rollout.enforce_eager and ar.rollout.engine_kwargs.vllm.enable_flashinfer_autotune is False
    assert ar.rollout.agent.num_workers == 1 and config.data.dataloader_num_workers == 0
    assert not ar.actor.use_torch_compile and config.ray_kwargs.ray_init.include_dashboard is False
    assert ar.rollout.tensor_model_parallel_size == 1 and config.trainer.nnodes == 1
    assert cfg.rollout.queries_per_step == args.queries_per_step == 16


def test_dry_run_prints_every_command(capsys):
    assert gpu_check.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    for what in ("warm-up:", "verl:", "local:", "eval:"):
        assert what in out
    assert "recipe.main_pasr" in out
    # the <think> prefill in both engines (the local preset's, given to verl), turned off nowhere
    assert "pasr.prefill_think=true" in out and "prefill_think=false" not in out
    # on the GPU (the default device) the local engine generates a step's rollouts in one batch
    local = next(line for line in out.splitlines() if line.startswith("local:"))
    assert "rollout.gen_batch_size=256" in local


def test_on_the_cpu_the_local_engine_keeps_its_presets_generation_batch(capsys):
    assert gpu_check.main(["--dry-run", "--device", "cpu"]) == 0
    local = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("local:"))
    assert "model.device=cpu" in local and "gen_batch_size" not in local


def test_stop_at_must_fall_inside_the_run():
    with pytest.raises(SystemExit, match="--stop-at"):
        gpu_check.main(["--part", "all", "--dry-run", "--steps", "3", "--stop-at", "3"])


def _run(tmp_path, tiny_cpu_args, *extra) -> dict:
    out = tmp_path / "gpu_check.json"
    gpu_check.main(
        [
            "--part",
            "all",
            *tiny_cpu_args,
            "--verl-driver",
            FAKE,
            "--steps",
            "4",
            "--stop-at",
            "2",
            "--stop-delay-s",
            "0.1",
            "--eval-size",
            "4",
            "--run-dir",
            str(tmp_path / "run"),
            "--out",
            str(out),
            *extra,
        ]
    )
    return json.loads(out.read_text())


@pytest.mark.slow  # minutes of subprocess training runs: make test-slow
def test_sigterm_during_a_step_checkpoints_it_and_the_same_command_resumes(tmp_path, tiny_cpu_args):
    result = _run(tmp_path, tiny_cpu_args)
    assert all(k in result for k in REQUIRED)
    for row in ("warmup", "pasr", "local_pasr"):
        assert all(k in result[row] for k in ROW) and result[row]["n"] == 4
    checks = dict(result["checks"])
    machinery = {name: ok for name, ok in checks.items() if not name.startswith("verl PASR above")}
    assert all(machinery.values()), machinery
    stop = result["stop"]
    assert stop["during_step"] == 2 and stop["checkpoint"] == 2 and stop["steps_run"] == [1, 2] and stop["stopped_line"]
    assert result["resumed"] and result["steps"] == 4
    timings = result["timings"]
    assert timings["startup_run2"]["fit_start"] is not None and timings["mean_step"]["step"] == pytest.approx(0.4)
    assert {"warmup", "verl_run1", "verl_run2", "final_eval"} <= set(timings["phases"])
    # a tiny random model learns nothing: PASS needs the learning check too
    assert not result["passed"]


@pytest.mark.slow  # minutes of subprocess training runs: make test-slow
def test_a_driver_that_dies_on_sigterm_fails_the_stop_checks(tmp_path, tiny_cpu_args, tiny_model_dir, monkeypatch):
    """Without the recipe's stop handler SIGTERM kills the driver mid-step: no checkpoint of that
    step, so run 2 starts over; the checks say so and the JSON is still written."""
    monkeypatch.setenv("FAKE_VERL_NO_STOP_HANDLER", "1")
    result = _run(tmp_path, tiny_cpu_args, "--no-local", "--warmup-model", str(tiny_model_dir))
    checks = dict(result["checks"])
    assert checks["run 1 got SIGTERM during a step (step 2)"]
    assert not checks["run 1 exited 0 after the SIGTERM"]
    assert not any(ok for name, ok in checks.items() if name.startswith("run 1 checkpointed"))
    assert not result["resumed"] and result["stop"]["checkpoint"] is None
    assert result["local_pasr"] is None and result["warmup"]["n"] == 4


@pytest.mark.slow  # minutes of subprocess training runs: make test-slow
def test_the_check_in_two_commands_first_then_resume(tmp_path, tiny_cpu_args):
    """``--part first`` (warm-up, run 1 stopped) leaves a result that says it is not complete;
    ``--part resume`` in the same run directory finishes it with the same checks as one command."""
    first = _run(tmp_path, tiny_cpu_args, "--no-local", "--part", "first")
    assert not first["complete"] and first["pasr"] is None and first["warmup"]["n"] == 4
    assert first["stop"]["checkpoint"] == 2 and first["stop"]["rc"] == 0 and first["steps"] == 2
    assert set(first["timings"]["parts"]) == {"first"}
    result = _run(tmp_path, tiny_cpu_args, "--no-local", "--part", "resume")
    assert result["complete"] and result["resumed"] and result["steps"] == 4 and result["pasr_step"] == 4
    assert set(result["timings"]["parts"]) == {"first", "resume"}
    machinery = {name: ok for name, ok in result["checks"] if not name.startswith("verl PASR above")}
    assert all(machinery.values()), machinery
    assert result["wall_s"] == pytest.approx(sum(p["wall_s"] for p in result["timings"]["parts"].values()), abs=0.2)


def test_resume_needs_the_first_parts_directory(tmp_path):
    with pytest.raises(SystemExit, match="--part first"):
        gpu_check.main(["--part", "resume", "--run-dir", str(tmp_path / "nothing")])


@pytest.mark.slow  # minutes of subprocess training runs: make test-slow
def test_report_rebuilds_a_cut_off_run_from_its_files(tmp_path, tiny_cpu_args):
    """A command killed by a machine's time limit leaves no sidecar for its last run: ``--report``
    rebuilds the result from the logs, reading the stop from the driver's own lines and leaving
    the unknown exit code unknown (a failed check, not a guess)."""
    whole = _run(tmp_path, tiny_cpu_args, "--no-local")
    root = tmp_path / "run"
    rebuilt = tmp_path / "rebuilt.json"
    assert gpu_check.main(["--report", str(root), "--out", str(rebuilt)]) == 1  # nothing learned: FAIL
    again = json.loads(rebuilt.read_text())
    for key in ("steps", "resumed", "stop", "warmup", "pasr", "p_pasr_vs_warmup", "checks", "train_metrics"):
        assert again[key] == whole[key], key

    (root / "verl_1.log.events.json").unlink()
    gpu_check.main(["--report", str(root), "--out", str(rebuilt)])
    cut = json.loads(rebuilt.read_text())
    stop = cut["stop"]
    assert (
        stop["source"] == "driver log" and stop["during_step"] == 2 and stop["checkpoint"] == 2 and stop["rc"] is None
    )
    checks = dict(cut["checks"])
    assert checks["run 1 checkpointed the step it was in (global_step_2) and stopped there"]
    assert not checks["run 1 exited 0 after the SIGTERM (exit code not recorded)"]


# --------------------------------------------------------------------------- --part learn
def test_the_trend_test_needs_the_same_sign_and_a_difference_within_noise():
    from benchmarks.gpu_check_report import curves_agree, third_change

    assert third_change([0.5] * 5) is None  # thirds of one step have no spread
    up = third_change([0.2, 0.3, 0.25, 0.4, 0.5, 0.6, 0.55, 0.65, 0.6])
    assert up["change"] == pytest.approx((0.6 + 0.55 + 0.65) / 3 - 0.25) and up["se"] > 0
    alike = third_change([0.25, 0.2, 0.3, 0.4, 0.45, 0.5, 0.6, 0.65, 0.55])
    down = third_change([0.6, 0.55, 0.65, 0.4, 0.5, 0.3, 0.25, 0.2, 0.3])
    assert curves_agree(up, alike)["agree"]
    against = curves_agree(down, up)
    assert not against["same_sign"] and not against["agree"]
    # the same sign but far apart: |z| beyond 1.96 standard errors
    steep = third_change([0.0, 0.01, 0.0, 0.5, 0.5, 0.5, 0.99, 1.0, 0.99])
    shallow = third_change([0.40, 0.41, 0.40, 0.45, 0.45, 0.45, 0.50, 0.51, 0.50])
    far = curves_agree(steep, shallow)
    assert far["same_sign"] and not far["within_noise"] and not far["agree"]
    assert not curves_agree(None, up)["agree"]


def test_wait_for_model_waits_for_the_folder_and_no_longer(tmp_path):
    import threading
    import time

    from recipe.verl_engine.config import wait_for_model

    model = tmp_path / "warm"
    threading.Timer(0.3, model.mkdir).start()
    t0 = time.monotonic()
    wait_for_model(str(model), timeout_s=30, poll_s=0.05)
    assert model.is_dir() and time.monotonic() - t0 < 10
    t0 = time.monotonic()
    wait_for_model("HuggingFaceTB/SmolLM2-135M-Instruct", timeout_s=30)  # a hub name: the loader's business
    wait_for_model(str(tmp_path / "never"), timeout_s=0)  # 0: read at once
    assert time.monotonic() - t0 < 1
    wait_for_model(str(tmp_path / "never"), timeout_s=0.2, poll_s=0.05)  # gives up; the loader then says why


def test_learn_dry_run_starts_verl_before_its_warm_up_and_plans_from_the_last_run(tmp_path, capsys):
    measured = {
        "device": "NVIDIA H200",
        "commit": "abc",
        "timings": {
            "phases": {"warmup": 50.0, "data": 0.5, "merge": 18.0, "final_evals": 30.0},
            "startup": {"to_first_step": 150.0},
            "first_step": {"step": 40.0},
            "mean_step": {"step": 7.0},
        },
    }
    plan = tmp_path / "measured.json"
    plan.write_text(json.dumps(measured))
    assert gpu_check.main(["--dry-run", "--plan-from", str(plan)]) == 0
    out = capsys.readouterr().out
    assert "# the composed verl config" in out and "wait_for_model_s: 430.0" in out
    warm = next(line for line in out.splitlines() if line.startswith("warm-up:"))
    assert "warmup.lr_schedule=cosine" in warm and "trainer.eval_after_warmup=false" in warm
    local = next(line for line in out.splitlines() if line.startswith("local:"))
    assert "trainer.save_every=1" in local and "trainer.steps=40" in local
    assert "algo.skip_zero_adv=false" in local  # the parity run keeps zero-advantage rows, as verl does
    assert "skip_zero_adv" not in warm
    # verl starts at once: first step at 0.5 + 150 s, done at 190.5; SIGTERM at 430 - 75 = 355: 1 + 23 steps
    assert "about 24 verl steps (at most 40)" in out
    # an older run (warm-up before verl): verl would have waited for a warm-up longer than its task runner's start
    measured["timings"]["startup_run1"] = {**measured["timings"].pop("startup"), "task_runner": 30.0}
    plan.write_text(json.dumps(measured))
    assert gpu_check.main(["--dry-run", "--plan-from", str(plan)]) == 0
    assert "verl waits 20 s more" in capsys.readouterr().out


def _learn(tmp_path, tiny_cpu_args, *extra) -> dict:
    out = tmp_path / "gpu_check.json"
    gpu_check.main(
        [
            "--part",
            "learn",
            *tiny_cpu_args,
            "--verl-driver",
            FAKE,
            "--eval-size",
            "4",
            "--run-dir",
            str(tmp_path / "run"),
            "--out",
            str(out),
            "--commit",
            "c0ffee",
            *extra,
        ]
    )
    return json.loads(out.read_text())


@pytest.mark.slow  # minutes of subprocess training runs: make test-slow
def test_learn_runs_verl_beside_its_warm_up_and_compares_the_engines_at_the_same_step(tmp_path, tiny_cpu_args):
    result = _learn(tmp_path, tiny_cpu_args, "--steps", "6", "--budget-s", "400", "--verl-env", "GPU_CHECK_PROBE=a=b")
    assert result["part"] == "learn" and result["complete"] and result["commit"] == "c0ffee"
    assert result["steps"] == 6 and result["stopped_by_deadline"] is None  # finished on its own
    verl_log = (tmp_path / "run" / "verl.log").read_text()
    assert "pasr verl: model" in verl_log and "there after" in verl_log  # it waited for the warm-up
    assert "GPU_CHECK_PROBE=a=b" in verl_log and result["settings"]["verl_env"] == {"GPU_CHECK_PROBE": "a=b"}
    for row in ("warmup", "verl", "local"):
        assert result[row]["n"] == 4 and "refine_break_rate" in result[row]
    assert result["verl_step"] == result["local_step"] == 6
    assert result["curves"]["verl"]["step"] == result["curves"]["local"]["step"] == [1, 2, 3, 4, 5, 6]
    assert result["curves"]["verl"]["pasr/acc_refine"] == [0.5, 0.25, 0.75, 0.5, 0.5, 0.25]
    assert all(v is not None for v in result["curves"]["local"]["actor/lr"])
    assert set(result["tests"]) == {"verl_vs_warmup", "local_vs_warmup", "verl_vs_local"}
    sampled = result["sampled"]  # mean@4 at T=0.5 beside each greedy row, tests on per-question means
    assert all(sampled["rows"][row]["n"] == 4 and sampled["rows"][row]["k"] == 4 for row in ("warmup", "verl", "local"))
    assert all(sampled["tests"][t]["n"] == 4 for t in result["tests"])
    assert {"data", "warmup", "verl", "warmup_eval", "local", "merge", "final_evals"} <= set(
        result["timings"]["phases"]
    )
    assert result["timings"]["startup"]["task_runner"] is not None
    checks = dict(result["checks"])
    assert checks["verl trained at least 6 steps and checkpointed its last (step 6)"]
    assert checks["verl's final checkpoint merged and evaluated"]
    assert checks["the local engine evaluated at the same step (6)"]
    # --report rebuilds the same result from the files alone
    rebuilt = tmp_path / "rebuilt.json"
    gpu_check.main(["--report", str(tmp_path / "run"), "--out", str(rebuilt)])
    again = json.loads(rebuilt.read_text())
    for key in ("steps", "warmup", "verl", "local", "tests", "sampled", "curves", "trend", "checks"):
        assert again[key] == result[key], key


def _learn_under_timeout(tmp_path, tiny_cpu_args, timeout_s: int, env: dict, *extra):
    """``--part learn`` as ``gpu_loan.sh`` runs it: under ``timeout``, with ``CHECK_TIMEOUT_S``
    exported. Returns the exit code and the JSON."""
    import os
    import subprocess
    import sys

    out = tmp_path / "gpu_check.json"
    cmd = ["timeout", str(timeout_s), sys.executable, "-m", "benchmarks.gpu_check", "--part", "learn"]
    cmd += [*tiny_cpu_args, "--verl-driver", FAKE, "--eval-size", "4", "--run-dir", str(tmp_path / "run")]
    cmd += ["--out", str(out), "--commit", "c0ffee", *extra]
    env = {**os.environ, "CHECK_TIMEOUT_S": str(timeout_s), **env}
    proc = subprocess.run(cmd, cwd=Path(gpu_check.__file__).parents[1], env=env, capture_output=True, text=True)
    return proc.returncode, json.loads(out.read_text()), proc.stdout + proc.stderr


@pytest.mark.slow  # minutes of subprocess training runs: make test-slow
def test_learn_under_a_slow_start_ends_itself_with_both_engines_evaluated_at_one_step(
    tmp_path, tiny_cpu_args, tiny_model_dir
):
    """A slow start-up (20 s, scaled down from a fresh H200's 254) and verl stepping faster than
    the local engine (as on the H200): the check stops verl where the local engine, at the pace
    it measures, can reach the same step and evaluate it, and ends itself inside the command's
    timeout with every row, not by the timeout."""
    rc, result, output = _learn_under_timeout(
        tmp_path,
        tiny_cpu_args,
        130,
        {"FAKE_VERL_START_S": "20", "FAKE_VERL_STEP_S": "0.5"},
        *("--warmup-model", str(tiny_model_dir), "--steps", "60", "--budget-s", "400", "--eval-reserve-s", "10"),
    )
    assert rc != 124, output[-3000:]  # not ended by the timeout
    assert "--budget-s 400 cut to 115" in output and result["settings"]["budget_s"] == 115
    k = result["steps"]
    assert result["verl_stop"] and "local engine" in result["verl_stop"] and 1 <= k < 60
    assert result["complete"] and result["missing"] == {}
    assert result["verl_step"] == result["local_step"] == k and result["curves"]["verl"]["step"][-1] == k
    assert all(result[row]["n"] == 4 for row in ("warmup", "verl", "local"))
    assert dict(result["checks"])[f"the local engine evaluated at the same step ({k})"]


@pytest.mark.slow  # a minute of subprocess runs: make test-slow
def test_a_start_up_longer_than_the_budget_is_reported_as_stopped_before_its_first_checkpoint(
    tmp_path, tiny_cpu_args, tiny_model_dir
):
    rc, result, output = _learn_under_timeout(
        tmp_path,
        tiny_cpu_args,
        60,
        {"FAKE_VERL_START_S": "300"},
        *("--warmup-model", str(tiny_model_dir), "--steps", "6", "--eval-reserve-s", "10"),
    )
    assert rc not in (0, 124), output[-3000:]  # failed, by itself
    assert result["steps"] is None and result["verl"] is None and result["local"] is None
    assert result["missing"]["verl"]["status"] == "stopped before its first checkpoint"
    assert "first step" in result["missing"]["verl"]["why"]
    assert result["missing"]["local"] == {"status": "no checkpoint to compare", "why": "verl left none"}
    assert result["warmup"]["n"] == 4  # what did run is kept
    assert "verl       stopped before its first checkpoint" in output


def test_verl_env_takes_key_value_pairs():
    assert gpu_check.verl_env(parse_args(["--verl-env", "A=1", "--verl-env", "B=x=y"])) == {"A": "1", "B": "x=y"}
    with pytest.raises(SystemExit, match="KEY=VALUE, got A"):
        gpu_check.verl_env(parse_args(["--verl-env", "A"]))


def test_plot_learn_draws_both_engines_curves(tmp_path):
    from benchmarks.gpu_check_report import CURVE_KEYS, plot_learn

    curve = {"step": [1, 2, 3], **{k: [0.1, 0.2, None] for k in CURVE_KEYS}}
    result = {
        "device": "cpu",
        "steps": 3,
        "commit": "abc1234",
        "curves": {"verl": curve, "local": {**curve, "pasr/acc_refine": []}},
        "warmup": {"acc": 0.5},
        "verl": None,
        "local": {"acc": 0.4},
        "tests": {"verl_vs_local": None},
    }
    png = plot_learn(result, tmp_path / "p" / "curves.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


@pytest.mark.slow  # minutes of subprocess training runs: make test-slow
def test_resume_after_learn_resumes_its_run_and_stops_it_with_one_start_up(tmp_path, tiny_cpu_args):
    """``--part resume`` in learn's run directory: verl resumes learn's last checkpoint, gets
    SIGTERM during the second step after it, checkpoints that step and exits; learn's own result
    is unchanged beside the resume check's."""
    learn = _learn(tmp_path, tiny_cpu_args, "--steps", "6", "--budget-s", "400", "--no-local")
    out = tmp_path / "after.json"
    gpu_check.main(
        [
            "--part",
            "resume",
            "--run-dir",
            str(tmp_path / "run"),
            "--verl-driver",
            FAKE,
            "--stop-delay-s",
            "0.1",
            "--out",
            str(out),
        ]
    )
    result = json.loads(out.read_text())
    rc = result["resume_check"]
    assert rc["passed"], rc["checks"]
    assert rc["from_step"] == 6 and rc["steps_run"] == [7, 8] and rc["checkpoint"] == 8 and rc["rc"] == 0
    assert result["steps"] == learn["steps"] == 6 and result["checks"] == learn["checks"]
    assert result["wall_s"] == learn["wall_s"] and rc["wall_s"] > 0


def test_resume_needs_a_learn_or_first_run_directory(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "settings.json").write_text(json.dumps({"part": "all"}))
    with pytest.raises(SystemExit, match="--part learn or --part first"):
        gpu_check.main(["--part", "resume", "--run-dir", str(tmp_path / "run")])


def test_the_reports_have_mean_at_k_and_paired_tests_on_question_means(tmp_path, capsys):
    """Each evaluation's sampled scores (beside its greedy dump) become a mean@K row and the paired
    tests on per-question means, in both parts' results and printed reports; none where none was."""
    from benchmarks import gpu_check_report
    from recipe.local_engine.sampled_eval import write_scores
    from recipe.paired_tests import paired_means_test, question_means

    scores = {
        "warmup": {"q1": [0, 0, 0, 1], "q2": [0, 0, 0, 0], "q3": [1, 1, 0, 0]},
        "verl": {"q1": [1, 1, 0, 1], "q2": [0, 1, 0, 0], "q3": [1, 1, 0, 0]},
    }
    root = tmp_path / "learn"
    root.mkdir()
    (root / "settings.json").write_text('{"part": "learn"}')
    for name, folder in (("warmup", "warmup_eval"), ("verl", "final_eval")):
        write_scores(root / folder / "eval" / "base.sampled.json", scores[name], k=4, temperature=0.5, seed=0)
    result = gpu_check_report.build_result(root)
    rows, tests = result["sampled"]["rows"], result["sampled"]["tests"]
    assert rows["warmup"] == {"mean_at_k": pytest.approx(0.25), "k": 4, "temperature": 0.5, "n": 3}
    assert rows["verl"]["mean_at_k"] == pytest.approx(0.5) and rows["local"] is None
    assert tests["verl_vs_warmup"] == paired_means_test(
        question_means(scores["warmup"]), question_means(scores["verl"])
    )
    assert tests["verl_vs_warmup"]["wins"] == 2 and tests["local_vs_warmup"] is None
    gpu_check_report.print_report(result)
    out = capsys.readouterr().out
    assert "mean@4 at T=0.5 (per-question means): warmup 0.250  verl 0.500  local -" in out
    assert "  verl_vs_warmup: +0.250 (2 up, 0 down, 1 same), Wilcoxon p " in out and "  local_vs_warmup: -" in out

    (root / "settings.json").write_text('{"part": "all"}')  # the stop/resume check's layout
    # a warm-up given as --warmup-model is evaluated as base
    write_scores(root / "warmup" / "eval" / "base.sampled.json", scores["warmup"], k=4, temperature=0.5, seed=0)
    result = gpu_check_report.build_result(root)
    assert result["sampled"]["rows"]["warmup"]["n"] == 3 and result["sampled"]["rows"]["pasr"]["n"] == 3
    assert result["sampled"]["tests"]["pasr_vs_warmup"]["wins"] == 2
    bare = tmp_path / "bare"  # greedy only (--eval-sampled-k 0): nothing sampled, nothing printed
    bare.mkdir()
    (bare / "settings.json").write_text('{"part": "learn"}')
    assert gpu_check_report.sampled_rows.report_lines(gpu_check_report.build_result(bare)["sampled"]) == []


def test_both_engines_step_parts_side_by_side(tmp_path):
    """Issue #65's third target read from one run: verl's step parts from its console lines, the
    local engine's from its metrics, both over steps 2..k, and the local step over verl's."""
    from benchmarks.gpu_learn_report import step_parts
    from benchmarks.watched_run import WatchedRun

    verl = WatchedRun("verl", [], tmp_path / "verl.log")
    for s, step in ((1, 40.0), (2, 7.0), (3, 6.0), (4, 9.0)):  # step 4: past k, left out
        verl._take(float(s), f"(TaskRunner pid=1) step:{s} - timing_s/gen:{step - 3} - timing_s/step:{step}")
    local = tmp_path / "local"
    local.mkdir()
    rows = [
        {"step": s, "phase": "pasr", "timing_s/gen": g, "timing_s/update": 4.0, "timing_s/step": g + 4.0}
        for s, g in ((1, 30.0), (2, 9.0), (3, 11.0))
    ]
    rows.append({"step": 3, "phase": "eval", "timing_s/eval": 20.0})
    (local / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    parts = step_parts(verl, local, upto=3)
    assert parts["verl"] == {"gen": 3.5, "step": 6.5} and parts["steps"] == [2, 2]
    assert parts["local"] == {"gen": 10.0, "update": 4.0, "step": 14.0}
    assert parts["local_over_verl"] == round(14.0 / 6.5, 2) and parts["target"] == 1.5
