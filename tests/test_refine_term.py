"""The refine term's reach (issue 61): with a 0/1 judge GRPO cancels PASR's refine term in every
group where all rollouts refine; ``pasr/refine_term/*`` measures it each step and both engines warn
when it stays dead (recipe/refine_term.py)."""

from __future__ import annotations

import random

import pytest

from benchmarks.refine_term_reach import record
from data.records import PLAIN, REFINE
from recipe.pasr_config import load_pasr_config
from recipe.refine_term import LIVE_TOL, RefineTermWatch, refine_term_effect, refine_term_metrics
from recipe.scoring import group_scores

PAPER = {}  # the defaults: sign, tie -0.5
CPU = {"refine_compare": "margin", "tie_value": 0.0}  # the cpu preset's reward


def R(a):  # formatted, refines
    return f"<think>17+4=20<refine>no: 17+4=21</refine>done</think><answer>{a}</answer>"


def N(a):  # formatted, no refine
    return f"<think>17+4=21</think><answer>{a}</answer>"


def group(query, refine_accs, plain_accs, refines=None):
    """A query's records: refine rows (refining unless ``refines`` says which do) and plain rows."""
    refines = refines or [True] * len(refine_accs)
    rows = [record(query, REFINE, (R if r else N)("x"), a) for a, r in zip(refine_accs, refines)]
    return rows + [record(query, PLAIN, "plain", a) for a in plain_accs]


def effect(records, reward=PAPER, weight=1.0, **kw):
    cfg = load_pasr_config({"n_refine": 4, "n_plain": 4, **reward, "weights": {"refine": weight}})
    scores, mask = group_scores(records, cfg)
    return refine_term_effect(records, scores, mask, cfg.weights.refine, **kw)


@pytest.mark.parametrize("reward", [PAPER, CPU], ids=["paper", "cpu"])
def test_an_all_refining_binary_group_gives_zero(reward):
    """acc 0/1 with every rollout refining: the refine term is a line in acc, GRPO removes it."""
    e = effect(group("q", [1.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0]), reward)
    assert (e.groups, e.live_groups, e.mixed_groups) == (1, 0, 0)
    assert e.adv_change < LIVE_TOL


@pytest.mark.parametrize("reward", [PAPER, CPU], ids=["paper", "cpu"])
def test_random_all_refining_binary_groups_never_change(reward):
    """The issue's measurement, smaller: no random all-refining binary group is changed."""
    rng = random.Random(0)
    records = []
    for q in range(200):
        records += group(f"q{q}", [float(rng.random() < 0.5) for _ in range(4)], [float(rng.random() < 0.5)] * 4)
    e = effect(records, reward)
    assert e.groups == 200 and e.live_groups == 0


@pytest.mark.parametrize("reward", [PAPER, CPU], ids=["paper", "cpu"])
def test_a_mixed_group_gives_more_than_zero(reward):
    """One rollout that does not refine: the term separates it from the refining ones."""
    e = effect(group("q", [1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 1.0, 0.0], refines=[True, True, False, True]), reward)
    assert (e.groups, e.live_groups, e.mixed_groups) == (1, 1, 1)
    assert e.adv_change > 0.01


def test_a_graded_judge_gives_more_than_zero():
    """Scores between 0 and 1: the paper's sign reward is no longer a line in acc."""
    e = effect(group("q", [0.9, 0.2, 0.5, 0.45], [0.5, 0.5, 0.4, 0.6]), PAPER)
    assert e.live_groups == 1 and e.mixed_groups == 0 and e.adv_change > 0.01


def test_without_std_division_the_term_scales_the_advantages():
    """Dr. GRPO (no std division): the term multiplies a binary group's advantages."""
    records = group("q", [1.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0])
    assert effect(records, norm_adv_by_std=True).live_groups == 0
    assert effect(records, norm_adv_by_std=False).live_groups == 1


def test_judge_errors_and_plain_rows_are_outside_the_groups():
    """Rows masked for a judge error are outside the statistics (as in the update): a group whose
    only non-refining rollout failed is not mixed."""
    records = group("q", [1.0, 0.0, None, 0.0], [0.0, 1.0], refines=[True, True, False, True])
    e = effect(records)
    assert (e.groups, e.mixed_groups, e.live_groups) == (1, 0, 0)


def test_metric_names_and_shares():
    # (a group of two rows is never changed: any two distinct scores standardise to +-0.71)
    records = group("a", [1.0, 0.0, 0.0], [0.0], refines=[True, False, True]) + group("b", [1.0, 0.0, 0.0], [0.0])
    cfg = load_pasr_config({"n_refine": 3, "n_plain": 1})
    scores, mask = group_scores(records, cfg)
    m = refine_term_metrics(records, scores, mask, 1.0)
    assert m["pasr/refine_term/live_groups"] == 0.5 and m["pasr/refine_term/mixed_groups"] == 0.5
    assert 0 < m["pasr/refine_term/adv_change"] < 1
    assert refine_term_metrics(records, scores, mask, 0.0)["pasr/refine_term/live_groups"] == 0.0  # the control


def test_the_watch_warns_once_after_steps_in_a_row():
    watch = RefineTermWatch(share=0.05, steps=3)
    dead = {"pasr/refine_term/live_groups": 0.0, "pasr/refine_term/mixed_groups": 0.0}
    live = {"pasr/refine_term/live_groups": 0.5}
    assert [watch.observe(s, dead) for s in (1, 2)] == [None, None]
    assert watch.observe(3, live) is None  # a live step starts the count again
    lines = [watch.observe(s, dead) for s in (4, 5, 6, 7)]
    assert lines[:2] == [None, None] and lines[3] is None
    assert "steps 4-6" in lines[2] and "pasr.weights.refine=0" in lines[2] and "docs/design.md#" in lines[2]
    assert RefineTermWatch(steps=1, refine_weight=0.0).observe(1, dead) is None  # the control: off by choice


# --------------------------------------------------------------------------- the local engine's run
class ExactJudge:
    name = "exact"

    async def score(self, question, gold, answer):
        raise NotImplementedError

    async def score_many(self, items):
        from rewards.judges.base import JudgeResult

        return [JudgeResult(float(i.answer is not None and i.answer.strip() == i.gold)) for i in items]


def _scripted_generation(all_refine: bool):
    """generate_step's stand-in: each query's rollouts right and wrong in turn; every refine
    rollout refines, or (mixed) every third does not."""
    from prompts import THINK_PREFILL
    from recipe.local_engine.rollout import GeneratedRollout
    from recipe.scoring import Rollout

    def generate(model, tokenizer, queries, prompts, n_refine, n_plain, params, batch_size, prefill_think, **kw):
        out = []
        for ex in queries:
            for variant, n in ((REFINE, n_refine), (PLAIN, n_plain)):
                for j in range(n):
                    answer = ex.answer if j % 2 == 0 else "wrong"
                    refines = variant == REFINE and (all_refine or j % 3 != 2)
                    text = (R if refines else N)(answer)
                    # the response after the <think> prefill, and the text scored (prefill and response)
                    ids = tokenizer.encode(text.removeprefix(THINK_PREFILL), add_special_tokens=False)
                    ids.append(tokenizer.eos_token_id)
                    rollout = Rollout(ex.id, ex.data_source, ex.question, ex.answer, variant, text, len(ids))
                    out.append(GeneratedRollout(rollout, [1, 2, 3], ids))
        return out

    return generate


@pytest.mark.parametrize("all_refine", [True, False], ids=["all-refining", "mixed"])
def test_the_local_engine_logs_and_warns(tiny_model_dir, tmp_path, monkeypatch, capsys, all_refine):
    """Three PASR steps of the tiny model: an all-refining run gets the one-line warning on its
    third step, a mixed one none; every step logs the metrics."""
    from recipe.local_engine import pasr_step as step_mod
    from recipe.local_engine.config import load_config
    from recipe.local_engine.trainer import LocalPasrTrainer

    monkeypatch.setattr(step_mod, "generate_step", _scripted_generation(all_refine))
    cfg = load_config(
        overrides=[
            f"model.path={tiny_model_dir}",
            "warmup.steps=0",
            "trainer.steps=3",
            "rollout.queries_per_step=2",
            "pasr.n_refine=4",
            "pasr.n_plain=2",
            "algo.kl_coef=0",
        ]
    )
    trainer = LocalPasrTrainer(cfg, tmp_path / "run")
    trainer.setup()
    trainer.judge = ExactJudge()
    trainer.optimizer = trainer._make_optimizer("pasr")
    metrics = [trainer.pasr_step(s) for s in (1, 2, 3)]
    err = capsys.readouterr().err
    live = [m["pasr/refine_term/live_groups"] for m in metrics]
    if all_refine:
        assert live == [0.0, 0.0, 0.0] and all(m["pasr/refine_term/mixed_groups"] == 0.0 for m in metrics)
        assert err.count("PASR WARNING steps 1-3: the refine term changed") == 1
    else:
        assert live == [1.0, 1.0, 1.0]
        assert all(m["pasr/refine_term/mixed_groups"] == 1.0 for m in metrics)
        assert "PASR WARNING" not in err
    # the benchmark rebuilds the same shares from the run's rollout dumps alone
    from benchmarks.refine_term_reach import run_steps

    assert [r["live_share"] for r in run_steps(tmp_path / "run", "run")] == live


def test_the_bf16_rollout_copy_is_let_go_before_the_update_and_made_again_from_it(
    tiny_model_dir, tmp_path, monkeypatch
):
    """On the bf16 path the generator is a bf16 copy of the policy. A PASR step lets it go before
    its update (its memory is not held beside the gradients: the run's peak), and the next step
    generates from a new copy of the updated weights."""
    import torch

    from recipe.local_engine import pasr_step as step_mod
    from recipe.local_engine.config import load_config
    from recipe.local_engine.trainer import LocalPasrTrainer

    seen = []
    scripted = _scripted_generation(all_refine=False)

    def generate(model, *args, **kw):
        seen.append((id(model), model.dtype, {n: p.detach().clone() for n, p in model.named_parameters()}))
        return scripted(model, *args, **kw)

    monkeypatch.setattr(step_mod, "generate_step", generate)
    overrides = ["warmup.steps=0", "trainer.steps=2", "rollout.queries_per_step=2", "pasr.n_refine=4"]
    overrides += ["pasr.n_plain=2", "algo.kl_coef=0", "model.rollout_dtype=bfloat16", "algo.bf16_autocast=false"]
    cfg = load_config(overrides=[f"model.path={tiny_model_dir}", *overrides, "algo.lr=1e-3"])
    trainer = LocalPasrTrainer(cfg, tmp_path / "run")
    trainer.setup()
    trainer.judge = ExactJudge()
    trainer.optimizer = trainer._make_optimizer("pasr")
    trainer.pasr_step(1)
    assert trainer.rollout_model is None  # let go before the update, not made again after it
    after_first = {n: p.detach().to(torch.bfloat16) for n, p in trainer.model.named_parameters()}
    trainer.pasr_step(2)
    (_, dtype1, w1), (_, dtype2, w2) = seen
    assert dtype1 == dtype2 == torch.bfloat16
    assert any(not torch.equal(w1[n], w2[n]) for n in w1)  # the update moved the weights
    assert all(torch.equal(w2[n], after_first[n]) for n in w2)  # the second copy is the updated policy


# --------------------------------------------------------------------------- pasr stats
def test_pasr_stats_reports_the_reach_and_the_constant_rate_warmup(tmp_path, capsys):
    """A run's metrics.jsonl with the refine-term keys: one terminal line with its mean reach and
    dead steps, a second one because its warm-up kept a constant rate, the report's table, a plot."""
    import json

    from data.records import write_records
    from pasr_cli import main

    run = tmp_path / "run"
    (run / "rollouts").mkdir(parents=True)
    write_records(run / "rollouts" / "step_000003.jsonl", group("q", [1.0, 0.0], [1.0]))
    (run / "config.yaml").write_text("warmup:\n  steps: 2\n  lr_schedule: constant\n")
    rows = [{"step": 1, "warmup/loss": 1.0}, {"step": 2, "warmup/loss": 0.9}]
    rows += [
        {"step": s, "pasr/refine_term/live_groups": live, "pasr/refine_term/mixed_groups": mixed, "pasr/refine_rate": 1}
        for s, live, mixed in ((3, 0.0, 0.0), (4, 0.5, 0.25), (5, 0.0, 0.0))
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["stats", str(run), "--out", str(tmp_path / "report")]) == 0
    out = capsys.readouterr().out
    assert "refine term (" in out and "17% of GRPO groups a step on average over 3 PASR step(s), none in 2" in out
    assert "warmup.lr_schedule=constant" in out
    report = (tmp_path / "report" / "report.md").read_text()
    assert "## The refine term's reach" in report and "| 3 | 16.7% | 2 | 8.3% |" in report
    stats = json.loads((tmp_path / "report" / "stats.json").read_text())
    plot = [p for p in stats["plots"] if p.startswith("refine_term_")]
    assert len(plot) == 1 and (tmp_path / "report" / plot[0]).stat().st_size > 0

    (run / "config.yaml").write_text("warmup:\n  steps: 2\n  lr_schedule: cosine\n")  # a decayed warm-up: no caveat
    assert main(["stats", str(run), "--out", str(tmp_path / "report2")]) == 0
    assert "lr_schedule=constant" not in capsys.readouterr().out
