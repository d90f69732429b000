"""Judge errors on the local engine (issue 34): failed rows are counted and not trained,
``pasr.max_judge_error_rate`` is validated, a step over it stops before its update, a judge that
always fails stops ``pasr train`` with one line, and the summary shows the errors."""

from __future__ import annotations

import json

import pytest
import torch

from recipe.local_engine.config import LocalTrainConfig, load_config
from recipe.pasr_config import ConfigError


class FlakyJudge:
    """Fails every third item: those rollouts must be counted and left out of the update."""

    name = "flaky"

    async def score(self, question, gold, answer):
        raise NotImplementedError

    async def score_many(self, items):
        from rewards.judges.base import JudgeResult

        return [JudgeResult.failed("boom") if i % 3 == 0 else JudgeResult(float(i % 2)) for i, _ in enumerate(items)]


def test_judge_errors_are_counted_and_not_trained(tiny_model_dir, tmp_path):
    """Judged refine rows are trained on, the judge errors counted and masked."""
    from recipe.local_engine.trainer import LocalPasrTrainer

    cfg = load_config(
        overrides=[
            f"model.path={tiny_model_dir}",
            "warmup.steps=0",
            "trainer.steps=1",
            "rollout.queries_per_step=2",
            "pasr.n_refine=3",
            "pasr.n_plain=2",
            "rollout.max_new_tokens=4",
            "algo.skip_zero_adv=false",
            "pasr.max_judge_error_rate=0.5",  # 4 errors in 10 rollouts: trained around, not a stop
        ]
    )
    trainer = LocalPasrTrainer(cfg, tmp_path / "run")
    trainer.setup()
    trainer.judge = FlakyJudge()
    trainer.optimizer = trainer._make_optimizer("pasr")
    metrics = trainer.pasr_step(1)
    records = [json.loads(x) for x in (tmp_path / "run" / "rollouts" / "step_000001.jsonl").read_text().splitlines()]
    failed = [r for r in records if r["acc"] is None]
    assert len(records) == 10 and len(failed) == 4
    assert all(r["judge_error"] == "boom" and r["total_reward"] is None for r in failed)
    assert metrics["pasr/judge_errors"] == 4
    judged = [r for r in records if r["acc"] is not None and r["variant"] == "refine"]
    assert metrics["actor/trained_rows"] == len(judged)
    assert "pasr/draft_acc" in metrics
    assert all((r["total_reward"] is not None) == (r["acc"] is not None) for r in records if r["variant"] == "refine")
    assert {"timing_s/gen", "timing_s/reward", "timing_s/update"} <= set(metrics)


class BrokenJudge:
    """Every reply unparseable: no rollout can be scored."""

    name = "broken"

    async def score(self, question, gold, answer):
        raise NotImplementedError

    async def score_many(self, items):
        from rewards.judges.base import JudgeResult

        return [JudgeResult.failed("openai judge: unparsable_score: 'n/a' (after 4 attempts)") for _ in items]


def test_max_judge_error_rate_is_validated():
    assert load_config().pasr.max_judge_error_rate == 0.2
    assert load_config(overrides=["pasr.max_judge_error_rate=1"]).pasr.max_judge_error_rate == 1.0
    for bad in ("1.5", "-0.1", "nan", "inf"):
        with pytest.raises(ConfigError, match=r"pasr.max_judge_error_rate"):
            load_config(overrides=[f"pasr.max_judge_error_rate={bad}"])
    for bad in (1.5, float("nan")):  # NaN compares false to everything: it would never stop a run
        cfg = LocalTrainConfig()
        cfg.pasr.max_judge_error_rate = bad
        with pytest.raises(ConfigError, match=r"pasr.max_judge_error_rate"):
            cfg.validate()
    from recipe.judge_errors import max_judge_error_rate_problem

    assert max_judge_error_rate_problem("k", float("nan")) == "k must be in [0, 1], got nan"
    assert max_judge_error_rate_problem("k", 0.0) is None and max_judge_error_rate_problem("k", 1.0) is None


def test_a_step_over_the_judge_error_limit_stops_before_its_update(tiny_model_dir, tmp_path):
    """The verl engine's stop: the step's records are dumped for inspection, the policy is not
    updated on masked rows, and the message names the setting and the first error."""
    from recipe.judge_errors import JudgeErrorRateExceeded
    from recipe.local_engine.trainer import LocalPasrTrainer

    cfg = load_config(
        overrides=[
            f"model.path={tiny_model_dir}",
            "warmup.steps=0",
            "trainer.steps=1",
            "rollout.queries_per_step=2",
            "pasr.n_refine=2",
            "pasr.n_plain=1",
            "rollout.max_new_tokens=4",
        ]
    )
    trainer = LocalPasrTrainer(cfg, tmp_path / "run")
    trainer.setup()
    trainer.judge = BrokenJudge()
    trainer.optimizer = trainer._make_optimizer("pasr")
    before = [p.detach().clone() for p in trainer.model.parameters()]
    with pytest.raises(
        JudgeErrorRateExceeded,
        match=r"step 1: the judge failed on 6 of 6 rollouts \(100%\), more than "
        r"pasr.max_judge_error_rate=0.2; first error: .*unparsable_score",
    ):
        trainer.pasr_step(1)
    assert len((tmp_path / "run" / "rollouts" / "step_000001.jsonl").read_text().splitlines()) == 6
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))
    assert not trainer.optimizer.state  # no optimizer step either


def test_pasr_train_stops_on_a_judge_that_always_fails(tiny_model_dir, tmp_path, monkeypatch, capsys):
    """A judge that never answers is neither accuracy 0 nor a quiet exit 0: the evaluation has no
    accuracy, counts its errors and warns; the first PASR step stops the run with one line."""
    import rewards.judges
    from pasr_cli import main

    monkeypatch.setattr(rewards.judges, "build_judge", lambda cfg, prompt=None: BrokenJudge())
    run_dir = tmp_path / "run"
    rc = main(
        [
            "train",
            "--run-dir",
            str(run_dir),
            f"model.path={tiny_model_dir}",
            "model.threads=1",
            "warmup.steps=0",
            "trainer.steps=2",
            "rollout.queries_per_step=2",
            "pasr.n_refine=2",
            "pasr.n_plain=1",
            "rollout.max_new_tokens=4",
            "rollout.eval_max_new_tokens=4",
            "data.eval_size=2",
            "data.train_size=8",
        ]
    )
    err = capsys.readouterr().err
    assert rc != 0 and "Traceback" not in err
    assert "pasr train: error: step 1: the judge failed on 6 of 6 rollouts (100%)" in err
    assert "WARNING: the judge failed on 2 of 2 rollouts of evaluation 'base'" in err
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    (base,) = [x for x in lines if x["phase"] == "eval"]
    assert base["eval/acc"] is None and base["eval/judge_errors"] == 2
    assert [x["phase"] for x in lines] == ["eval"]  # the stopped step is not logged
    assert len((run_dir / "rollouts" / "step_000001.jsonl").read_text().splitlines()) == 6


def test_summarize_shows_the_judge_errors_and_no_accuracy_without_a_judged_sample():
    from recipe.local_engine.trainer import summarize

    row = {
        "eval/format_pass_rate": 0.5,
        "eval/acc": None,
        "eval/refine_rate": 0.0,
        "eval/empty_refine_rate": 0.0,
        "eval/refine_fix_rate": 0.0,
        "eval/response_length/mean": 4.0,
        "eval/judge_errors": 2.0,
    }
    header, _, base, final = summarize(
        {"base": row, "final": {**row, "eval/acc": 0.75, "eval/judge_errors": 0.0}}
    ).splitlines()
    assert header.endswith("| judge errors |")
    assert base.startswith("| base | 0.50 | - |") and base.endswith("| 2 |")
    assert final.startswith("| final | 0.50 | 0.75 |") and final.endswith("| 0 |")
