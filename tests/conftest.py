"""Shared fixtures. The benchmark data sets live in ../shared/data beside the checkout (read-only,
never copied into the repo); tests that need them skip with a clear reason when absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("PASR_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED_DATA / "gsm8k_test.jsonl").is_file():
        pytest.skip(f"shared data sets not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture
def data_env(shared_data, monkeypatch):
    monkeypatch.setenv("PASR_DATA_DIR", str(shared_data))
    return shared_data


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A randomly initialised 2-layer Llama with SmolLM2's tokenizer: real transformers code
    paths (generate, KV cache, save/load) at a fraction of the cost of the real model."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from runtime.model_loading import resolve_model_path

    tok = AutoTokenizer.from_pretrained(resolve_model_path("smollm2"))
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    out = tmp_path_factory.mktemp("tiny_model")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_cpu_args(tiny_model_dir) -> list[str]:
    """The GPU benchmarks' options (benchmarks.gpu_check, benchmarks.gpu_scale) that run their
    local-engine parts on this CPU with the tiny model, one thread each."""
    return [
        "--device",
        "cpu",
        "--preset",
        "tiny",
        "--local-override",
        f"model.path={tiny_model_dir}",
        "--local-override",
        "model.threads=1",
    ]


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    """The tiny model and its tokenizer, loaded as the local engine loads a model."""
    from runtime.model_loading import load_model_and_tokenizer

    model, tok, _ = load_model_and_tokenizer(str(tiny_model_dir))
    return model, tok


@pytest.fixture(scope="session")
def broken_model_dirs(tiny_model_dir, tmp_path_factory) -> dict[str, Path]:
    """Copies of the tiny model that transformers cannot load, one way each: no weights file, a
    config.json that is not JSON, a truncated weights file (safetensors raises its own error
    type, not an OSError)."""
    import shutil

    root = tmp_path_factory.mktemp("broken_models")
    dirs = {}
    for name in ("no_weights", "bad_config", "truncated_weights"):
        dirs[name] = shutil.copytree(tiny_model_dir, root / name)
    (dirs["no_weights"] / "model.safetensors").unlink()
    (dirs["bad_config"] / "config.json").write_text("{not json")
    weights = dirs["truncated_weights"] / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    return dirs


@pytest.fixture
def run_cli(capsys):
    """``pasr ARGV`` in-process: ``(exit code, stdout, stderr)``."""
    from pasr_cli import main

    def run(argv):
        rc = main(argv)
        out, err = capsys.readouterr()
        return rc, out, err

    return run


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> Path:
    """``pasr stats`` input dumps of tests/stats_records.py's records: training run "runA" (with two
    corrupt lines, its in-training evaluation, a metrics.jsonl, a judge cache that is no dump), and
    the eval runs "a_pasr" and "b_plain" (with a line that is no record). tests/test_stats_rrr.py
    has a ``dumps`` of its own."""
    from tests.stats_records import eval_records, train_records, val_records, write

    root = tmp_path_factory.mktemp("dumps")
    step0, step1 = train_records()
    write(root / "runA" / "rollouts" / "step_000000.jsonl", step0)
    # line 2 is not JSON, line 4 is a JSON array
    write(root / "runA" / "rollouts" / "step_000001.jsonl", [step1[0], "{not json", step1[1], "[1, 2]", step1[2]])
    write(root / "runA" / "eval" / "heldout.jsonl", val_records())
    write(root / "runA" / "judge_cache.jsonl", ['{"key": "abc", "score": 1.0}'])  # not a dump: skipped
    (root / "runA" / "metrics.jsonl").write_text(
        '{"step": 0, "pasr/refine_rate": 0.5, "timing_s/gen": 1.5}\n{"step": 1, "pasr/refine_rate": 0.75}\n'
    )
    pasr, plain = eval_records()
    write(root / "a_pasr" / "samples.jsonl", pasr)
    (root / "a_pasr" / "summary.json").write_text('{"accuracy": 0.6}')
    write(root / "b_plain" / "samples.jsonl", plain + ['{"run_id": "evP", "response": "x", "variant": "plain"}'])
    return root


@pytest.fixture(scope="module")
def rrr_prompts():
    from recipe.rrr_step import RrrPrompts

    return RrrPrompts.load()
