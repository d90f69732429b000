"""``pasr eval --model CKPT`` on a verl checkpoint: a real FSDP checkpoint written by verl's own
``FSDPCheckpointManager`` (2 ranks, FSDP2 on CPU over gloo, a tiny random Llama with SmolLM2's
tokenizer) in the trainer's layout (``run/global_step_N/actor``), merged with verl's model merger
and evaluated end to end with the hf backend."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]

# Runs as a script (torch.multiprocessing's spawn re-imports the main module, which must be a file).
WRITER = textwrap.dedent(
    """
    import json, os, sys
    import torch, torch.distributed as dist
    import torch.multiprocessing as mp

    def worker(rank, world, actor_dir, tok_dir, port):
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        torch.set_num_threads(1)
        dist.init_process_group("gloo", rank=rank, world_size=world)
        from omegaconf import OmegaConf
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
        from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager

        tok = AutoTokenizer.from_pretrained(tok_dir)
        cfg = LlamaConfig(
            vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=1, max_position_embeddings=256, tie_word_embeddings=False,
            eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
            architectures=["LlamaForCausalLM"],  # set on a model verl loads with from_pretrained
        )
        torch.manual_seed(0)
        model = LlamaForCausalLM(cfg)
        if rank == 0:  # the weights every rank starts from, for the test to compare with
            torch.save(model.state_dict(), os.path.join(os.path.dirname(os.path.dirname(actor_dir)), "reference.pt"))
        mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("fsdp",))
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        manager = FSDPCheckpointManager(
            model=model, optimizer=None, lr_scheduler=None, processing_class=tok,
            checkpoint_config=OmegaConf.create({"save_contents": ["model"], "load_contents": ["model"]}),
        )
        manager.save_checkpoint(local_path=actor_dir, global_step=2)
        dist.destroy_process_group()

    if __name__ == "__main__":
        actor_dir, tok_dir, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
        mp.spawn(worker, args=(2, actor_dir, tok_dir, port), nprocs=2)
        run_dir = os.path.dirname(os.path.dirname(actor_dir))
        with open(os.path.join(run_dir, "latest_checkpointed_iteration.txt"), "w") as f:
            f.write("2")
    """
)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def verl_run(tmp_path_factory):
    """``run/global_step_2/actor`` as verl's trainer lays it out (sharded over 2 ranks)."""
    from runtime.model_loading import resolve_model_path

    root = tmp_path_factory.mktemp("verl_ckpt")
    run = root / "run"
    actor = run / "global_step_2" / "actor"
    actor.mkdir(parents=True)
    script = root / "write_ckpt.py"
    script.write_text(WRITER)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(
        [sys.executable, str(script), str(actor), resolve_model_path("smollm2"), str(_free_port())],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=root,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run


def test_the_checkpoint_is_what_verl_writes(verl_run):
    actor = verl_run / "global_step_2" / "actor"
    assert json.loads((actor / "fsdp_config.json").read_text())["world_size"] == 2
    assert {p.name for p in actor.glob("model_world_size_2_rank_*.pt")} == {
        "model_world_size_2_rank_0.pt",
        "model_world_size_2_rank_1.pt",
    }
    hf = actor / "huggingface"
    # config and tokenizer only: nothing transformers or vLLM could load weights from
    assert (hf / "config.json").is_file() and (hf / "tokenizer_config.json").is_file()
    assert not list(hf.glob("*.safetensors")) and not list(hf.glob("*.bin"))
    shard = torch.load(actor / "model_world_size_2_rank_0.pt", weights_only=False)
    from torch.distributed.tensor import DTensor

    assert all(isinstance(v, DTensor) for v in shard.values())


def test_find_actor_dir_accepts_the_layouts(verl_run, tmp_path):
    from runtime.hf_export import find_actor_dir, is_verl_checkpoint

    actor = verl_run / "global_step_2" / "actor"
    for path in (verl_run, verl_run / "global_step_2", actor, actor / "huggingface"):
        assert find_actor_dir(path) == actor, path
    plain = tmp_path / "hf_model"
    plain.mkdir()
    (plain / "config.json").write_text("{}")
    assert not is_verl_checkpoint(plain) and not is_verl_checkpoint(tmp_path / "missing")


def test_merge_gives_the_trained_weights_once(verl_run, tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from runtime.model_loading import resolve_model_path

    monkeypatch.setenv("PASR_CACHE", str(tmp_path / "cache"))
    merged = Path(resolve_model_path(str(verl_run / "global_step_2")))
    assert merged.parent == tmp_path / "cache" / "verl_merged" and "global_step_2" in merged.name
    model = AutoModelForCausalLM.from_pretrained(merged, dtype=torch.bfloat16)
    reference = torch.load(verl_run / "reference.pt")
    state = model.state_dict()
    assert set(state) == set(reference)
    for key, value in reference.items():
        assert torch.equal(state[key], value.to(torch.bfloat16)), key  # shards joined in the right order
    assert (
        AutoTokenizer.from_pretrained(merged).eos_token
        == AutoTokenizer.from_pretrained(verl_run / "global_step_2" / "actor" / "huggingface").eos_token
    )
    # the run directory names the same checkpoint; the second call finds the cache
    stamp = (merged / "config.json").stat().st_mtime_ns
    assert Path(resolve_model_path(str(verl_run))) == merged
    assert (merged / "config.json").stat().st_mtime_ns == stamp


def test_an_incomplete_checkpoint_fails_with_one_line(verl_run, tmp_path, monkeypatch):
    import shutil

    from runtime.model_loading import ModelNotFoundError, resolve_model_path

    broken = tmp_path / "global_step_2"
    shutil.copytree(verl_run / "global_step_2", broken)
    (broken / "actor" / "model_world_size_2_rank_1.pt").unlink()
    monkeypatch.setenv("PASR_CACHE", str(tmp_path / "cache"))
    with pytest.raises(
        ModelNotFoundError, match=r"incomplete verl checkpoint: world_size=2, missing model shards of ranks \[1\]"
    ):
        resolve_model_path(str(broken))


def test_pasr_eval_runs_on_a_verl_checkpoint(verl_run, tmp_path, monkeypatch, capsys):
    from pasr_cli import main

    monkeypatch.setenv("PASR_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "two.jsonl"
    data.write_text("".join(json.dumps({"question": f"What is {k}+{k}?", "answer": str(2 * k)}) + "\n" for k in (1, 2)))
    out = tmp_path / "eval"
    argv = [
        "eval",
        "--model",
        str(verl_run / "global_step_2"),
        "--dataset",
        str(data),
        "--method",
        "pasr",
        "--backend",
        "hf",
        "--max-new-tokens",
        "4",
        "--threads",
        "1",
        "--progress",
        "off",
        "--out",
        str(out),
    ]
    assert main(argv) == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(0 < r["response_tokens"] <= 4 for r in rows)
    assert json.loads((out / "summary.json").read_text())
