"""The cold-start SFT parquet (issue 11.3) read by verl's own ``MultiTurnSFTDataset``, as
``verl.trainer.sft_trainer`` reads it (its default dataset, ``data.messages_key: messages``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sft_file(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sft") / "warmup_sft.parquet"
    proc = subprocess.run(
        [sys.executable, "-m", "data.sft_parquet", "--out", str(out), "--n", "60", "--plain-fraction", "0.3"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out}: 60 traces" in proc.stdout
    return out


@pytest.fixture(scope="module")
def dataset(sft_file):
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    from runtime.model_loading import resolve_model_path

    tok = AutoTokenizer.from_pretrained(resolve_model_path("smollm2"))
    cfg = OmegaConf.create(
        {"messages_key": "messages", "pad_mode": "no_padding", "max_length": 1024, "truncation": "error"}
    )
    return MultiTurnSFTDataset(parquet_files=str(sft_file), tokenizer=tok, config=cfg), tok


def test_rows_are_pasr_format_traces_under_both_prompts(sft_file):
    import pyarrow.parquet as pq

    from prompts import PromptSet
    from rewards.extract import extract_answer
    from rewards.format import check_format

    rows = pq.read_table(sft_file).to_pylist()
    prompts = PromptSet.load()
    assert len(rows) == 60 and len({r["id"] for r in rows}) == 60
    by_variant = {v: [r for r in rows if r["variant"] == v] for v in ("refine", "plain")}
    assert 8 <= len(by_variant["plain"]) <= 30  # about 30% plain
    for r in rows:
        system, user, assistant = r["messages"]
        assert (system["role"], user["role"], assistant["role"]) == ("system", "user", "assistant")
        assert system["content"] == (prompts.refine if r["variant"] == "refine" else prompts.plain)
        fmt = check_format(assistant["content"])
        assert fmt.ok and fmt.reward == 1.0, (fmt, assistant["content"])  # the format PASR rewards
        assert extract_answer(assistant["content"]) == r["answer"]
        assert r["variant"] == "refine" or fmt.n_refine == 0
    assert any(check_format(r["messages"][-1]["content"]).n_refine > 0 for r in by_variant["refine"])
    assert all(r["id"].startswith("synthetic:") and ":train:" in r["id"] for r in rows)  # never the held-out split


def test_verl_sft_dataset_trains_on_the_assistant_trace_only(dataset, sft_file):
    import pyarrow.parquet as pq

    ds, tok = dataset
    rows = pq.read_table(sft_file).to_pylist()
    assert len(ds) == len(rows)
    for i in (0, 1, 2):
        item = ds[i]
        ids, mask = item["input_ids"], item["loss_mask"]
        trained = tok.decode(ids[mask.bool()])
        trace = rows[i]["messages"][-1]["content"]
        assert trained.startswith(trace) and trained[len(trace) :].strip() in ("<|im_end|>", tok.eos_token)
        assert rows[i]["messages"][1]["content"] in tok.decode(ids[~mask.bool()])  # the question is context only


def test_bad_arguments_fail_with_a_message(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "data.sft_parquet", "--out", str(tmp_path / "x.parquet"), "--plain-fraction", "2"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "--plain-fraction must be in [0, 1]" in proc.stderr
