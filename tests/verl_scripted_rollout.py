"""The verl engine tests' shared fixtures and scripted rollout (tests/test_verl_*.py; the RRR tests
get them through tests/rrr_scripted_rollout.py).

No GPU and no vLLM: generation is scripted, but everything around it is verl's own code
(``RLHFDataset``, ``RayPPOTrainer._get_gen_batch``, the agent loop worker's padding and output
assembly, ``DataProto``, ``extract_reward``, ``compute_advantage``).

Fixtures: ``verl_mods`` (verl's trainer modules and ours), ``tokenizer`` (SmolLM2's), ``prompts``,
``gen_batch`` (a real training batch: questions "What is k+k?", k = 0..2), ``val_dataset`` (the
same questions as a validation set) and ``train_step`` (one training step through the PASR rollout
wrapper). A test module imports the fixtures it uses and those they depend on.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import types
import uuid
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest


# --------------------------------------------------------------------------- fixtures
def _import_with_server_stubs(*names: str):
    """Import verl trainer modules. They import vLLM's server dependencies (uvicorn, fastapi) at
    module level; GPU installs have them with vLLM. Where they are missing (this CPU machine) two
    empty stand-ins are registered for the import and removed afterwards; no server is started."""
    added = []
    for mod, attrs in (("uvicorn", ("Server", "Config")), ("fastapi", ("FastAPI",))):
        try:
            importlib.import_module(mod)
        except ImportError:
            stub = types.ModuleType(mod)
            for a in attrs:
                setattr(stub, a, type(a, (), {}))
            sys.modules[mod] = stub
            added.append(mod)
    try:
        return [importlib.import_module(n) for n in names]
    finally:
        for mod in added:
            sys.modules.pop(mod, None)


@pytest.fixture(scope="module")
def verl_mods():
    ray_trainer, main_ppo_v0, agent_loop, engine_trainer = _import_with_server_stubs(
        "verl.trainer.ppo.ray_trainer",
        "verl.trainer.main_ppo_v0",
        "verl.experimental.agent_loop.agent_loop",
        "recipe.verl_engine.trainer",
    )
    return SimpleNamespace(
        ray_trainer=ray_trainer, main_ppo_v0=main_ppo_v0, agent_loop=agent_loop, trainer=engine_trainer
    )


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from runtime.model_loading import resolve_model_path

    return AutoTokenizer.from_pretrained(resolve_model_path("smollm2"))


@pytest.fixture(scope="module")
def prompts():
    from prompts import PromptSet

    return PromptSet.load()


@pytest.fixture(scope="module")
def gen_batch(tmp_path_factory, tokenizer, prompts, verl_mods):
    """A real training batch: our parquet schema -> verl's RLHFDataset -> collate_fn ->
    DataProto with uids -> RayPPOTrainer._get_gen_batch (as fit() does), questions k+k, k=0..2."""
    from omegaconf import OmegaConf
    from verl import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    from data.examples import Example
    from data.verl_parquet import write_rl_parquet

    tmp = tmp_path_factory.mktemp("rl_data")
    examples = [
        Example(id=f"syn:{k}", data_source="synthetic", question=f"What is {k}+{k}?", answer=str(2 * k))
        for k in range(3)
    ]
    path = write_rl_parquet(examples, tmp / "train.parquet", prompts.refine, split="train")
    data_cfg = OmegaConf.create(
        {
            "prompt_key": "prompt",
            "max_prompt_length": 512,
            "filter_overlong_prompts": False,
            "cache_dir": str(tmp / "cache"),
        }
    )
    dataset = RLHFDataset([str(path)], tokenizer, data_cfg)
    batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))]))
    batch.non_tensor_batch["uid"] = np.array([str(uuid.uuid4()) for _ in range(len(batch))], dtype=object)
    gen = verl_mods.ray_trainer.RayPPOTrainer._get_gen_batch(None, batch)
    return SimpleNamespace(batch=batch, gen=gen)


@pytest.fixture(scope="module")
def val_dataset(tmp_path_factory, tokenizer, prompts):
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from data.examples import Example
    from data.verl_parquet import write_rl_parquet

    tmp = tmp_path_factory.mktemp("val_data")
    examples = [
        Example(id=f"val:{k}", data_source="synthetic", question=f"What is {k}+{k}?", answer=str(2 * k))
        for k in range(3)
    ]
    path = write_rl_parquet(examples, tmp / "val.parquet", prompts.refine, split="test")
    cfg = OmegaConf.create(
        {
            "prompt_key": "prompt",
            "max_prompt_length": 512,
            "filter_overlong_prompts": False,
            "cache_dir": str(tmp / "c"),
        }
    )
    return RLHFDataset([str(path)], tokenizer, cfg)


# --------------------------------------------------------------------------- scripted rollout
def _variant(messages, prompts) -> str:
    system = next((m["content"] for m in messages if m["role"] == "system"), None)
    return {prompts.refine: "refine", prompts.plain: "plain"}[system]


def _k(messages) -> int:
    user = [m["content"] for m in messages if m["role"] == "user"][-1]
    return int(user.split()[2].split("+")[0])


def R(a):  # formatted, refines
    return f"<think>2k<refine>check: k+k</refine>done</think><answer>\\boxed{{{a}}}</answer>"


def N(a):  # formatted, no refine
    return f"<think>2k</think><answer>\\boxed{{{a}}}</answer>"


def P(a):  # a plain-prompted answer
    return f"Steps. \\boxed{{{a}}}"


# query k (gold 2k): refine responses, plain responses
SCRIPT = {
    0: ([R(0), R(0), N(0)], [P(0), P(0), P(0)]),  # all plain right: refining ties (-0.5)
    1: ([R(2), N(2), N(5)], [P(2), P(7), P(7)]),  # plain 1/3: right + refine is better (+1)
    2: ([N(4), R(9), N("ERR")], [P(4), P(4), P(4)]),  # wrong + refine is worse (-1); a judge error
}


# (format + acc + refine) per refine row; None = judge error
EXPECTED_TOTALS = {0: [1.5, 1.5, 2.0], 1: [3.0, 2.0, 1.0], 2: [2.0, 0.0, None]}


class ScriptedServer:
    """Stands in for the LLM server an agent loop sends a prompt's token ids to: it answers
    ``next`` (the scripted response's ids) and keeps the prompts it was sent. A prompt that ends
    with the ``<think>`` prefill's ids (``prefill``) is continued: a scripted response that opens
    with them is answered without them, as a model answers after the prefill, so the text scored
    (prefill and response) is the scripted text."""

    def __init__(self, prefill: list[int]):
        self.prefill = prefill
        self.next: list[int] = []
        self.prompts: list[list[int]] = []

    async def generate(self, *, request_id, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.prompts.append(list(prompt_ids))
        return TokenOutput(token_ids=self.answer(prompt_ids, self.next))

    def answer(self, prompt_ids, ids) -> list[int]:
        """``ids`` as the continuation of ``prompt_ids``: without the prefill the prompt ends with."""
        n = len(self.prefill)
        if list(prompt_ids[-n:]) == self.prefill and list(ids[:n]) == self.prefill:
            return list(ids[n:])
        return list(ids)


class ScriptedRollout:
    """Stands in for verl's AgentLoopManager: token ids come from SCRIPT instead of vLLM (a
    :class:`ScriptedServer`), and the rest is verl's own: each row runs the agent loop its
    ``agent_name`` names in verl's registry (verl's default, ``single_turn_agent``, where the
    column is absent), which builds the prompt's token ids, then the AgentLoopWorker's
    post-processing (padding, masks, position ids, output assembly) without the reward loop, as
    under PasrAgentLoopManager."""

    def __init__(self, tokenizer, prompts, agent_loop_mod, prompt_length=512, response_length=48):
        worker = object.__new__(agent_loop_mod.AgentLoopWorker)
        worker.tokenizer = tokenizer
        worker.processor = None
        worker.rollout_config = SimpleNamespace(prompt_length=prompt_length, response_length=response_length)
        worker.reward_loop_worker_handles = None
        worker.distillation_enabled = False
        worker.mm_processor_kwargs = {}
        self.worker, self.mod, self.tok, self.prompts = worker, agent_loop_mod, tokenizer, prompts
        from prompts import THINK_PREFILL

        self.server = ScriptedServer(tokenizer.encode(THINK_PREFILL, add_special_tokens=False))
        self.calls: list[int] = []
        self.call_meta: list[dict] = []  # each call's meta_info (validate, global_steps)

    def respond(self, messages, seen) -> str:
        variant, k = _variant(messages, self.prompts), _k(messages)
        j = seen.setdefault((variant, k), 0)
        seen[(variant, k)] += 1
        refine, plain = SCRIPT[k]
        texts = refine if variant == "refine" else plain
        return texts[j % len(texts)]

    def response_ids(self, messages, seen) -> list[int]:
        """The generated tokens: the scripted text and EOS."""
        return self.tok.encode(self.respond(messages, seen), add_special_tokens=False) + [self.tok.eos_token_id]

    def generate_sequences(self, batch):
        self.calls.append(len(batch))
        self.call_meta.append(dict(batch.meta_info))
        return asyncio.run(self._generate(batch))

    def agent_loop(self, name: str):
        """The agent loop ``name`` as verl's worker makes it (``_run_agent_loop``), around the
        scripted server; inside the running event loop, as there."""
        import hydra
        from omegaconf import OmegaConf
        from verl.utils.dataset.rl_dataset import RLHFDataset

        cfg = self.worker.rollout_config
        config = OmegaConf.create(
            {
                "actor_rollout_ref": {
                    "rollout": {"prompt_length": cfg.prompt_length, "response_length": cfg.response_length}
                },
                "data": {},
            }
        )
        return hydra.utils.instantiate(
            self.mod._agent_loop_registry[name],
            trainer_config=self.mod.DictConfigWrap(config),
            server_manager=self.server,
            tokenizer=self.tok,
            processor=None,
            dataset_cls=RLHFDataset,
            data_config=self.mod.DictConfigWrap(config.data),
        )

    async def _generate(self, batch):
        import recipe.verl_engine.agent_loop  # noqa: F401  (registers PASR's agent loop, as in PasrAgentLoopWorker's process)

        seen: dict = {}
        outputs = []
        columns = dict(batch.non_tensor_batch)
        if "agent_name" not in columns:  # what verl's worker does (rollout.agent.default_agent_loop)
            columns["agent_name"] = np.array(["single_turn_agent"] * len(batch), dtype=object)
        for i in range(len(batch)):
            kwargs = {k: v[i] for k, v in columns.items()}
            agent = kwargs.pop("agent_name")
            self.server.next = self.response_ids(kwargs["raw_prompt"], seen)
            # a longer prompt is cut from the left, a longer response from the right, by the agent loop
            out = await self.agent_loop(agent).run({}, **kwargs)
            outputs.append(await self.worker._agent_loop_postprocess(out, False, **kwargs))
        output = self.worker._postprocess(outputs, input_non_tensor_batch=columns)
        metrics = output.meta_info.pop("metrics")
        timing = self.mod.AgentLoopManager._performance_metrics(None, [metrics], output)
        output.meta_info = {"timing": timing, **output.meta_info}
        return output


@dataclass
class ExactJudge:
    """Scores 1 when the extracted answer equals the gold; answer 'ERR' is a judge failure."""

    name: str = "exact"

    async def score(self, question, gold, answer):
        from rewards.judges.base import JudgeResult

        if answer == "ERR":
            return JudgeResult.failed("judge unavailable")
        return JudgeResult(1.0 if answer is not None and answer.strip() == gold else 0.0)

    async def score_many(self, items):
        return [await self.score(i.question, i.gold, i.answer) for i in items]


def _manager(inner, tokenizer, prompts, tmp_path, n_refine=3, n_plain=3, size_divisor=4, pasr=None, **kwargs):
    from recipe.pasr_config import load_pasr_config
    from recipe.verl_engine.rollout import PasrRolloutManager

    cfg = load_pasr_config({"n_refine": n_refine, "n_plain": n_plain, **(pasr or {})})
    return PasrRolloutManager(
        inner,
        tokenizer=tokenizer,
        cfg=cfg,
        prompts=prompts,
        judge=ExactJudge(),
        run_id="test-run",
        rollout_dir=tmp_path / "rollouts",
        size_divisor=size_divisor,
        **kwargs,
    )


def _train_gen_batch(gen_batch, n, step=5):
    rep = gen_batch.gen.repeat(repeat_times=n, interleave=True)  # as fit() does
    rep.meta_info["global_steps"] = step
    return rep


def validation_batch(gen_batch):
    """The whole batch as verl's ``_validate`` hands it to the rollout: greedy, step 0."""
    val = gen_batch.gen.slice(0, None)
    val.meta_info = {"validate": True, "global_steps": 0}
    return val


def generate_and_close(manager, batch):
    """One ``generate_sequences`` call and the metrics it hands over, the manager closed after
    (its agent-loop workers stopped) whatever happened."""
    try:
        out = manager.generate_sequences(batch)
        return out, manager.pop_metrics()
    finally:
        manager.close()


# --------------------------------------------------------------------------- one PASR training step
@pytest.fixture(scope="module")
def train_step(gen_batch, tokenizer, prompts, verl_mods, tmp_path_factory):
    """One training step's rollout through the PASR wrapper (n_refine=3, n_plain=3), with the
    ``<think>`` prefill on as the local engine's cpu preset has it (so the two engines' steps compare)."""
    tmp = tmp_path_factory.mktemp("pasr_step")
    inner = ScriptedRollout(tokenizer, prompts, verl_mods.agent_loop)
    manager = _manager(inner, tokenizer, prompts, tmp, pasr={"prefill_think": True})
    yield from one_training_step(inner, manager, gen_batch, 3, tmp)


def one_training_step(inner, manager, gen_batch, n: int, tmp):
    """A step fixture's body: the batch repeated ``n`` times through ``manager``, the result and
    its popped metrics yielded, the manager closed after the module's tests."""
    rep = _train_gen_batch(gen_batch, n)
    out = manager.generate_sequences(rep)
    metrics = manager.pop_metrics()
    yield SimpleNamespace(inner=inner, manager=manager, rep=rep, out=out, metrics=metrics, tmp=tmp)
    manager.close()


def _row_totals(out):
    return out.batch["rm_scores"].sum(dim=-1).tolist()


def fit_side(rollout_out, gen_batch, verl_mods, n):
    """What fit() does with the returned rows up to the advantages: union with its batch repeated
    rollout.n times, rewards from rm_scores, then compute_advantage as fit() calls it under
    PasrRayTrainer (verl_fit() re-binds that name to pasr_compute_advantage)."""
    from verl.trainer.ppo.core_algos import AdvantageEstimator
    from verl.trainer.ppo.reward import extract_reward

    batch = gen_batch.batch.repeat(repeat_times=n, interleave=True)
    batch.meta_info = dict(batch.meta_info)  # repeat shares the fixture's dict, which union would change
    out = rollout_out.slice(0, None)
    out.meta_info = {k: v for k, v in out.meta_info.items() if k != "timing"}
    batch = batch.union(out)
    reward_tensor, extra = extract_reward(batch)
    batch.batch["token_level_scores"] = reward_tensor
    batch.batch["token_level_rewards"] = reward_tensor
    batch.non_tensor_batch.update({k: np.array(v) for k, v in extra.items()})
    compute_advantage = verl_mods.trainer.verl_fit().__globals__["compute_advantage"]
    return compute_advantage(batch, adv_estimator=AdvantageEstimator.GRPO, num_repeat=n)
