"""A loaded model owns its weights (runtime/owned_weights.py): rewriting its weights file in place
afterwards (``cp`` over it: the same inode, truncated and rewritten) leaves it as it was.
transformers' own load kept the file memory-mapped, and such a rewrite replaced a training run's
weights, updates and all (issue #63)."""

from __future__ import annotations

import shutil

import pytest
import torch

from runtime.model_loading import ModelLoadError, load_model
from tests.weights_files import copy_other_model_over, rewrite_in_place


def _weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("rewrite", [rewrite_in_place, copy_other_model_over], ids=["same-size", "cp"])
def test_a_loaded_model_keeps_its_weights_when_its_file_is_rewritten_in_place(tiny_model_dir, tmp_path, rewrite):
    folder = shutil.copytree(tiny_model_dir, tmp_path / "model")
    model = load_model(str(folder), progress_bar=False)
    before = _weights(model)
    rewrite(folder / "model.safetensors")
    reloaded = _weights(load_model(str(folder), progress_bar=False))
    assert any(not torch.equal(reloaded[k], before[k]) for k in before)  # the file holds other weights now
    for name, w in _weights(model).items():
        torch.testing.assert_close(w, before[name], rtol=0, atol=0, msg=name)
    with torch.no_grad():  # and an update in place stays the model's (a mapped page written to was dropped too)
        model.model.embed_tokens.weight.add_(1.0)
    rewrite(folder / "model.safetensors")
    assert torch.equal(model.model.embed_tokens.weight, before["model.embed_tokens.weight"] + 1.0)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_owned_load_is_transformers_load(tiny_model_dir, dtype):
    """The same tensors, dtypes, tied embedding, config and generation config as
    ``from_pretrained`` on the folder."""
    from transformers import AutoModelForCausalLM

    ours = load_model(str(tiny_model_dir), dtype=dtype, progress_bar=False)
    theirs = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=getattr(torch, dtype))
    a, b = ours.state_dict(), theirs.state_dict()
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name].dtype == b[name].dtype == getattr(torch, dtype)
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0, msg=name)
    assert ours.lm_head.weight is ours.model.embed_tokens.weight
    assert ours.config.to_dict() == theirs.config.to_dict()
    assert ours.generation_config.to_dict() == theirs.generation_config.to_dict()
    assert ours.name_or_path == theirs.name_or_path == str(tiny_model_dir)


def test_a_sharded_checkpoint_loads_all_its_shards(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    model.save_pretrained(tmp_path / "sharded", max_shard_size="600KB")
    assert len(list((tmp_path / "sharded").glob("model-*.safetensors"))) > 1
    loaded = load_model(str(tmp_path / "sharded"), progress_bar=False)
    for name, w in model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], w, rtol=0, atol=0, msg=name)


def test_a_weights_file_cut_in_its_data_is_one_line_naming_it(tiny_model_dir, tmp_path):
    folder = shutil.copytree(tiny_model_dir, tmp_path / "model")
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(ModelLoadError, match=f"cannot load model '{folder}': WeightsFileError: {weights} is cut short"):
        load_model(str(folder), progress_bar=False)


def test_a_model_owned_after_transformers_load_stays_tied_and_keeps_its_weights(tiny_model_dir, tmp_path):
    """The fallback for what the reader does not read (a hub name, no safetensors file): the
    mapped tensors copied one by one."""
    from transformers import AutoModelForCausalLM

    from runtime.owned_weights import own_tensors

    folder = shutil.copytree(tiny_model_dir, tmp_path / "model")
    model = AutoModelForCausalLM.from_pretrained(folder)
    own_tensors(model)
    before = _weights(model)
    rewrite_in_place(folder / "model.safetensors")
    assert model.lm_head.weight is model.model.embed_tokens.weight
    for name, w in _weights(model).items():
        torch.testing.assert_close(w, before[name], rtol=0, atol=0, msg=name)
