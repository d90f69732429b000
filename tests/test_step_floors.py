"""The FLOP counting of ``benchmarks.step_floors`` on a tiny made-up model: known shapes and
token lists in, hand-counted FLOPs out. No model is loaded and nothing is timed: a wrong count
would make every floor, and so every ratio the benchmark prints, quietly wrong."""

from types import SimpleNamespace

import pytest

from benchmarks.step_floors import (
    Rates,
    Shapes,
    Work,
    floor_seconds,
    generation_work,
    micro_batches,
    pass_work,
    total_flops,
)

# hidden 4, 2 layers, 2 query heads and 1 KV head of 2, MLP 8, vocabulary 10
TINY = Shapes(hidden=4, layers=2, heads=2, kv_heads=1, head_dim=2, intermediate=8, vocab=10)
TOKEN = 2 * 2 * (4 * 4 + 4 * 2 + 4 * 2 + 4 * 4 + 3 * 4 * 8)  # q, k, v, o, gate, up, down: 576
PAIR = 4 * 2 * 2 * 2  # score + weighted value, 2 heads of 2, 2 layers: 32
LOGIT = 2 * 4 * 10  # 80


def by_kind(work):
    out = {}
    for w in work:
        out[w.kind] = out.get(w.kind, 0) + w.flops
    return out


def test_shapes_of_a_config_and_per_token_costs():
    config = SimpleNamespace(
        hidden_size=4,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=2,
        intermediate_size=8,
        vocab_size=10,
    )
    assert Shapes.of(config) == TINY
    assert (TINY.token_flops, TINY.pair_flops, TINY.logit_flops) == (TOKEN, PAIR, LOGIT) == (576, 32, 80)
    del config.head_dim  # hidden / heads where the config names none
    assert Shapes.of(config).head_dim == 2


def test_a_repeated_prompt_is_counted_once():
    # one prompt of 3 tokens run once (pairs 1 + 2 + 3); responses of 2 and 1 tokens feed 1 and 0
    # tokens (the one fed sits at position 3 and sees 4 keys) and need 2 + 1 rows of logits
    work = pass_work(TINY, [[1, 2, 3], [1, 2, 3]], [[7, 8], [9]])
    assert by_kind(work) == {"linear": 4 * TOKEN, "attention": (6 + 4) * PAIR, "logits": 3 * LOGIT}
    assert total_flops(work) == 2304 + 320 + 240
    assert {w.rows for w in work if w.kind != "logits"} == {4}  # one call of 4 tokens


def test_a_shared_prefix_is_counted_once():
    # [1, 2, 3] is shared: run once (pairs 6), then each prompt's last token at position 3 (4 keys
    # each); each 1-token response feeds nothing and needs one row of logits
    work = pass_work(TINY, [[1, 2, 3, 4], [1, 2, 3, 5]], [[6], [6]])
    assert by_kind(work) == {"linear": 5 * TOKEN, "attention": (6 + 4 + 4) * PAIR, "logits": 2 * LOGIT}


def test_distinct_prompts_without_a_common_prefix_and_empty_responses():
    work = pass_work(TINY, [[1, 2], [3, 4]], [[], [5, 6, 7]])
    # 4 prompt tokens (pairs 3 + 3), response of 3 feeds 2 at positions 2 and 3 (3 + 4 keys)
    assert by_kind(work) == {"linear": 6 * TOKEN, "attention": 13 * PAIR, "logits": 3 * LOGIT}
    with pytest.raises(ValueError):
        pass_work(TINY, [[1]], [])


def test_generation_counts_the_same_flops_as_a_pass_with_decode_steps_as_wide_as_the_live_rows():
    prompts, responses = [[1, 2, 3], [1, 2, 3], [4, 5]], [[7, 8, 9], [7], [6, 6]]
    gen, one_pass = generation_work(TINY, prompts, responses, batch_size=8), pass_work(TINY, prompts, responses)
    assert by_kind(gen) == by_kind(one_pass)
    decode = [w for w in gen if w.kind == "linear"][1:]  # after the prompt pass
    # token 1 is sampled by the rows of 3 and 2 tokens, token 2 by the row of 3 alone
    assert [(w.rows, w.flops) for w in decode] == [(2, 2 * TOKEN), (1, TOKEN)]
    # batches of 2 by prompt length: the two [1, 2, 3] rows, then [4, 5]; the prompts share nothing,
    # so the split costs the same FLOPs, in narrower calls
    split = generation_work(TINY, prompts, responses, batch_size=2)
    assert total_flops(split) == total_flops(gen)
    assert max(w.rows for w in split if w.kind == "linear") < max(w.rows for w in gen if w.kind == "linear")
    assert by_kind(generation_work(TINY, [[1, 2]], [[]], 4)) == {"linear": 2 * TOKEN, "attention": 3 * PAIR}


def test_micro_batches_split_in_order():
    assert micro_batches([1, 2, 3], ["a", "b", "c"], 2) == [([1, 2], ["a", "b"]), ([3], ["c"])]


def test_floor_divides_by_the_rate_at_the_rows_and_adds_a_backward_pass():
    rates = Rates(
        "float32",
        forward={"linear": {1: 10.0, 100: 1000.0}, "logits": {1: 5.0}},
        backward={"linear": {1: 20.0, 100: 2000.0}, "logits": {1: 5.0}},
    )
    assert rates.at("linear", 10) == pytest.approx(100.0)  # log-linear between 1 and 100
    assert rates.at("attention", 1000) == 1000.0  # held beyond the grid, at the linear rate
    work = [Work("linear", 100, 1000.0), Work("logits", 3, 10.0)]
    assert floor_seconds(work, rates) == pytest.approx(1.0 + 2.0)
    assert floor_seconds(work, rates, train=True) == pytest.approx(3.0 + 2 * 1000 / 2000 + 2 * 10 / 5)
