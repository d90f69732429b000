"""The model's context length (runtime/context_length.py) in generation and in `pasr eval`: a
prompt that does not fit is its item's own error, a response stops at the context's end, and a
--max-new-tokens that cannot fit is refused in one line before anything is generated (issue 51).
The tiny model has 1024 positions."""

from __future__ import annotations

import json

import pytest

from runtime.context_length import ContextLengthError, check_new_tokens, context_length
from runtime.hf_generate import SamplingParams, generate_ids

GREEDY = SamplingParams(max_new_tokens=12, do_sample=False)


def test_context_length_from_a_config():
    assert context_length({"max_position_embeddings": 1024}) == 1024
    assert context_length({"n_positions": 2048}) == 2048  # GPT-2's name
    assert context_length({"hidden_size": 8}) is None
    check_new_tokens(1023, 1024)
    check_new_tokens(10**6, None)
    with pytest.raises(ContextLengthError, match="--max-new-tokens 1024 does not fit the model's context of 1024"):
        check_new_tokens(1024, 1024)


def test_a_prompt_that_fills_the_context_is_refused_before_generating(tiny):
    model, tok = tiny
    with pytest.raises(
        ContextLengthError, match="a prompt of 1030 tokens does not fit the model's context of 1024 positions"
    ):
        generate_ids(model, tok, [[5] * 20, [7] * 1030], GREEDY, context=1024)


def test_a_response_stops_at_the_end_of_the_context(tiny):
    """Each row of a batch stops (``length``) where its own context ends; tokens before that are
    the ones generation without the bound gives (greedy)."""
    model, tok = tiny
    prompts = [[11] * 30, [12] * 26, [13] * 20]
    free = generate_ids(model, tok, prompts, GREEDY, batch_size=3)
    bounded = generate_ids(model, tok, prompts, GREEDY, batch_size=3, context=36)
    for prompt, (ids, finish), (free_ids, _) in zip(prompts, bounded, free):
        room = 36 - len(prompt)
        assert finish == "length" and ids == free_ids[: min(room, len(free_ids))]
    assert [len(ids) for ids, _ in bounded] == [6, 10, 12]  # the last one's max_new_tokens comes first


def _dataset(path, questions):
    path.write_text(
        "".join(json.dumps({"id": f"q{i}", "question": q, "answer": "7"}) + "\n" for i, q in enumerate(questions))
    )
    return path


def test_pasr_eval_counts_a_prompt_over_the_context_as_its_own_error(tiny_model_dir, tmp_path, run_cli):
    """One problem longer than the model's context is recorded as a generation error saying so;
    the others in its chunk are answered. Before, it was generated past the model's 1024 positions
    and scored."""
    data = _dataset(
        tmp_path / "probs.jsonl", ["What is 3+4? " + "Think about it. " * 400, "What is 3+4?", "What is 2+5?"]
    )
    out = tmp_path / "out"
    rc, stdout, err = run_cli(
        [
            "eval",
            "--model",
            str(tiny_model_dir),
            "--dataset",
            str(data),
            "--method",
            "plain",
            "--backend",
            "hf",
            "--max-new-tokens",
            "8",
            "--threads",
            "1",
            "--dtype",
            "float32",
            "--progress",
            "off",
            "--out",
            str(out),
        ]
    )
    assert rc == 0, err
    rows = [json.loads(line) for line in next(out.rglob("samples.jsonl")).read_text().splitlines()]
    errors = [r for r in rows if r["format_reason"] == "generation_error"]
    assert len(rows) == 3 and len(errors) == 1 and errors[0]["prompt"].startswith("What is 3+4? Think")
    error = errors[0]["extra"]["error"]
    assert (
        error.startswith("ContextLengthError: a prompt of")
        and "does not fit the model's context of 1024 positions" in error
    )
    assert all(r["response_tokens"] > 0 for r in rows if r is not errors[0])


def test_pasr_eval_refuses_max_new_tokens_beyond_the_context(tiny_model_dir, tmp_path, run_cli):
    data = _dataset(tmp_path / "probs.jsonl", ["What is 3+4?"])
    rc, stdout, err = run_cli(
        [
            "eval",
            "--model",
            str(tiny_model_dir),
            "--dataset",
            str(data),
            "--method",
            "plain",
            "--backend",
            "hf",
            "--max-new-tokens",
            "1500",
            "--threads",
            "1",
            "--dtype",
            "float32",
            "--progress",
            "off",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert rc == 2 and "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert "--max-new-tokens 1500 does not fit the model's context of 1024 positions" in line and "at most 1023" in line
    assert (
        not list((tmp_path / "out").rglob("samples.jsonl"))
        or not next((tmp_path / "out").rglob("samples.jsonl")).read_text()
    )
