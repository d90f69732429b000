"""pasr.draft_credit=value: a draft's tokens never get an advantage against the draft."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from data.records import PLAIN, REFINE, RolloutRecord
from recipe.advantages import DRAFT_CLIPPED
from recipe.draft_credit import (
    DRAFT_END,
    DRAFT_SIGN,
    DRAFT_START,
    draft_columns,
    draft_sign,
    draft_token_span,
    tokens_before,
)
from recipe.local_engine.config import AlgoConfig
from recipe.local_engine.policy_update import TrainRollout, build_batch
from recipe.pasr_config import ConfigError, load_pasr_config
from rewards.format import check_format


def chars(text: str) -> list[int]:
    """A character-level 'tokenizer': one id per character."""
    return [ord(c) for c in text]


def decode_chars(ids) -> str:
    return "".join(map(chr, ids))


def record(response: str, gold: str, variant: str = REFINE, acc: float | None = 1.0) -> RolloutRecord:
    fmt = check_format(response)
    return RolloutRecord(
        run_id="t", query_id="q", data_source="synthetic", variant=variant, prompt="?", response=response,
        response_tokens=len(response), format_ok=fmt.ok, format_reason=fmt.reason, n_refine=fmt.n_refine,
        extracted_answer=None, gold=gold, acc=acc,
    )


WRONG_DRAFT = "<think>21 + 57 = 102. <refine>21 + 50 = 71, 71 + 7 = 78</refine></think><answer>78</answer>"
RIGHT_DRAFT = "<think>21 + 57 = 78. <refine>21 + 50 = 71, 71 + 7 = 79</refine></think><answer>79</answer>"
NO_REFINE = "<think>21 + 57 = 78.</think><answer>78</answer>"


def test_draft_sign_reads_the_value_before_the_first_refine():
    assert draft_sign(record(WRONG_DRAFT, "78")) == -1
    assert draft_sign(record(RIGHT_DRAFT, "78", acc=0.0)) == 1  # the final answer does not matter
    assert draft_sign(record(NO_REFINE, "78")) == 0  # nothing refined: no draft
    assert draft_sign(record(WRONG_DRAFT, "78", variant=PLAIN)) == 0  # plain rows are not PASR's drafts
    assert draft_sign(record(WRONG_DRAFT, "seventy-eight")) == 0  # no numeric gold: nothing to judge
    assert draft_sign(record("<think>Hmm. <refine>21 + 57 = 78</refine></think><answer>78</answer>", "78")) == 0


def test_tokens_before_gives_a_token_that_straddles_the_point_to_what_starts_there():
    tokens = ["21 + 57", " = 1", "02", ". <", "refine>", "78"]
    ids = list(range(len(tokens)))
    decode = lambda xs: "".join(tokens[i] for i in xs)  # noqa: E731
    text = decode(ids)
    assert tokens_before(decode, ids, text.find("<refine>")) == 3  # ". <" opens the tag
    assert tokens_before(decode, ids, text.find("102")) == 1  # " = 1" holds the number's first digit
    assert tokens_before(decode, ids, 0) == 0 and tokens_before(decode, ids, -1) == 0
    assert tokens_before(decode, ids, 10_000) == len(ids)


def test_draft_token_span():
    tokens = ["<think>", "21 + 57", " = 1", "02", ". <", "refine>", "78", "</refine></think><answer>78</answer>"]
    ids = list(range(len(tokens)))
    decode = lambda xs: "".join(tokens[i] for i in xs)  # noqa: E731
    text = decode(ids)
    assert draft_token_span(decode, ids, text) == (2, 4)  # " = 1", "02": every token of 102
    # a prefilled "<think>" is in the text, not in the ids
    assert draft_token_span(decode, ids[1:], text, text_offset=len("<think>")) == (1, 3)
    assert draft_token_span(decode, ids, NO_REFINE) == (0, 0)


def test_draft_columns_from_token_ids_after_a_prefill():
    recs = [record(WRONG_DRAFT, "78"), record(RIGHT_DRAFT, "78"), record(NO_REFINE, "78")]
    prefill = "<think>"
    ids = [chars(r.response[len(prefill):]) for r in recs]  # the prefill sits in the prompt, not the ids
    cols = draft_columns(recs, ids, decode_chars, text_offset=len(prefill))
    assert cols[DRAFT_SIGN].tolist() == [-1, 1, 0]
    clipped = [decode_chars(i[a:b]) for i, a, b in zip(ids, cols[DRAFT_START], cols[DRAFT_END])]
    assert clipped == ["102", "78", ""]
    assert all(col.dtype == np.int64 for col in cols.values())


def _batch(signs, rewards, start=1, end=3, length=6, mask=None):
    """One GRPO group whose rows all have their draft at tokens [start, end)."""
    rows = [TrainRollout("q", [1, 2], list(range(10, 10 + length)), reward) for reward in rewards]
    n = len(rows)
    draft = {DRAFT_START: np.full(n, start), DRAFT_END: np.full(n, end), DRAFT_SIGN: np.array(signs)}
    return build_batch(rows, 0, AlgoConfig(), mask=mask, draft=draft)


def test_build_batch_clips_only_the_draft_tokens_that_contradict_their_draft():
    # one GRPO group: rewards 3, 3, 1, 1 -> advantages +a, +a, -a, -a
    adv = _batch(signs=[-1, 0, 1, 0], rewards=[3.0, 3.0, 1.0, 1.0]).batch["advantages"]
    a = adv[1, 0].item()
    assert a > 0
    # wrong draft reached a right answer: the draft is not reinforced, the rest is
    assert adv[0].tolist() == pytest.approx([a, 0.0, 0.0, a, a, a])
    assert adv[1].tolist() == pytest.approx([a] * 6)  # no draft: the outcome everywhere
    # right draft that a refine broke: the draft is not punished, the rest is
    assert adv[2].tolist() == pytest.approx([-a, 0.0, 0.0, -a, -a, -a])
    assert adv[3].tolist() == pytest.approx([-a] * 6)


def test_agreeing_drafts_and_the_outcome_default_are_left_alone():
    agree = _batch(signs=[1, -1], rewards=[3.0, 1.0])
    plain = _batch(signs=[0, 0], rewards=[3.0, 1.0])
    assert torch.equal(agree.batch["advantages"], plain.batch["advantages"])
    assert agree.meta_info[DRAFT_CLIPPED] == 0
    clipped = _batch(signs=[-1, 1], rewards=[3.0, 1.0])
    assert clipped.meta_info[DRAFT_CLIPPED] == 2


def test_masked_rows_stay_at_zero_and_columns_travel_with_rows():
    data = _batch(signs=[-1, 1, 1], rewards=[3.0, 1.0, 2.0], mask=[True, True, False])
    assert len(data) == 2
    assert data.non_tensor_batch[DRAFT_SIGN].tolist() == [-1, 1]
    assert data.non_tensor_batch[DRAFT_START].tolist() == [1, 1] and data.non_tensor_batch[DRAFT_END].tolist() == [3, 3]
    assert data.batch["advantages"][:, 1:3].abs().sum() == 0  # both drafts contradicted their outcome
    assert data.batch["advantages"][:, [0, 3, 4, 5]].abs().min() > 0


def test_draft_credit_is_validated():
    assert load_pasr_config({"draft_credit": "value"}).draft_credit == "value"
    assert load_pasr_config({}).draft_credit == "outcome"  # the paper
    with pytest.raises(ConfigError, match="pasr.draft_credit"):
        load_pasr_config({"draft_credit": "mask"})
