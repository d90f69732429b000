"""Answer extraction, the refine reward's tie/tolerance rules and the combined PASR reward."""

import pytest

from rewards.extract import extract_answer, gsm8k_gold, last_boxed
from rewards.pasr import RewardWeights, score_group
from rewards.refine import plain_baseline, refine_reward


@pytest.mark.parametrize(
    "text,expected",
    [
        ("<think>..</think><answer>27</answer>", "27"),
        ("<think>..</think><answer>so \\boxed{1} or \\boxed{\\frac{1}{2}}</answer>", "\\frac{1}{2}"),
        ("The answer is \\boxed{42}.", "42"),
        ("<answer>  </answer>", None),
        ("no answer here 12", None),
        ("<think>\\boxed{3}</think><answer>5</answer>", "5"),  # the answer block wins
        ("<answer>1</answer> then <answer>2</answer>", "2"),
    ],
)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


def test_extract_last_number_fallback_is_opt_in():
    assert extract_answer("so it is 1,234") is None
    assert extract_answer("so it is 1,234", fallback_last_number=True) == "1234"


def test_last_boxed_nested_and_unbalanced():
    assert last_boxed("\\boxed{\\sqrt{2}}") == "\\sqrt{2}"
    assert last_boxed("\\boxed{1} \\boxed{2") == "1"
    assert last_boxed("nothing") is None


def test_gsm8k_gold():
    assert gsm8k_gold("work\n#### 1,000") == "1000"
    with pytest.raises(ValueError):
        gsm8k_gold("no marker")


PAPER = dict(tie_value=-0.5, zeta=1e-6)


def test_refine_reward_rules():
    assert refine_reward(1.0, True, 0.5, **PAPER).value == 1.0
    assert refine_reward(0.0, True, 0.5, **PAPER).value == -1.0
    tie = refine_reward(1.0, True, 1.0, **PAPER)
    assert tie.value == -0.5 and tie.outcome == "tie"  # the paper's tie problem: all correct -> penalised
    assert refine_reward(1.0, True, 1.0, tie_value=0.0, zeta=1e-6).value == 0.0
    assert refine_reward(0.0, False, 0.5, **PAPER).outcome == "none"
    assert refine_reward(1.0, True, None, **PAPER).outcome == "no_baseline"


def test_refine_reward_tolerance_avoids_float_equality():
    # 2/3 from three plain rollouts vs a continuous judge's 0.6667: a tie within zeta
    assert refine_reward(0.6667, True, 2 / 3, tie_value=-0.5, zeta=1e-3).outcome == "tie"
    assert refine_reward(0.6667, True, 2 / 3, tie_value=-0.5, zeta=0.0).outcome == "better"


def test_reward_settings_have_one_default_the_config():
    """rewards/ takes tie_value, zeta and the weights as arguments; PasrConfig holds the defaults."""
    from recipe.pasr_config import PasrConfig

    with pytest.raises(TypeError):
        refine_reward(1.0, True, 1.0)  # no hidden default
    with pytest.raises(TypeError):
        RewardWeights()
    cfg = PasrConfig()
    assert (cfg.tie_value, cfg.zeta) == (-0.5, 1e-6) and cfg.weights == RewardWeights(1.0, 1.0, 1.0)


def test_plain_baseline_skips_judge_errors():
    assert plain_baseline([1.0, None, 0.0]) == 0.5
    assert plain_baseline([None]) is None


def test_score_group_components_and_weights():
    responses = [
        "<think>a <refine>b</refine></think><answer>4</answer>",
        "<think>a</think><answer>4</answer>",
        "4",
        "<think>a <refine>b</refine></think><answer>5</answer>",
    ]
    out = score_group(responses, [1.0, 1.0, 1.0, None], [0.0, 1.0], weights=RewardWeights(1.0, 2.0, 0.5), **PAPER)
    assert [r.refine_outcome for r in out] == ["better", "none", "none", "judge_error"]
    assert out[0].total == pytest.approx(1.0 + 2.0 + 0.5)
    assert out[1].total == pytest.approx(1.0 + 2.0)
    assert out[2].total == pytest.approx(-1.0 + 2.0) and out[2].format_reason == "missing_think"
    assert out[3].total is None and out[3].judge_error
    assert all(r.baseline == 0.5 for r in out)


def test_score_group_length_mismatch():
    with pytest.raises(ValueError):
        score_group(["a"], [1.0, 0.0], [1.0], weights=RewardWeights(1.0, 1.0, 1.0), **PAPER)


def test_score_group_pays_rollouts_whose_refines_all_restate_the_empty_refine_value():
    restate = "<think>94 + 3 = 97. <refine>94 + 3 = 97, so 97 is right.</refine></think><answer>97</answer>"
    worked = "<think>94 + 3 = 97. <refine>90 + 3 = 93, 93 + 4 = 97, so 97 is right.</refine></think><answer>97</answer>"
    mixed = "<think>94 + 3 = 97. <refine>97</refine> ok <refine>90 + 3 = 93</refine></think><answer>97</answer>"
    w = RewardWeights(1.0, 1.0, 1.0)
    paid = score_group(
        [restate, worked, mixed], [1.0] * 3, [0.0, 1.0], weights=w, tie_value=0.0, zeta=1e-6, empty_refine_value=0.0
    )
    assert [r.refine_outcome for r in paid] == ["empty", "better", "better"]
    assert [r.total for r in paid] == [2.0, 3.0, 3.0]
    paper = score_group([restate], [1.0], [0.0, 1.0], weights=w, **PAPER)
    assert paper[0].refine_outcome == "better" and paper[0].total == 3.0


def test_empty_refine_value_is_no_refine_right_or_wrong():
    """pasr.empty_refine_value=0.0: an all-empty rollout earns what not refining earns, whether
    its answer is right or wrong; a refine that does something is compared as before; unset
    (the paper), an empty refine is paid like any refine."""
    assert refine_reward(1.0, True, 0.5, **PAPER, empty=True).value == 1.0  # no value given: the paper
    fixed = dict(tie_value=0.0, zeta=1e-6, empty=True, empty_value=0.0)
    for acc, baseline in ((1.0, 0.5), (0.0, 0.5), (1.0, 1.0), (0.5, 0.5)):
        r = refine_reward(acc, True, baseline, **fixed)
        assert (r.value, r.outcome, r.baseline) == (0.0, "empty", baseline)
    assert refine_reward(0.0, True, 0.5, **{**fixed, "empty": False}).value == -1.0
    assert refine_reward(1.0, True, 0.5, **{**fixed, "empty": False}).outcome == "better"
    assert refine_reward(1.0, False, 0.5, **fixed).outcome == "none"  # no refine is not an empty refine
    no_baseline = refine_reward(1.0, True, None, **{**fixed, "empty_value": -0.5})
    assert (no_baseline.value, no_baseline.outcome) == (0.0, "no_baseline")  # nothing to compare: no signal


def test_score_group_empty_refine_value_ranks_a_worked_check_above_a_restatement():
    """The point of ``pasr.empty_refine_value=0.0``: with the paper's credit a right restatement
    earns what a right worked check earns; here it earns what a right answer without refine
    earns, and a wrong restatement is not blamed more than a wrong answer without refine."""
    restate = "<think>94 + 3 = 97. <refine>94 + 3 = 97, so 97 is right.</refine></think><answer>97</answer>"
    worked = "<think>94 + 3 = 97. <refine>90 + 3 = 93, 93 + 4 = 97, so 97 is right.</refine></think><answer>97</answer>"
    plain = "<think>94 + 3 = 97.</think><answer>97</answer>"
    wrong_restate = "<think>94 + 3 = 98. <refine>94 + 3 = 98, so 98 is right.</refine></think><answer>98</answer>"
    wrong_plain = "<think>94 + 3 = 98.</think><answer>98</answer>"
    w = RewardWeights(1.0, 1.0, 1.0)
    out = score_group(
        [restate, worked, plain, wrong_restate, wrong_plain],
        [1.0, 1.0, 1.0, 0.0, 0.0],
        [0.0, 1.0],
        weights=w,
        tie_value=0.0,
        zeta=1e-6,
        empty_refine_value=0.0,
    )
    assert [r.refine_outcome for r in out] == ["empty", "better", "none", "empty", "none"]
    assert [r.total for r in out] == [2.0, 3.0, 2.0, 1.0, 1.0]


def test_margin_compare_pays_the_accuracy_difference():
    """pasr.refine_compare=margin: acc - baseline instead of its sign; ties and empty refines as before."""
    m = dict(tie_value=0.0, zeta=1e-6, compare="margin")
    assert refine_reward(1.0, True, 0.25, **m).value == pytest.approx(0.75)
    assert refine_reward(0.0, True, 0.25, **m).value == pytest.approx(-0.25)
    assert refine_reward(1.0, True, 1.0, **m).outcome == "tie"
    assert refine_reward(1.0, True, 0.25, **m, empty=True, empty_value=0.0).value == 0.0
    assert refine_reward(0.0, False, 0.25, **m).value == 0.0
    with pytest.raises(ValueError, match="compare"):
        refine_reward(1.0, True, 0.5, tie_value=0.0, zeta=1e-6, compare="ratio")


def test_sign_compare_is_biased_by_accuracy_and_margin_is_not():
    """The reason for margin, exactly: refine and plain answers equally good (right with
    probability p), baseline = mean of 4 plain answers. The expected sign reward is negative for
    p < 0.5 and positive for p > 0.5; the expected margin reward is 0 for every p."""
    from itertools import product

    def expected(p: float, compare: str) -> float:
        total = 0.0
        for outcome in product([0.0, 1.0], repeat=5):  # the refine answer, then 4 plain answers
            prob = 1.0
            for a in outcome:
                prob *= p if a else 1 - p
            r = refine_reward(outcome[0], True, plain_baseline(outcome[1:]), tie_value=0.0, zeta=1e-6, compare=compare)
            total += prob * r.value
        return total

    assert expected(0.3, "sign") == pytest.approx(0.3 * (1 - 0.3**4) - 0.7 * (1 - 0.7**4))
    assert expected(0.3, "sign") < -0.2 and expected(0.7, "sign") > 0.2
    for p in (0.1, 0.3, 0.5, 0.7, 0.9):
        assert expected(p, "margin") == pytest.approx(0.0, abs=1e-12)


def test_config_rejects_an_unknown_compare_mode():
    from recipe.pasr_config import ConfigError, load_pasr_config

    assert load_pasr_config({"refine_compare": "margin"}).refine_compare == "margin"
    with pytest.raises(ConfigError, match="pasr.refine_compare=draft was retired"):
        load_pasr_config({"refine_compare": "draft"})
    with pytest.raises(ConfigError, match="refine_compare"):
        load_pasr_config({"refine_compare": "ratio"})
