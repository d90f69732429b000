"""``pasr eval`` on a local run's checkpoint answers as the run trained: ``RUN/checkpoints/latest``
resolves, the ``<think>`` prefill and the run's prompts are taken from its ``config.yaml``, and the
prefill goes to answers under the trained prompts only, on the hf and the vllm backend."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest

from eval.backends import (
    AnswerPrefillBackend,
    BackendError,
    Completion,
    GenParams,
    HFBackend,
    LocalRunAnswers,
    VLLMAnswerPrefillBackend,
    VLLMBackend,
    build_backend,
    local_run_answers,
    resolve_model,
    starts_answer,
)


def _local_run(tmp_path: Path, model_dir: Path, *overrides: str) -> Path:
    """A local run's layout: its config.yaml (the demo preset) and checkpoints/step_000002 with
    ``latest`` naming it. Returns the run directory."""
    from recipe.local_engine.config import load_config, to_yaml

    run = tmp_path / "run"
    step = run / "checkpoints" / "step_000002"
    shutil.copytree(model_dir, step)
    (step / "trainer_state.json").write_text('{"phase": "pasr", "step": 2}')
    (run / "checkpoints" / "latest").write_text("step_000002")
    (run / "config.yaml").write_text(to_yaml(load_config(preset="demo", overrides=list(overrides))))
    return run


def test_latest_resolves_to_the_checkpoint_it_names(tiny_model_dir, tmp_path):
    run = _local_run(tmp_path, tiny_model_dir)
    assert Path(resolve_model(str(run / "checkpoints" / "latest"))) == run / "checkpoints" / "step_000002"
    (run / "checkpoints" / "latest").write_text("step_000009")  # names no complete checkpoint
    with pytest.raises(BackendError, match="names no complete checkpoint"):
        resolve_model(str(run / "checkpoints" / "latest"))


def test_a_local_runs_checkpoint_says_how_it_answered(tiny_model_dir, tmp_path):
    run = _local_run(tmp_path, tiny_model_dir)
    answers = local_run_answers(run / "checkpoints" / "step_000002")
    assert answers is not None and answers.prefill_think
    assert (answers.refine_prompt, answers.plain_prompt) == ("refine_system_short", "plain_system_short")
    off = _local_run(tmp_path / "off", tiny_model_dir, "pasr.prefill_think=false")
    assert local_run_answers(off / "checkpoints" / "step_000002").prefill_think is False
    # a run saved before the key moved (rollout.prefill_think, recipe/retired_keys.py RENAMED)
    (off / "config.yaml").write_text("warmup: {}\nrollout: {prefill_think: false}\n")
    assert local_run_answers(off / "checkpoints" / "step_000002").prefill_think is False
    assert local_run_answers(tiny_model_dir) is None  # an exported folder: no run around it
    (run / "config.yaml").write_text("warmup: {}\nrollout: {max_new_tokens: 96}\n")  # keys left out: the defaults
    assert local_run_answers(run / "checkpoints" / "step_000002") == LocalRunAnswers(
        False, "refine_system", "plain_system"
    )  # pasr.*'s one default, the paper's (pasr train writes every key)
    (run / "config.yaml").write_text("actor_rollout_ref: {}\n")  # not a local engine run
    assert local_run_answers(run / "checkpoints" / "step_000002") is None


def _args(model: str, **kw) -> argparse.Namespace:
    return argparse.Namespace(
        model=model, **{"refine_prompt": None, "plain_prompt": None, "prefill_think": "auto", **kw}
    )


def test_pasr_eval_takes_the_runs_prompts_and_prefill_unless_told(tiny_model_dir, tmp_path, capsys):
    from eval.cli import answer_settings

    run = _local_run(tmp_path, tiny_model_dir)
    latest = str(run / "checkpoints" / "latest")
    assert answer_settings(_args(latest)) == ("refine_system_short", "plain_system_short", "<think>")
    assert "--prefill-think on" in capsys.readouterr().err  # it says what it took from the run
    assert answer_settings(_args(latest, prefill_think="off"))[2] == ""
    assert answer_settings(_args(latest, refine_prompt="refine_system"))[0] == "refine_system"
    capsys.readouterr()
    # anything that is not a local run: the paper's prompts, no prefill (and nothing said)
    assert answer_settings(_args(str(tiny_model_dir))) == ("refine_system", "plain_system", "")
    assert answer_settings(_args(str(tiny_model_dir), prefill_think="on"))[2] == "<think>"
    assert capsys.readouterr().err == ""


def test_the_prefill_is_part_of_the_resume_fingerprint_only_when_set():
    from eval.config import EvalConfig
    from eval.methods import MethodPrompts

    def settings(**kw):
        cfg = EvalConfig(model="m", datasets=["gsm8k"], out="o", method="pasr", **kw)
        cfg.validate()
        return cfg.settings(MethodPrompts.load(refine=cfg.refine_prompt, plain=cfg.plain_prompt))

    assert "prefill" not in settings()  # earlier runs' fingerprints stay valid
    assert settings(prefill="<think>")["prefill"] == "<think>"


def test_either_backend_takes_the_prefill():
    assert isinstance(build_backend("hf", "unused", prefill="<think>", systems=frozenset({"S"})), AnswerPrefillBackend)
    assert type(build_backend("hf", "unused")) is HFBackend
    assert isinstance(
        build_backend("vllm", "unused", prefill="<think>", systems=frozenset({"S"})), VLLMAnswerPrefillBackend
    )
    assert type(build_backend("vllm", "unused")) is VLLMBackend


def test_vllm_answers_after_the_prompt_the_local_engine_renders(tiny, monkeypatch):
    """With the prefill, vllm gets each answer's prompt as the local engine renders it (chat
    template, then ``<think>``) as token ids, and its text starts with the prefill; other chats
    still go through ``LLM.chat``."""
    import types

    from runtime.hf_generate import render_prompts

    _, tok = tiny
    calls = []

    class FakeLLM:
        def get_tokenizer(self):
            return tok

        def _outputs(self, n):
            return [
                types.SimpleNamespace(
                    outputs=[
                        types.SimpleNamespace(
                            text="x</think><answer>1</answer>", token_ids=[1, 2, 3], finish_reason="stop"
                        )
                    ]
                )
            ] * n

        def generate(self, prompts, sampling_params, use_tqdm=True):
            calls.append(("generate", prompts))
            return self._outputs(len(prompts))

        def chat(self, messages, sampling_params, use_tqdm=True):
            calls.append(("chat", messages))
            return self._outputs(len(messages))

    backend = VLLMAnswerPrefillBackend("unused", "<think>", frozenset({"S"}), llm=FakeLLM())
    monkeypatch.setattr(backend, "load", lambda: None)
    monkeypatch.setattr(backend, "sampling_params", lambda params: None)
    answer = [{"role": "system", "content": "S"}, {"role": "user", "content": "1 + 0?"}]
    feedback = [{"role": "user", "content": "check it"}]
    out = backend.generate([answer, feedback], GenParams())
    assert [c.text for c in out] == ["<think>x</think><answer>1</answer>", "x</think><answer>1</answer>"]
    assert out[0].n_tokens == 3  # the prefill is prompt, not output
    assert sorted(calls, key=lambda c: c[0]) == [
        ("chat", [feedback]),
        ("generate", [{"prompt_token_ids": render_prompts(tok, [answer], "<think>")[0]}]),
    ]
    (ids,) = [c[1][0]["prompt_token_ids"] for c in calls if c[0] == "generate"]
    assert tok.decode(ids).endswith("assistant\n<think>")


def test_prefill_goes_to_answers_under_the_trained_prompts_only():
    systems = frozenset({"REFINE", "PLAIN"})
    assert starts_answer([{"role": "system", "content": "PLAIN"}, {"role": "user", "content": "q"}], systems)
    assert starts_answer([{"role": "system", "content": "REFINE"}, {"role": "user", "content": "q"}], systems)
    assert not starts_answer([{"role": "user", "content": "feedback on ..."}], systems)  # Self-Refine, scoring
    assert not starts_answer([{"role": "system", "content": "RRR attempt"}, {"role": "user", "content": "q"}], systems)
    assert not starts_answer([], systems)


def test_prefill_backend_keeps_the_order_of_mixed_chats(monkeypatch):
    calls = []

    def fake_generate(self, chats, params, on_finished=None, prefill=""):
        calls.append((len(chats), prefill))
        return [Completion(prefill + c[-1]["content"], 1, "stop") for c in chats]

    monkeypatch.setattr(HFBackend, "generate", fake_generate)
    backend = AnswerPrefillBackend("unused", "<think>", frozenset({"S"}))
    chats = [
        [{"role": "user", "content": "a"}],
        [{"role": "system", "content": "S"}, {"role": "user", "content": "b"}],
        [{"role": "user", "content": "c"}],
        [{"role": "system", "content": "S"}, {"role": "user", "content": "d"}],
    ]
    out = backend.generate(chats, GenParams())
    assert [c.text for c in out] == ["a", "<think>b", "c", "<think>d"]
    assert sorted(calls) == [(2, ""), (2, "<think>")]
    calls.clear()
    plain = AnswerPrefillBackend("unused", "", frozenset({"S"}))  # no prefill: one call
    assert [c.text for c in plain.generate(chats, GenParams())] == ["a", "b", "c", "d"] and calls == [(4, "")]
