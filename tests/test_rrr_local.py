"""Reflect, Retry, Reward on the local engine (recipe/local_engine/rrr.py): what reaches the
update, the evaluation's numbers, the Countdown warm-up, and a run end to end on a tiny model.

Judges are scripted so that a random tiny model's steps have successes, failures and verifier
errors where a test needs them.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from data.records import ATTEMPT, REFLECTION, RETRY, RolloutRecord
from recipe.local_engine.config import load_config
from rewards.judges.base import JudgeResult

REPO = Path(__file__).resolve().parents[1]


class ScriptedJudge:
    """Answers call ``i`` with ``calls[i]`` (a list of scores; None = a judge error), repeating
    the last score when a call has more items than scripted."""

    name = "scripted"

    def __init__(self, *calls):
        self.calls = list(calls)
        self.n_items: list[int] = []

    async def score(self, question, gold, answer):
        raise NotImplementedError

    async def score_many(self, items):
        script = self.calls[min(len(self.n_items), len(self.calls) - 1)]
        self.n_items.append(len(items))
        scores = [script[min(i, len(script) - 1)] for i in range(len(items))]
        return [JudgeResult.failed("timeout") if s is None else JudgeResult(s) for s in scores]


class CoinJudge:
    """Alternates 1 / 0 within every call: spread in every group of a step."""

    name = "coin"

    async def score(self, question, gold, answer):
        raise NotImplementedError

    async def score_many(self, items):
        return [JudgeResult(float(i % 2)) for i, _ in enumerate(items)]


def _queries(n: int):
    from data.countdown import generate_countdown

    return generate_countdown(n, seed=3, difficulty=1, split="train")


def _step(tiny, judge, monkeypatch, n_queries=3, n_reflections=2):
    """One rrr_step on the tiny model; returns (metrics, records, exchange, batches handed to the update)."""
    import copy

    import torch

    from recipe.local_engine import rrr

    model, tok = tiny
    model = copy.deepcopy(model)
    cfg = load_config(
        preset="rrr",
        overrides=[
            f"rrr.n_reflections={n_reflections}",
            "rrr.max_reflection_tokens=5",
            "rollout.max_new_tokens=4",
            "algo.skip_zero_adv=false",
            "algo.kl_coef=0",
        ],
    )
    seen: dict = {"batches": []}
    real_exchange, real_update = rrr.run_exchange, rrr.update_policy

    def exchange(*args, **kwargs):
        seen["exchange"] = real_exchange(*args, **kwargs)
        return seen["exchange"]

    def update(model, ref, opt, data, algo, temperature):
        seen["batches"].append(data)
        return real_update(model, ref, opt, data, algo, temperature)

    monkeypatch.setattr(rrr, "run_exchange", exchange)
    monkeypatch.setattr(rrr, "update_policy", update)
    metrics, records = rrr.rrr_step(
        generator=model,
        model=model,
        reference=None,
        optimizer=torch.optim.SGD(model.parameters(), lr=1e-3),
        tokenizer=tok,
        queries=_queries(n_queries),
        prompts=cfg.rrr.load_prompts(),
        judge=judge,
        rollout=cfg.rollout,
        rrr=cfg.rrr,
        algo=cfg.algo,
        run_id="t",
        step=1,
    )
    return metrics, records, seen["exchange"], seen["batches"]


def test_the_update_sees_reflection_prompt_and_reflection_tokens_only(tiny, monkeypatch):
    from recipe.rrr_step import RrrPrompts
    from runtime.hf_generate import render_prompts

    # attempts: q0 right, q1 and q2 wrong; retries (2 per failure): right, wrong, wrong, right
    metrics, records, ex, batches = _step(tiny, ScriptedJudge([1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 1.0]), monkeypatch)
    _, tok = tiny
    q1, q2 = ex.attempts[1], ex.attempts[2]
    assert [(r.query_id, r.sample_index) for r in ex.reflections] == [(q.query_id, k) for q in (q1, q2) for k in (0, 1)]
    assert len(batches) == 1
    b = batches[0].batch
    assert len(b["input_ids"]) == 4
    prompts = RrrPrompts.load()
    retry_ids = [tok(r.response, add_special_tokens=False)["input_ids"] for r in records if r.variant == RETRY]
    for row, (refl, attempt) in enumerate(zip(ex.reflections, [q1, q1, q2, q2])):
        mask = b["response_mask"][row].bool()
        # the loss covers exactly the sampled reflection tokens (EOS included when it stopped)
        assert b["responses"][row][mask].tolist() == refl.reflection_ids
        # the whole row is the reflection prompt + the reflection: no retry token is in it
        prompt = render_prompts(tok, [prompts.reflection_chat(attempt.question, attempt.text)])[0]
        assert b["input_ids"][row][b["attention_mask"][row].bool()].tolist() == prompt + refl.reflection_ids
        assert refl.prompt_ids == prompt
        assert "Reflect on what went wrong" in tok.decode(prompt)
    assert len(retry_ids) == 4
    assert b["token_level_rewards"].sum(-1).tolist() == [1.0, 0.0, 0.0, 1.0]
    assert list(batches[0].non_tensor_batch["uid"]) == [q1.query_id] * 2 + [q2.query_id] * 2
    assert metrics["rrr/trained_rows"] == 4 and metrics["actor/trained_rows"] == 4
    assert metrics["rrr/first_attempt_acc"] == pytest.approx(1 / 3) and metrics["rrr/retry_acc"] == 0.5
    assert [r.variant for r in records] == [ATTEMPT] * 3 + [REFLECTION] * 4 + [RETRY] * 4
    assert {
        "timing_s/gen_attempt",
        "timing_s/gen_reflection",
        "timing_s/gen_retry",
        "timing_s/reward",
        "timing_s/update",
        "timing_s/step",
    } <= set(metrics)


def test_first_attempt_successes_produce_no_rows(tiny, monkeypatch):
    judge = ScriptedJudge([1.0])
    metrics, records, ex, batches = _step(tiny, judge, monkeypatch)
    assert batches == [] and ex.reflections == []
    assert [r.variant for r in records] == [ATTEMPT] * 3
    assert judge.n_items == [3, 0][: len(judge.n_items)]  # no retry was judged (an empty call at most)
    assert metrics["rrr/trained_rows"] == 0 and metrics["rrr/first_attempt_acc"] == 1.0
    assert "actor/pg_loss" not in metrics


def test_verifier_errors_are_neither_failures_nor_zero_rewards(tiny, monkeypatch):
    # attempts: q0 unscored (not reflected on), q1 and q2 wrong; retries: right, unscored, wrong, unscored
    judge = ScriptedJudge([None, 0.0, 0.0], [1.0, None, 0.0, None])
    metrics, records, ex, batches = _step(tiny, judge, monkeypatch)
    assert {r.query_id for r in ex.reflections} == {ex.attempts[1].query_id, ex.attempts[2].query_id}
    b = batches[0].batch
    assert len(b["input_ids"]) == 2  # the two scored retries only
    assert b["token_level_rewards"].sum(-1).tolist() == [1.0, 0.0]
    reflections = [r for r in records if r.variant == REFLECTION]
    assert [r.acc for r in reflections] == [1.0, None, 0.0, None]
    assert [r.judge_error for r in reflections] == [None, "timeout", None, "timeout"]
    assert metrics["rrr/verifier_errors"] == 3 and metrics["rrr/trained_rows"] == 2
    assert metrics["rrr/first_attempt_acc"] == 0.0  # over the two scored attempts, not three


def _record(query: str, variant: str, acc, tokens: int, k: int = 0) -> RolloutRecord:
    return RolloutRecord(
        "r",
        query,
        "countdown",
        variant,
        "?",
        "x",
        tokens,
        False,
        "missing_think",
        0,
        None,
        "1, 2 -> 3",
        acc,
        sample_index=k,
        dataset="final",
    )


def test_eval_metrics_and_outcomes():
    from recipe.local_engine.rrr import eval_metrics, query_outcomes

    records = [
        _record("a", ATTEMPT, 1.0, 10),  # right at once
        _record("b", ATTEMPT, 0.0, 12),
        _record("b", REFLECTION, 1.0, 20),
        _record("b", RETRY, 1.0, 8),  # recovered
        _record("c", ATTEMPT, 0.0, 12),
        _record("c", REFLECTION, 0.0, 20),
        _record("c", RETRY, 0.0, 8),  # not
        _record("d", ATTEMPT, 0.0, 12),
        _record("d", REFLECTION, None, 20),
        _record("d", RETRY, None, 8),  # unscored retry
        _record("e", ATTEMPT, None, 30),  # unscored attempt
    ]
    m = eval_metrics(records)
    assert m["eval/first_attempt_acc"] == pytest.approx(1 / 4)
    assert m["eval/retry_acc"] == pytest.approx(1 / 2)
    assert m["eval/acc"] == pytest.approx(2 / 3)  # a, b right; c wrong; d and e unknown
    assert m["eval/retried"] == 3 and m["eval/recovered"] == 1
    assert m["eval/tokens"] == pytest.approx((10 + 40 + 40 + 40 + 30) / 5)
    assert m["eval/reflection_length/mean"] == 20 and m["eval/judge_errors"] == 2
    outcomes = query_outcomes(records)
    assert outcomes["b"].final_correct is True and outcomes["d"].final_correct is None
    assert outcomes["e"].first_correct is None and outcomes["a"].retried is False


def test_eval_metrics_without_a_scored_attempt_have_no_accuracy():
    """A verifier that failed on every attempt leaves the accuracies unknown (None, shown as
    "-"), never 0."""
    from recipe.local_engine.rrr import eval_metrics

    m = eval_metrics([_record("a", ATTEMPT, None, 10), _record("b", ATTEMPT, None, 12)])
    assert m["eval/first_attempt_acc"] is None and m["eval/acc"] is None and m["eval/judge_errors"] == 2


def test_countdown_traces_verify_and_never_eval():
    from data.countdown import generate_problems
    from data.countdown_traces import build_countdown_trace, solution_steps
    from rewards.countdown import countdown_reward

    for difficulty in (1, 2, 3):
        for p in generate_problems(200, seed=11, difficulty=difficulty, split="train"):
            trace = build_countdown_trace(p)
            assert countdown_reward(trace, p.numbers, p.target) == 1.0
            assert trace.endswith(f"<answer>{p.solution}</answer>")
            assert solution_steps(p.solution)[-1].endswith(f"= {p.target}")
    with pytest.raises(ValueError):
        solution_steps("__import__('os')")
    tree = ast.parse((REPO / "data" / "countdown_traces.py").read_text())
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert not called & {"eval", "exec", "compile"}


def test_reflection_traces_check_a_really_failed_attempt():
    import random

    from data.countdown import generate_problems
    from data.countdown_traces import build_reflection_trace
    from rewards.countdown import countdown_reward, equation_text, parse_equation

    rng = random.Random(0)
    kinds = set()
    for difficulty in (1, 2, 3):
        for p in generate_problems(100, seed=5, difficulty=difficulty, split="train"):
            t = build_reflection_trace(p, rng)
            assert countdown_reward(t.attempt, p.numbers, p.target) == 0.0  # the attempt really failed
            value = parse_equation(equation_text(t.attempt)).value
            assert value != p.target and f"my equation equals {value}, not {p.target}" in t.reflection.lower()
            assert "<answer>" not in t.reflection and t.reflection.count("Next time") == 1
            kinds.add(
                next(k for k in ("I wrote", "My steps are right", "My equation equals") if t.reflection.startswith(k))
            )
    assert len(kinds) == 3  # slips, honest misses and early targets all occur


def test_warmup_follows_the_data_and_keeps_pasr_unchanged():
    from data.synthetic import generate_problems
    from data.warmup_traces import build_samples
    from prompts import PromptSet
    from recipe.local_engine.warmup_data import warmup_examples
    from rewards.countdown import countdown_reward

    cfg = load_config(
        preset="rrr", overrides=["warmup.n_traces=20", "warmup.reflection_fraction=0", "warmup.retry_fraction=0"]
    )
    rrr_prompts = cfg.rrr.load_prompts()
    examples = warmup_examples(cfg, PromptSet.load("refine_system_short", "plain_system_short"), rrr_prompts)
    assert len(examples) == 20
    for ex in examples:
        assert ex.chat[0] == {"role": "system", "content": rrr_prompts.attempt_system} and ex.prefill == ""
        assert "<answer>" in ex.target and "<think>" not in ex.target
    from data.countdown import generate_problems as countdown_problems

    for ex, p in zip(examples, countdown_problems(20, seed=cfg.warmup.seed, difficulty=1, split="train")):
        assert ex.chat[1]["content"] == p.question and countdown_reward(ex.target, p.numbers, p.target) == 1.0

    pasr = load_config(overrides=["warmup.n_traces=30"])
    prompts = PromptSet.load("refine_system_short", "plain_system_short")
    w = pasr.warmup
    samples = build_samples(
        generate_problems(30, seed=w.seed, difficulty=1, split="train"),
        w.refine_fraction,
        w.refine_style,
        w.seed,
        w.plain_fraction,
    )
    expected = [
        (
            prompts.refine_chat(s.problem.question)
            if s.variant == "refine"
            else prompts.plain_chat(s.problem.question),
            s.trace[len("<think>") :],
        )
        for s in samples
    ]
    got = warmup_examples(pasr, prompts)
    assert [(e.chat, e.target) for e in got] == expected and {e.prefill for e in got} == {"<think>"}


def test_countdown_warmup_teaches_attempts_reflections_and_retries():
    from prompts import PromptSet
    from recipe.local_engine.warmup_data import warmup_examples
    from rewards.countdown import countdown_reward, equation_text, parse_equation

    cfg = load_config(
        preset="rrr", overrides=["warmup.n_traces=300", "warmup.reflection_fraction=0.3", "warmup.retry_fraction=0.2"]
    )
    rrr = cfg.rrr.load_prompts()
    from data.countdown import generate_problems

    problems = generate_problems(300, seed=cfg.warmup.seed, difficulty=1, split="train")
    examples = warmup_examples(cfg, PromptSet.load("refine_system_short", "plain_system_short"), rrr)
    kinds = {"attempt": 0, "reflection": 0, "retry": 0}
    for ex, p in zip(examples, problems, strict=True):
        user = ex.chat[-1]["content"]
        if user == p.question:  # a first attempt: the reference solution
            kinds["attempt"] += 1
            assert countdown_reward(ex.target, p.numbers, p.target) == 1.0
        elif "Your reflection:" in user:  # a retry: the failed attempt and its reflection in context, then the solution
            kinds["retry"] += 1
            assert ex.chat[0]["content"] == rrr.attempt_system and ex.target.strip() in p_trace(p)
            failed = user.split("Your attempt:")[1].split("Feedback:")[0]
            assert countdown_reward(failed, p.numbers, p.target) == 0.0
            assert countdown_reward(ex.target, p.numbers, p.target) == 1.0
        else:  # a reflection on a failed attempt: no answer, names the equation's real value
            kinds["reflection"] += 1
            failed = user.split("Your attempt:")[1].split("Feedback:")[0]
            value = parse_equation(equation_text(failed)).value
            assert "<answer>" not in ex.target and f"equals {value}, not {p.target}" in ex.target
    assert abs(kinds["reflection"] / 300 - 0.3) < 0.08 and abs(kinds["retry"] / 300 - 0.2) < 0.08, kinds
    with pytest.raises(Exception, match="reflection_fraction \\+ warmup.retry_fraction"):
        load_config(preset="rrr", overrides=["warmup.reflection_fraction=0.6", "warmup.retry_fraction=0.5"])


def test_synthetic_rrr_warmup_teaches_reflections_that_redo_the_slipped_step():
    """RRR on the synthetic arithmetic: attempts are the right steps; a reflection is shown a
    failed attempt (one step off, the error carried to the answer) and redoes that step digit by
    digit to its right value; a retry sees that attempt and reflection and answers right."""
    import re

    from data.synthetic import generate_problems
    from prompts import PromptSet
    from recipe.local_engine.warmup_data import warmup_examples

    cfg = load_config(
        preset="rrr",
        overrides=[
            "data.source=synthetic",
            "pasr.judge.kind=rule",
            "warmup.n_traces=200",
            "warmup.reflection_fraction=0.3",
            "warmup.retry_fraction=0.2",
            "data.difficulty=2",
        ],
    )
    rrr = cfg.rrr.load_prompts()
    problems = generate_problems(200, seed=cfg.warmup.seed, difficulty=2, split="train")
    examples = warmup_examples(cfg, PromptSet.load("refine_system_short", "plain_system_short"), rrr)
    kinds = {"attempt": 0, "reflection": 0, "retry": 0}
    for ex, p in zip(examples, problems, strict=True):
        user, right = ex.chat[-1]["content"], f"<answer>{p.answer}</answer>"
        assert ex.prefill == ""
        if user == p.question:
            assert ex.chat[0]["content"] == rrr.attempt_system
            kinds["attempt"] += 1
            assert ex.target.endswith(right) and "<refine>" not in ex.target
            continue
        failed = user.split("Your attempt:")[1].split("Feedback:")[0]
        assert "<answer>" in failed and right not in failed
        if "Your reflection:" in user:
            kinds["retry"] += 1
            assert ex.chat[0]["content"] == rrr.attempt_system and ex.target.endswith(right)
        else:
            kinds["reflection"] += 1
            wrote, claimed = re.match(r"I wrote (\d+ [-+*] \d+) = (\d+), but ", ex.target).groups()
            step = next(s for s in p.steps if s.text.startswith(wrote + " ="))
            assert f"{claimed}." in failed and int(claimed) != step.result
            assert f"so {wrote} = {step.result}, not {claimed}." in ex.target and "<answer>" not in ex.target
    assert abs(kinds["reflection"] / 200 - 0.3) < 0.1 and abs(kinds["retry"] / 200 - 0.2) < 0.1, kinds


def test_rrr_refuses_a_judge_that_is_not_binary_and_exact():
    """A reflection's reward is whether its retry succeeded: an LLM judge's 0.7 is no answer."""
    from recipe.pasr_config import ConfigError

    with pytest.raises(ConfigError, match="method=rrr needs a binary, exact judge.*pasr.judge.kind=openai"):
        load_config(
            overrides=[
                "method=rrr",
                "pasr.judge.kind=openai",
                "pasr.judge.base_url=http://127.0.0.1:1/v1",
                "pasr.judge.model=m",
            ]
        )
    assert load_config(overrides=["method=rrr", "pasr.judge.kind=rule"]).method == "rrr"  # math with the rule judge
    assert (
        load_config(
            overrides=["pasr.judge.kind=openai", "pasr.judge.base_url=http://127.0.0.1:1/v1", "pasr.judge.model=m"]
        ).method
        == "pasr"
    )


def p_trace(problem) -> str:
    from data.countdown_traces import build_countdown_trace

    return build_countdown_trace(problem)


def _tiny_overrides(tiny_model_dir, steps=2):
    return [
        f"model.path={tiny_model_dir}",
        "model.threads=1",
        "warmup.steps=2",
        "warmup.batch_size=2",
        "warmup.n_traces=8",
        f"trainer.steps={steps}",
        "trainer.save_every=1",
        "rollout.queries_per_step=2",
        "rrr.n_reflections=2",
        "rollout.max_new_tokens=4",
        "rollout.eval_max_new_tokens=4",
        "rrr.max_reflection_tokens=4",
        "data.eval_size=3",
        "data.train_size=10",
        "algo.skip_zero_adv=false",
    ]


def test_method_rrr_runs_end_to_end_resumes_and_stats_read_it(tiny_model_dir, tmp_path):
    from recipe.local_engine.trainer import LocalPasrTrainer, summarize

    run = tmp_path / "run"
    cfg = load_config(preset="rrr", overrides=_tiny_overrides(tiny_model_dir, steps=2))
    trainer = LocalPasrTrainer(cfg, run)
    trainer.setup()
    trainer.judge = CoinJudge()
    held = {}  # what each evaluation ran beside: the optimizer's moments, the KL reference
    evaluate = trainer._evaluate

    def noting(tag):
        held[tag] = (trainer.optimizer is not None, trainer.reference is not None)
        return evaluate(tag)

    trainer._evaluate = noting
    evals = trainer.fit()
    # neither is read again by then: the warm-up's optimizer (the RL phase starts a fresh one), and
    # after the last step's checkpoint the RL optimizer and the reference
    assert held == {"base": (False, False), "warmup": (False, False), "final": (False, False)}
    assert trainer.reference is None and not (run / "checkpoints" / "step_000004" / "optimizer.pt").exists()
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [(x["step"], x["phase"]) for x in lines if x["phase"] != "eval"] == [
        (1, "warmup"),
        (2, "warmup"),
        (3, "rrr"),
        (4, "rrr"),
    ]
    rrr_lines = [x for x in lines if x["phase"] == "rrr"]
    assert all(x["rrr/trained_rows"] > 0 and "actor/pg_loss" in x for x in rrr_lines)
    assert json.loads((run / "checkpoints" / "step_000004" / "trainer_state.json").read_text())["phase"] == "rrr"
    variants = {json.loads(x)["variant"] for x in (run / "rollouts" / "step_000003.jsonl").read_text().splitlines()}
    assert variants == {ATTEMPT, REFLECTION, RETRY}
    assert set(evals) == {"base", "warmup", "final"} and "eval/first_attempt_acc" in evals["final"]
    assert "first attempt" in summarize(evals)

    # resume with more steps: the phase comes back from the checkpoint
    cfg = load_config(config_file=str(run / "config.yaml"), overrides=["trainer.steps=3"], saved_run=True)
    resumed = LocalPasrTrainer(cfg, run, resume=True)
    resumed.setup()
    assert resumed.optimizer_phase == "rrr" and resumed.step == 4
    resumed.judge = CoinJudge()
    resumed.fit()
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [(x["step"], x["phase"]) for x in lines if x["phase"] != "eval"][-1] == (5, "rrr")

    # pasr stats reads an RRR run (no refine metrics to speak of, no crash)
    out = tmp_path / "stats"
    proc = subprocess.run(
        [sys.executable, "-m", "recipe", "stats", str(run), "--out", str(out), "--no-plots"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (out / "report.md").is_file() and (out / "stats.json").is_file()


@pytest.mark.slow
def test_preset_rrr_trains_the_real_model(tmp_path):
    """`pasr train --preset rrr` end to end on SmolLM2-135M, a few steps of each phase."""
    run = tmp_path / "rrr"
    argv = [
        sys.executable,
        "-m",
        "recipe",
        "train",
        "--preset",
        "rrr",
        "--run-dir",
        str(run),
        "model.threads=1",
        "warmup.steps=4",
        "trainer.steps=2",
        "data.eval_size=8",
        "rollout.queries_per_step=4",
        "rrr.n_reflections=2",
        "trainer.save_every=2",
    ]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "first attempt" in proc.stdout
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [x["phase"] for x in lines if x["phase"] not in ("eval",)] == ["warmup"] * 4 + ["rrr"] * 2
    finals = [x for x in lines if x.get("tag") == "final"]
    assert finals and 0.0 <= finals[0]["eval/acc"] <= 1.0
