"""PASR rewards: pure functions (text in, numbers out) and the judges that score answers.

Nothing here imports an engine: the local engine, the verl engine and the evaluation all call
the same functions, so a reward means the same thing everywhere.
"""

from rewards.extract import extract_answer, gsm8k_gold, last_boxed
from rewards.format import FormatResult, RefineSpan, check_format
from rewards.pasr import PasrReward, RewardWeights, score_group
from rewards.refine import RefineReward, plain_baseline, refine_reward

__all__ = [
    "FormatResult",
    "PasrReward",
    "RefineReward",
    "RefineSpan",
    "RewardWeights",
    "check_format",
    "extract_answer",
    "gsm8k_gold",
    "last_boxed",
    "plain_baseline",
    "refine_reward",
    "score_group",
]
