"""Both engines log the same ``pasr/*`` metrics for one training step (issue 54): the scripted step
of tests/verl_scripted_rollout.py (the same texts, golds and judge, one judge error) through the
verl engine's metric code (the PASR rollout wrapper on verl's DataProto rows, then the timing
metrics of fit()) and through the local engine's step (:func:`recipe.local_engine.pasr_step.pasr_step`
on the tiny model, its generation scripted with the same token ids). The key sets are equal, and
every key is in the one table of docs/design.md ("Metrics")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.verl_scripted_rollout import (  # noqa: F401  (gen_batch, prompts, tokenizer, train_step, verl_mods are fixtures)
    SCRIPT,
    ExactJudge,
    fit_side,
    gen_batch,
    prompts,
    tokenizer,
    train_step,
    verl_mods,
)

DESIGN = Path(__file__).resolve().parent.parent / "docs" / "design.md"
# keys one engine logs and the other cannot (their reason in docs/design.md's table): none
ONLY_ONE_ENGINE: set[str] = set()
TIMED = {"pasr/reward_time_share"}  # measured on each engine's own clock: compared as keys only


def _pasr(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if k.startswith("pasr/")}


@pytest.fixture(scope="module")
def verl_metrics(train_step, gen_batch, verl_mods):
    """What verl's fit() logs of the step: the rollout's metrics (handed to ``_update_actor``) and
    its timing metrics, over the step's batch after fit()'s union, with the rollout's timing."""
    batch = fit_side(train_step.out, gen_batch, verl_mods, n=3)
    timing_raw = {**train_step.out.meta_info["timing"], "gen": 1.0, "step": 4.0}
    timing = verl_mods.trainer.verl_fit().__globals__["compute_timing_metrics"](batch=batch, timing_raw=timing_raw)
    return {**train_step.metrics, **timing}


@pytest.fixture(scope="module")
def local_metrics(tiny, train_step):
    """The local engine's step on the same queries, its generation replaced by the scripted token
    ids (the same as the verl rollout's), its update run on the tiny model."""
    import copy

    import torch

    from data.examples import Example
    from prompts import THINK_PREFILL
    from recipe.local_engine import pasr_step as step_mod
    from recipe.local_engine.config import AlgoConfig, RolloutConfig
    from recipe.local_engine.rollout import GeneratedRollout
    from recipe.scoring import Rollout
    from runtime.decoding import decode_response
    from runtime.hf_generate import SamplingParams, render_prompts

    model, tok = tiny
    model = copy.deepcopy(model)
    manager = train_step.manager
    queries = [
        Example(id=f"syn:{k}", data_source="synthetic", question=f"What is {k}+{k}?", answer=str(2 * k)) for k in SCRIPT
    ]

    def scripted_generation(
        model, tokenizer, queries, prompts, n_refine, n_plain, params, batch_size, prefill_think, **kw
    ):
        """generate_step's rollouts, each response the scripted one (after the prefill, as the
        verl fixture's server answers)."""
        prefill = THINK_PREFILL if prefill_think else ""
        out = []
        for k, ex in enumerate(queries):
            refine, plain = SCRIPT[k]
            for variant, texts, chat in (("refine", refine, prompts.refine_chat), ("plain", plain, prompts.plain_chat)):
                prompt_ids = render_prompts(tokenizer, [chat(ex.question)], prefill)[0]
                for j, text in enumerate(texts):
                    ids = tokenizer.encode(text.removeprefix(prefill), add_special_tokens=False) + [
                        tokenizer.eos_token_id
                    ]
                    text = decode_response(tokenizer, ids, prefill)
                    rollout = Rollout(ex.id, ex.data_source, ex.question, ex.answer, variant, text, len(ids), "stop", j)
                    out.append(GeneratedRollout(rollout, prompt_ids, ids))
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(step_mod, "generate_step", scripted_generation)
        metrics, records = step_mod.pasr_step(
            get_generator=lambda: model,
            model=model,
            reference=None,
            optimizer=torch.optim.AdamW(model.parameters(), lr=1e-6),
            tokenizer=tok,
            queries=queries,
            prompts=manager.prompts,
            prompt_versions=manager.prompt_versions,
            judge=ExactJudge(),
            params=SamplingParams(max_new_tokens=48),
            rollout=RolloutConfig(),
            pasr=manager.cfg,
            algo=AlgoConfig(kl_coef=0.0),
            run_id="test-run",
            step=5,
            before_update=lambda records: None,
        )
    assert len(records) == 18 and sum(r.acc is None for r in records) == 1  # the step of the verl fixture
    return metrics


def test_both_engines_log_the_same_pasr_keys_on_one_step(local_metrics, verl_metrics):
    local, verl = set(_pasr(local_metrics)), set(_pasr(verl_metrics))
    assert local ^ verl == ONLY_ONE_ENGINE, f"local only: {sorted(local - verl)}; verl only: {sorted(verl - local)}"
    # the update's view of the step (once only verl's): 1 judge error masked, 9 plain rows, no flat group
    assert (local_metrics["pasr/masked_rows"], local_metrics["pasr/plain_rows"]) == (1.0, 9.0)
    assert local_metrics["pasr/zero_spread_groups"] == 0.0
    assert 0.0 < verl_metrics["pasr/reward_time_share"] < 1.0 and 0.0 < local_metrics["pasr/reward_time_share"] <= 1.0


def test_both_engines_give_the_same_values(local_metrics, verl_metrics):
    """Same records, scores and mask: the same numbers (only a time share differs, each engine's clock)."""
    local, verl = _pasr(local_metrics), _pasr(verl_metrics)
    for key in sorted(set(local) - TIMED):
        assert local[key] == pytest.approx(verl[key]), key
    # the refine term's reach (issue 61), formed by each engine on its own rows: every group mixes
    # refining and non-refining rollouts, so the term moves advantages
    assert local["pasr/refine_term/mixed_groups"] == 1.0
    assert local["pasr/refine_term/live_groups"] > 0 and local["pasr/refine_term/adv_change"] > 0


def test_every_logged_key_is_in_the_one_table(local_metrics, verl_metrics):
    """docs/design.md's "Metrics" table names every ``pasr/*`` key either engine logs
    (``<outcome>`` in a name stands for each refine outcome)."""
    text = DESIGN.read_text()
    section = text[text.index("## Metrics") :]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `pasr/")]
    names = [n for cell in rows for n in re.findall(r"`(pasr/[^`]+)`", cell)]
    patterns = [re.compile(re.escape(n).replace(re.escape("<outcome>"), r"[a-z_]+") + "$") for n in names]
    logged = set(_pasr(local_metrics)) | set(_pasr(verl_metrics))
    assert [k for k in sorted(logged) if not any(p.match(k) for p in patterns)] == []
    assert [n for n, p in zip(names, patterns) if not any(p.match(k) for k in logged)] == []  # no stale row
