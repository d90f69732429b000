"""The scripted RRR rollout of the verl engine's RRR tests (tests/test_verl_rrr_*.py):
tests/verl_scripted_rollout.py's fixtures, scripted rollout and judge (the fixtures re-exported
here), the answer of each pass per query, a scripted rollout manager that answers each chat by its
pass, and the RRR rollout wrapper (:mod:`recipe.verl_engine.rrr_rollout`) around it. The
``rrr_prompts`` fixture is in tests/conftest.py."""

from __future__ import annotations

import re

# fixtures shared with the PASR tests (a real RLHFDataset batch: questions "What is k+k?", k = 0..2)
from tests.verl_scripted_rollout import (  # noqa: F401  (gen_batch, prompts, tokenizer, val_dataset, verl_mods: re-exported)
    ExactJudge,
    ScriptedRollout,
    fit_side,
    gen_batch,
    prompts,
    tokenizer,
    val_dataset,
    verl_mods,
)

RRR_OK = ["method=rrr", "rrr.n_reflections=2", "data.max_prompt_length=2048"]


def A(answer) -> str:  # a first attempt or a retry
    return f"I add the numbers. <answer>{answer}</answer>"


def REFL(j: int, pad: int = 0) -> str:  # the j-th reflection on a failed attempt
    return f"Reflection {j}: I added the wrong numbers." + " I will check each step." * pad


# query k (gold 2k): (first attempt, retry answer after reflection j); "ERR" is a verifier error
SCRIPT = {
    0: (A(0), []),  # right at once: nothing to train
    1: (A(5), [A(2), A(7)]),  # reflection 0 recovers (1), reflection 1 does not (0)
    2: (A(9), [A("ERR"), A(4)]),  # reflection 0's retry is not scored (excluded), reflection 1 recovers
}
QUESTION = re.compile(r"What is (\d+)\+")
RETRY_OF = re.compile(r"Reflection (\d+):")


class RrrScripted(ScriptedRollout):
    """Answers each chat by its pass: the reflect and retry templates open with their own first
    lines, a first attempt is the bare question. ``reflection_pad`` lengthens reflections (to be
    cut), ``script`` overrides :data:`SCRIPT`; every retry chat is kept in ``retry_chats``."""

    def __init__(self, tokenizer, rrr_prompts, agent_loop_mod, script=None, reflection_pad=0, **kwargs):
        super().__init__(tokenizer, rrr_prompts, agent_loop_mod, **kwargs)
        self.script = script or SCRIPT
        self.reflection_pad = reflection_pad
        self.retry_chats: list[list[dict]] = []

    def pass_of(self, messages) -> str:
        user = [m["content"] for m in messages if m["role"] == "user"][-1]
        if user.startswith(self.prompts.reflect.splitlines()[0]):
            return "reflection"
        if user.startswith(self.prompts.retry.splitlines()[0]):
            return "retry"
        return "attempt"

    def respond(self, messages, seen) -> str:
        user = [m["content"] for m in messages if m["role"] == "user"][-1]
        k = int(QUESTION.search(user).group(1))
        attempt, retries = self.script[k]
        kind = self.pass_of(messages)
        if kind == "reflection":
            j = seen.setdefault(k, 0)
            seen[k] += 1
            return REFL(j, self.reflection_pad)
        if kind == "retry":
            self.retry_chats.append(list(messages))
            return retries[int(RETRY_OF.search(user).group(1))]
        return attempt


def _rrr_manager(inner, tokenizer, rrr_prompts, tmp_path, n=2, size_divisor=4, **kwargs):
    from recipe.pasr_config import JudgeConfig
    from recipe.rrr_config import load_rrr_config
    from recipe.verl_engine.rrr_rollout import RrrRolloutManager

    cfg = load_rrr_config({"n_reflections": n, **kwargs.pop("rrr", {})})
    return RrrRolloutManager(
        inner,
        tokenizer=tokenizer,
        cfg=cfg,
        prompts=rrr_prompts,
        judge=ExactJudge(),
        judge_config=JudgeConfig(),
        run_id="rrr-test",
        rollout_dir=tmp_path / "rollouts",
        size_divisor=size_divisor,
        **kwargs,
    )


def _texts(tokenizer, ids_rows) -> list[str]:
    return [tokenizer.decode(ids, skip_special_tokens=True) for ids in ids_rows]


def _masked_tokens(out) -> list[list[int]]:
    """Per row, the response tokens under response_mask."""
    return [out.batch["responses"][i][out.batch["response_mask"][i].bool()].tolist() for i in range(len(out))]
