"""`pasr eval`'s generation backends: vLLM through a fake engine (sampling parameters, eager mode
by model size), build_backend, the hf backend's one-line load errors, and (slow) a real SmolLM2
run through the hf backend."""

from __future__ import annotations

import sys
import types

import pytest

from eval.backends import BackendError, GenParams, VLLMBackend, build_backend
from eval.run import run_eval
from tests.scripted_eval import cfg_for, golds, pasr_text, records_of


def fake_vllm(monkeypatch, outputs_for):
    mod = types.ModuleType("vllm")
    created = {}

    class SamplingParams:
        def __init__(self, **kw):
            self.kw = kw

    class LLM:
        def __init__(self, **kw):
            created.update(kw)
            self.calls = []

        def chat(self, messages, sampling_params, use_tqdm=True):
            self.calls.append((messages, sampling_params.kw))
            return [
                types.SimpleNamespace(outputs=[types.SimpleNamespace(text=t, token_ids=ids, finish_reason=fr)])
                for t, ids, fr in (outputs_for(m) for m in messages)
            ]

    mod.LLM, mod.SamplingParams = LLM, SamplingParams
    monkeypatch.setitem(sys.modules, "vllm", mod)
    return created


def test_vllm_backend_with_fake_engine(data_env, tmp_path, monkeypatch):
    model_dir = tmp_path / "ckpt"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    gold = golds(data_env, "gsm8k", 3)
    created = fake_vllm(monkeypatch, lambda m: (pasr_text(gold[m[-1]["content"]]), [5] * 17 + [2], "stop"))
    backend = build_backend("vllm", str(model_dir), seed=3, max_model_len=4096, batch_size=99)
    assert isinstance(backend, VLLMBackend)
    summary = run_eval(
        cfg_for(tmp_path, model=str(model_dir), method="pasr", backend="vllm", limit=3, max_new_tokens=99),
        backend=backend,
    )
    assert created["model"] == str(model_dir) and created["seed"] == 3 and created["max_model_len"] == 4096
    ((messages, sp),) = backend.llm.calls
    assert len(messages) == 3 and messages[0][0]["role"] == "system" and "<refine>" in messages[0][0]["content"]
    assert sp == {"n": 1, "max_tokens": 99, "temperature": 0.0, "top_p": 1.0}
    recs = records_of(tmp_path / "run")
    assert all(r.response_tokens == 18 and r.finish_reason == "stop" and r.acc == 1.0 for r in recs)
    assert summary["datasets"]["gsm8k"]["mean_tokens"] == 18.0

    sampled = backend.sampling_params(GenParams(max_new_tokens=10, temperature=0.6, top_p=0.95))
    assert sampled.kw == {"n": 1, "max_tokens": 10, "temperature": 0.6, "top_p": 0.95}


@pytest.mark.parametrize(
    "weights_mb, asked, eager",
    [(270, None, True), (2100, None, False), (270, False, False), (2100, True, True), (0, None, False)],
)
def test_vllm_eager_for_small_models_unless_asked(tmp_path, monkeypatch, weights_mb, asked, eager):
    """auto (None) skips CUDA graphs and torch.compile for weights under 2 GiB; on/off is obeyed;
    a folder with no weight file to size keeps vLLM's default."""
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    if weights_mb:
        with open(model_dir / "model.safetensors", "wb") as f:
            f.truncate(weights_mb * 1024 * 1024)  # sparse: sized, not written
    created = fake_vllm(monkeypatch, lambda m: ("", [], "stop"))
    build_backend("vllm", str(model_dir), enforce_eager=asked).load()
    assert created["enforce_eager"] is eager


def test_eval_cli_enforce_eager_flag():
    import argparse

    from eval.cli import build_parser

    parser = argparse.ArgumentParser()
    build_parser(parser)
    assert parser.parse_args(["--model", "m", "--dataset", "gsm8k"]).enforce_eager == "auto"
    assert parser.parse_args(["--model", "m", "--dataset", "gsm8k", "--enforce-eager", "on"]).enforce_eager == "on"


def test_vllm_backend_missing_model(tmp_path, monkeypatch):
    fake_vllm(monkeypatch, lambda m: ("", [], "stop"))
    with pytest.raises(BackendError, match="model path does not exist"):
        VLLMBackend(str(tmp_path / "nope")).load()


def test_build_backend_rejects_unknown():
    with pytest.raises(BackendError, match="unknown backend"):
        build_backend("tpu", "m")


@pytest.mark.parametrize("broken", ["no_weights", "bad_config", "truncated_weights"])
def test_hf_backend_unloadable_model_is_one_line(broken_model_dirs, broken):
    """A truncated weights file raised safetensors' own error type, past the OSError handler."""
    from eval.backends import HFBackend

    path = broken_model_dirs[broken]
    with pytest.raises(BackendError, match=f"^cannot load model '{path}': ") as exc:
        HFBackend(str(path), dtype="float32", device="cpu", threads=1).load()
    assert "\n" not in str(exc.value)


@pytest.mark.slow
def test_hf_backend_smollm2_end_to_end(data_env, tmp_path, run_cli):
    out = tmp_path / "smol"
    argv = [
        "eval",
        "--model",
        "smollm2",
        "--dataset",
        "gsm8k",
        "--method",
        "pasr",
        "--backend",
        "hf",
        "--limit",
        "2",
        "--max-new-tokens",
        "16",
        "--threads",
        "1",
        "--progress",
        "off",
        "--out",
        str(out),
    ]
    rc, stdout, err = run_cli(argv)
    assert rc == 0, err
    recs = records_of(out)
    assert len(recs) == 2 and all(0 < r.response_tokens <= 16 and r.acc is not None for r in recs)
    assert "| gsm8k | 2 | 2 |" in stdout
