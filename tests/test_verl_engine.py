"""The verl engine on CPU: config, plain-row batches, PASR scoring in verl's layout, and the
verl 0.9.1 behaviour the engine relies on (pinned, so an upgrade that changes it fails here).

No GPU and no vLLM here: generation is scripted, but everything around it is verl's own code
(``RLHFDataset``, ``RayPPOTrainer._get_gen_batch``, the agent loop worker's padding and output
assembly, ``DataProto``, ``extract_reward``, ``compute_advantage``).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import subprocess
import sys
import textwrap
import types
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
CONFIG_DIR = REPO / "recipe" / "config"


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


def _compose(overrides=()):
    from recipe.verl_engine.config import compose_config

    return compose_config(overrides)


@pytest.fixture(scope="module")
def config():
    return _compose()


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
    examples = [Example(id=f"syn:{k}", data_source="synthetic", question=f"What is {k}+{k}?", answer=str(2 * k)) for k in range(3)]
    path = write_rl_parquet(examples, tmp / "train.parquet", prompts.refine, split="train")
    data_cfg = OmegaConf.create(
        {"prompt_key": "prompt", "max_prompt_length": 512, "filter_overlong_prompts": False, "cache_dir": str(tmp / "cache")}
    )
    dataset = RLHFDataset([str(path)], tokenizer, data_cfg)
    batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))]))
    batch.non_tensor_batch["uid"] = np.array([str(uuid.uuid4()) for _ in range(len(batch))], dtype=object)
    gen = verl_mods.ray_trainer.RayPPOTrainer._get_gen_batch(None, batch)
    return SimpleNamespace(batch=batch, gen=gen)


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


class ScriptedRollout:
    """Stands in for verl's AgentLoopManager: token ids come from SCRIPT instead of vLLM, and the
    rest is verl's own AgentLoopWorker post-processing (padding, masks, position ids, output
    assembly) run without the reward loop, as under PasrAgentLoopManager."""

    def __init__(self, tokenizer, prompts, agent_loop_mod, prompt_length=512, response_length=48):
        worker = object.__new__(agent_loop_mod.AgentLoopWorker)
        worker.tokenizer = tokenizer
        worker.processor = None
        worker.rollout_config = SimpleNamespace(prompt_length=prompt_length, response_length=response_length)
        worker.reward_loop_worker_handles = None
        worker.distillation_enabled = False
        worker.mm_processor_kwargs = {}
        self.worker, self.mod, self.tok, self.prompts = worker, agent_loop_mod, tokenizer, prompts
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

    async def _generate(self, batch):
        m = self.mod
        seen: dict = {}
        outputs = []
        for i in range(len(batch)):
            kwargs = {k: v[i] for k, v in batch.non_tensor_batch.items()}
            messages = list(kwargs["raw_prompt"])
            prompt_text = self.tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            cfg = self.worker.rollout_config
            # a longer prompt is cut from the left, a longer response from the right, as the agent loop does
            prompt_ids = self.tok.encode(prompt_text, add_special_tokens=False)[-cfg.prompt_length :]
            response = self.response_ids(messages, seen)[: cfg.response_length]
            out = m.AgentLoopOutput(
                prompt_ids=prompt_ids,
                response_ids=response,
                response_mask=[1] * len(response),
                num_turns=2,
                metrics=m.AgentLoopMetrics(generate_sequences=0.01, num_preempted=0),
            )
            outputs.append(await self.worker._agent_loop_postprocess(out, False, **kwargs))
        output = self.worker._postprocess(outputs, input_non_tensor_batch=batch.non_tensor_batch)
        metrics = output.meta_info.pop("metrics")
        timing = m.AgentLoopManager._performance_metrics(None, [metrics], output)
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


# --------------------------------------------------------------------------- pinned verl 0.9.1
def _source(obj) -> str:
    return textwrap.dedent(inspect.getsource(obj))


def test_pinned_verl_version():
    import verl

    assert verl.__version__ == "0.9.1", "the verl engine is written against verl 0.9.1; re-check the pinned assumptions"


def test_pinned_fit_generates_once_and_reads_rm_scores(verl_mods):
    fit = _source(verl_mods.ray_trainer.RayPPOTrainer.fit)
    # one rollout call per step, on the attribute our trainer replaces
    assert fit.count("self.async_rollout_manager.generate_sequences(") == 1
    # prompts repeated rollout.n times, interleaved, before that call; the step is passed along
    assert "rollout_n = self.config.actor_rollout_ref.rollout.n" in fit
    assert "gen_batch.repeat(repeat_times=rollout_n, interleave=True)" in fit
    assert 'gen_batch.meta_info["global_steps"] = self.global_steps' in fit
    # the returned rows are unioned row by row with the repeated batch
    assert "batch = batch.repeat(repeat_times=self.config.actor_rollout_ref.rollout.n, interleave=True)" in fit
    assert "batch = batch.union(gen_batch_output)" in fit
    # rewards: rm_scores from the rollout are used as they are, response_mask too
    assert 'if self.use_rm and "rm_scores" not in batch.batch.keys():' in fit
    assert "reward_tensor, reward_extra_infos_dict = extract_reward(batch)" in fit
    assert 'if "response_mask" not in batch.batch.keys():' in fit
    # rollout timing is logged, GRPO groups rollout.n rows
    assert 'timing_raw.update(combined_gen_output.meta_info["timing"])' in fit
    assert "num_repeat=self.config.actor_rollout_ref.rollout.n" in fit
    # the actor update's metrics are reduced into what the logger logs
    assert "actor_output = self._update_actor(batch)" in fit
    assert 'reduce_metrics(actor_output.meta_info["metrics"])' in fit
    assert "logger.log(data=metrics, step=self.global_steps)" in fit


def test_pinned_validate_and_init_workers(verl_mods):
    rt = verl_mods.ray_trainer.RayPPOTrainer
    validate = _source(rt._validate)
    assert "self.async_rollout_manager.generate_sequences(test_gen_batch_padded)" in validate
    assert '"validate": True' in validate
    assert "extract_reward(test_batch)" in validate
    init = _source(rt.init_workers)
    assert 'get("agent_loop_manager_class")' in init
    assert "self.async_rollout_manager = AgentLoopManager.create(" in init
    assert "reward_loop_worker_handles=reward_loop_worker_handles" in init
    # GRPO groups by uid
    assert 'index=data.non_tensor_batch["uid"]' in _source(verl_mods.ray_trainer.compute_advantage)


def test_pinned_agent_loop(verl_mods):
    al = verl_mods.agent_loop
    params = list(inspect.signature(al.AgentLoopManager.__init__).parameters)
    assert params == ["self", "config", "llm_client", "teacher_client", "reward_loop_worker_handles"]
    gen = _source(al.AgentLoopManager.generate_sequences)
    assert "prompts.chunk(len(self.agent_loop_workers))" in gen and "DataProto.concat(outputs)" in gen
    post = _source(al.AgentLoopWorker._postprocess)
    assert "if self.reward_loop_worker_handles is None and input_non_tensor_batch:" in post
    assert "response_length = attention_mask[:, prompt_length:].sum(dim=1) - 1" in post
    # concrete agent loops get every non-tensor column as a keyword argument
    assert "kwargs = {k: v[i] for k, v in batch.non_tensor_batch.items()" in _source(al.AgentLoopWorker.generate_sequences)


def _self_calls(src: str) -> set[str]:
    import re

    return set(re.findall(r"self\.(\w+)\(", src))


def test_pinned_task_runner_and_losses(verl_mods):
    """PasrTaskRunner.run does verl's TaskRunner.run set-up with its own body: the helpers and
    set-up functions verl's run calls are the ones ours calls, so a verl release that adds a
    step to its run fails here."""
    from verl.trainer.main_ppo import run_ppo
    from verl.workers.utils import losses

    verl_module = _source(verl_mods.main_ppo_v0)
    verl_run = verl_module[verl_module.index("class TaskRunner(BaseTaskRunner)") :]
    ours = _source(verl_mods.trainer.PasrTaskRunner.run)
    assert _self_calls(verl_run) == _self_calls(ours) == {
        "add_actor_rollout_worker", "add_critic_worker", "add_reward_model_resource_pool",
        "add_teacher_model_resource_pool", "add_ref_policy_worker", "init_resource_pool_mgr",
    }  # fmt: skip
    for call in ("validate_config(", "create_rl_dataset(", "create_rl_sampler(", "OmegaConf.resolve(config)",
                 "omega_conf_to_dataclass(config.actor_rollout_ref.model)", "trainer.init_workers()", "trainer.fit()"):  # fmt: skip
        assert call in verl_run and call in ours, call
    for key in ("train_max_samples", "val_max_samples"):
        assert key in verl_run
    assert verl_run.count("create_rl_dataset(") == 2 and "RayPPOTrainer(" in verl_run
    assert "PasrRayTrainer(" in ours and issubclass(verl_mods.trainer.PasrTaskRunner, verl_mods.main_ppo_v0.BaseTaskRunner)
    assert list(inspect.signature(run_ppo).parameters) == ["config", "task_runner_class"]
    assert 'data["response_mask"]' in _source(losses.ppo_loss)


def test_pinned_get_gen_batch_and_extract_reward(gen_batch, verl_mods):
    from verl import DataProto
    from verl.trainer.ppo.reward import extract_reward

    # fit()'s batch keeps only the reward keys; the generation batch has raw_prompt and them
    assert set(gen_batch.batch.non_tensor_batch) == {"data_source", "reward_model", "extra_info", "uid"}
    assert {"raw_prompt", "uid", "extra_info", "reward_model", "data_source"} <= set(gen_batch.gen.non_tensor_batch)
    d = DataProto.from_dict(
        tensors={"rm_scores": torch.ones(2, 3)}, non_tensors={"acc": np.array([1.0, 0.0])}, meta_info={"reward_extra_keys": ["acc"]}
    )
    scores, extra = extract_reward(d)
    assert scores.shape == (2, 3) and list(extra) == ["acc"]


def test_fit_is_rebound_without_touching_verl(verl_mods):
    t = verl_mods.trainer
    fit = t.verl_fit()
    assert fit.__globals__["compute_advantage"] is t.pasr_compute_advantage
    assert fit.__globals__["compute_throughout_metrics"] is t.pasr_throughput_metrics
    assert verl_mods.ray_trainer.compute_advantage is not t.pasr_compute_advantage
    assert fit.__code__ is vars(verl_mods.ray_trainer.RayPPOTrainer)["fit"].__code__


# --------------------------------------------------------------------------- config
def test_config_composes_with_paper_defaults(config):
    from recipe.verl_engine.config import engine_config, pasr_config

    cfg = pasr_config(config)
    assert (cfg.n_refine, cfg.n_plain, cfg.tie_value) == (8, 8, -0.5)
    ar = config.actor_rollout_ref
    assert ar.rollout.n == 8 and ar.rollout.temperature == 0.9 and config.data.max_response_length == 1500
    assert ar.actor.optim.lr == 1e-6 and ar.actor.kl_loss_coef == 0.04 and ar.actor.use_kl_loss
    assert ar.actor.clip_ratio == 0.2 and config.algorithm.adv_estimator == "grpo"
    assert ar.rollout.agent.agent_loop_manager_class == "recipe.verl_engine.agent_loop.PasrAgentLoopManager"
    assert config.trainer.use_v1 is False and config.trainer.resume_mode == "auto"
    eng = engine_config(config)
    assert eng.rollout_dir == "checkpoints/pasr/pasr/rollouts" and eng.run_id is None  # null: the experiment name


def test_pasr_defaults_live_in_the_dataclasses_only(config):
    """pasr_trainer.yaml sets no pasr.* / pasr_verl.* value: the composed sections are exactly
    the dataclasses' defaults (recipe/pasr_config.py, VerlEngineConfig), and Hydra types them."""
    import dataclasses

    from hydra.errors import ConfigCompositionException
    from omegaconf import OmegaConf

    from recipe.pasr_config import PasrConfig
    from recipe.verl_engine.config import VerlEngineConfig, plain_sections

    text = (CONFIG_DIR / "pasr_trainer.yaml").read_text()
    assert "\npasr:" not in text and "\npasr_verl:" not in text and "tie_value" not in text
    assert OmegaConf.to_container(config.pasr) == dataclasses.asdict(PasrConfig())
    assert OmegaConf.to_container(config.pasr_verl) == dataclasses.asdict(VerlEngineConfig())
    with pytest.raises(ConfigCompositionException):
        _compose(["pasr.n_refine=many"])  # typed by the schema at composition
    cfg = _compose(["pasr.tie_value=0"])
    plain_sections(cfg)  # what recipe.main_pasr hands to verl: no reference to recipe's dataclasses
    assert OmegaConf.get_type(cfg.pasr) is dict and cfg.pasr.tie_value == 0 and cfg.actor_rollout_ref.rollout.n == 8
    assert OmegaConf.to_container(cfg.pasr_verl)["rollout_dir"] == "${trainer.default_local_dir}/rollouts"  # kept unresolved


def test_config_passes_verls_own_validation(config):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    assert need_reference_policy(config) and not need_critic(config)


def test_config_overrides_and_bad_keys():
    from hydra.errors import ConfigCompositionException

    from recipe.pasr_config import ConfigError
    from recipe.verl_engine.config import engine_config, pasr_config

    cfg = _compose(["pasr.n_refine=4", "pasr.judge.concurrency=8"])
    assert cfg.actor_rollout_ref.rollout.n == 4 and pasr_config(cfg).judge.concurrency == 8
    with pytest.raises(ConfigError, match=r"pasr\.judge\.timout_s"):
        pasr_config(_compose(["+pasr.judge.timout_s=3"]))
    with pytest.raises(ConfigError, match=r"pasr_verl\.rolout_dir"):
        engine_config(_compose(["+pasr_verl.rolout_dir=x"]))
    with pytest.raises(ConfigError, match="differs from pasr.n_refine"):
        pasr_config(_compose(["actor_rollout_ref.rollout.n=2"]))
    with pytest.raises(ConfigCompositionException):  # Hydra itself refuses a key without '+'
        _compose(["pasr.bogus=1"])
    # Hydra types pasr.zeta=nan as a float and passes it on; the shared check names every such key
    with pytest.raises(ConfigError, match=r"pasr\.zeta=nan, pasr\.weights\.acc=inf"):
        pasr_config(_compose(["pasr.zeta=nan", "pasr.weights.acc=inf"]))


def test_preflight(config):
    from recipe.verl_engine.config import PreflightError, preflight

    ok = dict(find_module=lambda n: object(), judge_check=lambda c: None)
    cfg, eng = preflight(config, local_gpus=lambda: 8, **ok)
    assert cfg.n_refine == 8
    with pytest.raises(PreflightError, match="no GPU on this machine"):
        preflight(config, local_gpus=lambda: 0, **ok)
    with pytest.raises(PreflightError, match=r"needs 1 node\(s\) with 8 GPU\(s\).*this machine has 4"):
        preflight(config, local_gpus=lambda: 4, **ok)
    with pytest.raises(PreflightError, match="vllm is not installed"):
        preflight(config, local_gpus=lambda: 8, find_module=lambda n: None, judge_check=lambda c: None)
    two = _compose(["trainer.nnodes=2", "+ray_kwargs.ray_init.address=10.0.0.1:6379"])
    with pytest.raises(PreflightError, match=r"Ray cluster at 10.0.0.1:6379 has 12 GPU\(s\) \(GPUs per node: 8, 4\)"):
        preflight(two, cluster_node_gpus=lambda a: [8.0, 4.0], **ok)
    preflight(two, cluster_node_gpus=lambda a: [8.0, 8.0, 0.0], **ok)
    with pytest.raises(PreflightError, match="use_v1"):
        preflight(_compose(["trainer.use_v1=true"]), local_gpus=lambda: 8, **ok)
    with pytest.raises(PreflightError, match="pasr.judge.kind=openai needs"):
        preflight(_compose(["pasr.judge.kind=openai"]), local_gpus=lambda: 8, **ok)
    preflight(_compose(["pasr_verl.check_resources=false"]), local_gpus=lambda: 0, **ok)


def test_count_local_gpus(tmp_path):
    from recipe.verl_engine.config import count_local_gpus

    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).touch()
    assert count_local_gpus({}, dev=str(tmp_path)) == 2
    assert count_local_gpus({"CUDA_VISIBLE_DEVICES": "1"}, dev=str(tmp_path)) == 1
    assert count_local_gpus({"CUDA_VISIBLE_DEVICES": ""}, dev=str(tmp_path)) == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    assert count_local_gpus({}, dev=str(empty)) == 0


def test_main_without_gpu_exits_at_once_with_a_message():
    from recipe.verl_engine.config import count_local_gpus

    if count_local_gpus() != 0:
        pytest.skip("this machine has a GPU")
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "PASR_SKIP_GPU_CHECK")}
    proc = subprocess.run(
        [sys.executable, "-m", "recipe.main_pasr", "trainer.experiment_name=x"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("pasr verl: error: no GPU on this machine")
    assert "pasr submit" in proc.stderr and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- plain rows
def test_combined_batch_from_a_real_rlhf_batch(gen_batch, prompts):
    from recipe.verl_engine.plain_rollouts import build_combined_batch, split_combined

    rep = _train_gen_batch(gen_batch, 3)
    before = [list(map(dict, m)) for m in rep.non_tensor_batch["raw_prompt"]]
    combined, layout = build_combined_batch(rep, n_refine=3, n_plain=2, refine_system=prompts.refine, plain_system=prompts.plain)
    assert (layout.refine_rows, layout.plain_rows, len(combined)) == (9, 6, 15)
    uids = combined.non_tensor_batch["uid"]
    q = gen_batch.gen.non_tensor_batch["uid"]
    assert list(uids[:9]) == list(np.repeat(q, 3)) and list(uids[9:]) == list(np.repeat(q, 2))
    systems = [m[0]["content"] for m in combined.non_tensor_batch["raw_prompt"]]
    assert systems[:9] == [prompts.refine] * 9 and systems[9:] == [prompts.plain] * 6
    users = [m[-1]["content"] for m in combined.non_tensor_batch["raw_prompt"]]
    assert users[9:] == [f"What is {k}+{k}?" for k in range(3) for _ in range(2)]
    for key in ("extra_info", "reward_model", "data_source", "index"):
        assert list(combined.non_tensor_batch[key][9:]) == list(np.repeat(gen_batch.gen.non_tensor_batch[key], 2))
    assert combined.meta_info["global_steps"] == 5
    # the caller's batch (and messages shared between its repeated rows) are untouched
    assert [list(map(dict, m)) for m in rep.non_tensor_batch["raw_prompt"]] == before
    refine, plain = split_combined(combined, layout, expected_uids=uids)
    assert list(refine.non_tensor_batch["uid"]) == list(rep.non_tensor_batch["uid"]) and len(plain) == 6


def test_combined_batch_rejects_wrong_grouping(gen_batch, prompts):
    from recipe.verl_engine.plain_rollouts import PasrBatchError, build_combined_batch, split_combined

    kw = dict(refine_system=prompts.refine, plain_system=prompts.plain)
    rep = gen_batch.gen.repeat(repeat_times=2, interleave=False)  # q0 q1 q2 q0 q1 q2: not grouped
    with pytest.raises(PasrBatchError, match="not grouped by uid"):
        build_combined_batch(rep, n_refine=2, n_plain=1, **kw)
    with pytest.raises(PasrBatchError, match="not a multiple"):
        build_combined_batch(_train_gen_batch(gen_batch, 2), n_refine=4, n_plain=1, **kw)
    combined, layout = build_combined_batch(_train_gen_batch(gen_batch, 2), n_refine=2, n_plain=1, **kw)
    shuffled = combined.select_idxs(np.arange(len(combined))[::-1].copy())
    with pytest.raises(PasrBatchError, match="uid mismatch"):
        split_combined(shuffled, layout, expected_uids=combined.non_tensor_batch["uid"])


def test_query_ids_unique_per_uid():
    from verl import DataProto

    from recipe.verl_engine.batch_convert import query_ids

    d = DataProto.from_dict(
        non_tensors={
            "uid": np.array(["a", "a", "b", "b"], dtype=object),
            "extra_info": np.array([{"id": "q1"}, {"id": "q1"}, {"id": "q1"}, {"id": "q1"}], dtype=object),
        }
    )
    assert query_ids(d) == ["q1", "q1", "q1@b", "q1@b"]


# --------------------------------------------------------------------------- the PASR rollout
@pytest.fixture(scope="module")
def train_step(gen_batch, tokenizer, prompts, verl_mods, tmp_path_factory):
    """One training step's rollout through the PASR wrapper (n_refine=3, n_plain=3)."""
    tmp = tmp_path_factory.mktemp("pasr_step")
    inner = ScriptedRollout(tokenizer, prompts, verl_mods.agent_loop)
    manager = _manager(inner, tokenizer, prompts, tmp)
    rep = _train_gen_batch(gen_batch, 3)
    out = manager.generate_sequences(rep)
    metrics = manager.pop_metrics()
    yield SimpleNamespace(inner=inner, manager=manager, rep=rep, out=out, metrics=metrics, tmp=tmp)
    manager.close()


def _row_totals(out):
    return out.batch["rm_scores"].sum(dim=-1).tolist()


def test_one_generate_call_and_only_refine_rows_come_back(train_step, tokenizer):
    # 9 refine + 9 plain rows in ONE call, padded to the divisor 4 -> 20
    assert train_step.inner.calls == [20]
    out = train_step.out
    assert len(out) == 9
    assert list(out.non_tensor_batch["uid"]) == list(train_step.rep.non_tensor_batch["uid"])
    texts = [tokenizer.decode(r, skip_special_tokens=True) for r in out.batch["responses"]]
    assert all(t.startswith("<think>") for t in texts) and not any("Steps." in t for t in texts)


def test_refine_rewards_per_uid_at_the_last_response_token(train_step):
    out = train_step.out
    expected = [t for k in range(3) for t in EXPECTED_TOTALS[k]]
    expected[8] = (2.0 + 0.0) / 2  # judge error: masked; its placeholder score is the mean of its group's judged totals
    assert _row_totals(out) == pytest.approx(expected)
    lengths = out.batch["attention_mask"][:, out.batch["prompts"].shape[1] :].sum(dim=1)
    nonzero = [row.nonzero().flatten().tolist() for row in out.batch["rm_scores"]]
    for i, idx in enumerate(nonzero):
        assert idx in ([int(lengths[i]) - 1], [])  # a 0.0 score has no nonzero entry
    assert out.meta_info["reward_extra_keys"] == ["acc", "format_reward", "refine_reward", "has_refine", "judge_error"]
    assert list(out.non_tensor_batch["refine_reward"]) == [-0.5, -0.5, 0.0, 1.0, 0.0, 0.0, 0.0, -1.0, 0.0]
    assert list(out.non_tensor_batch["judge_error"]) == [0.0] * 8 + [1.0]
    assert "pasr_score" in out.meta_info["timing"] and "agent_loop/generate_sequences/mean" in out.meta_info["timing"]


def test_judge_error_row_is_masked_not_scored_zero(train_step):
    mask = train_step.out.batch["response_mask"]
    assert mask[8].sum() == 0
    assert all(mask[i].sum() > 0 for i in range(8))
    assert list(train_step.out.non_tensor_batch["pasr_trained"]) == [True] * 8 + [False]


def _fit_side(train_step, gen_batch, verl_mods):
    return fit_side(train_step.out, gen_batch, verl_mods, n=3)


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


def test_fit_side_union_and_grpo_see_refine_rows_only(train_step, gen_batch, verl_mods):
    """Plain rows never get to fit(); the masked row gets no advantage and is outside its
    group's statistics."""
    batch = _fit_side(train_step, gen_batch, verl_mods)
    assert len(batch) == 9
    adv = batch.batch["advantages"]
    assert adv[8].abs().sum() == 0 and batch.batch["response_mask"][8].sum() == 0
    # q1: totals 3, 2, 1 -> normalised advantages +1, 0, -1
    assert adv[3].max().item() == pytest.approx(1.0, abs=1e-4) and adv[5].min().item() == pytest.approx(-1.0, abs=1e-4)
    # q2: judged totals 2, 0 (the third a judge error): mean 1 and std sqrt(2) over those two only
    assert adv[6].max().item() == pytest.approx(2**-0.5, abs=1e-4) and adv[7].min().item() == pytest.approx(-(2**-0.5), abs=1e-4)
    # the batch converts the way _compute_old_log_prob / _update_actor send it to the workers
    from verl.workers.utils.padding import left_right_2_no_padding

    td = left_right_2_no_padding(batch.to_tensordict())
    assert td["response_mask"].shape[0] == 9


def test_both_engines_give_one_step_the_same_records_scores_masks_and_advantages(train_step, gen_batch, verl_mods, tokenizer):
    """The scripted step (the same texts, golds and a judge that fails on one refine rollout)
    through the local engine's path (recipe.scoring on Rollouts, then policy_update.build_batch)
    and the verl engine's (PasrRolloutManager on verl's DataProto rows, then fit()'s advantage
    step): the same records, scores, masks and GRPO advantages."""
    import dataclasses

    from data.records import iter_records
    from recipe.local_engine.config import AlgoConfig
    from recipe.local_engine.policy_update import TrainRollout, build_batch
    from recipe.scoring import Rollout, group_scores, judge_and_record

    manager = train_step.manager
    rollouts = []  # as the local engine lays a step out: per query, its refine then its plain rollouts
    for k, (refine, plain) in SCRIPT.items():
        for variant, texts in (("refine", refine), ("plain", plain)):
            for j, text in enumerate(texts):
                n_tokens = len(tokenizer.encode(text, add_special_tokens=False)) + 1  # EOS included
                rollouts.append(Rollout(f"syn:{k}", "synthetic", f"What is {k}+{k}?", str(2 * k), variant, text, n_tokens, "stop", j))
    records = judge_and_record(
        rollouts, ExactJudge(), run_id="test-run", step=5, engine="local", prompt_versions=manager.prompt_versions
    )
    scores, mask = group_scores(records, manager.cfg)

    def key(r):
        return (r.query_id, r.variant, r.sample_index)

    local = {key(r): (r, s, m) for r, s, m in zip(records, scores, mask)}
    verl_records = list(iter_records(train_step.tmp / "rollouts" / "step_000005.jsonl", strict=True))
    assert sorted(map(key, verl_records)) == sorted(local)
    for v in verl_records:
        assert v == dataclasses.replace(local[key(v)][0], engine="verl")

    out = train_step.out  # the refine rows fit() gets, query by query
    refine_keys = [(f"syn:{k}", "refine", j) for k in range(3) for j in range(3)]
    assert _row_totals(out) == pytest.approx([local[k][1] for k in refine_keys])
    local_mask = [local[k][2] for k in refine_keys]
    assert local_mask == [True] * 8 + [False]
    assert list(out.non_tensor_batch["pasr_trained"]) == local_mask
    assert [bool(row.sum()) for row in out.batch["response_mask"]] == local_mask

    prompt_len = out.batch["prompts"].shape[1]
    train = []
    for i, k in enumerate(refine_keys):
        prompt_ids = out.batch["prompts"][i][out.batch["attention_mask"][i, :prompt_len].bool()].tolist()
        length = int(out.batch["attention_mask"][i, prompt_len:].sum())
        train.append(TrainRollout(k[0], prompt_ids, out.batch["responses"][i, :length].tolist(), local[k][1]))
    local_batch = build_batch(train, tokenizer.pad_token_id, AlgoConfig(), mask=local_mask)
    verl_adv = _fit_side(train_step, gen_batch, verl_mods).batch["advantages"]
    trained = [i for i, m in enumerate(local_mask) if m]
    assert len(local_batch) == len(trained)
    assert local_batch.batch["advantages"][:, 0].tolist() == pytest.approx(verl_adv[trained, 0].tolist(), abs=1e-6)
    assert verl_adv[[i for i, m in enumerate(local_mask) if not m]].abs().sum() == 0


def test_draft_credit_columns_reach_fits_advantage_step(gen_batch, tokenizer, prompts, verl_mods, tmp_path):
    """pasr.draft_credit=value on the verl engine: the rollout writes each refine row's draft
    tokens and verdict, the columns survive fit()'s union, and its advantage step clips by them."""
    from recipe.draft_credit import DRAFT_END, DRAFT_SIGN, DRAFT_START
    from recipe.verl_engine.batch_convert import response_token_ids

    inner = ScriptedRollout(tokenizer, prompts, verl_mods.agent_loop)
    manager = _manager(inner, tokenizer, prompts, tmp_path, pasr={"draft_credit": "value"})
    out = manager.generate_sequences(_train_gen_batch(gen_batch, 3))
    manager.close()
    # R(a) drafts the "2" of "2k" before its <refine>: right for query 1 (gold 2), wrong for 0 and 2
    assert out.non_tensor_batch[DRAFT_SIGN].tolist() == [-1, -1, 0, 1, 0, 0, 0, -1, 0]
    start, end, ids = out.non_tensor_batch[DRAFT_START], out.non_tensor_batch[DRAFT_END], response_token_ids(out)
    for i in (0, 1, 3, 7):
        assert tokenizer.decode(ids[i][start[i] : end[i]]) == "2"
    # every scripted draft agrees with its outcome (nothing to clip): the advantages are GRPO's
    plain = fit_side(out, gen_batch, verl_mods, n=3).batch["advantages"]
    assert plain[3, start[3] : end[3]].min() > 0
    # call row 3's right draft wrong: its draft tokens lose their positive advantage, the rest keeps it
    out.non_tensor_batch[DRAFT_SIGN] = np.array([-1, -1, 0, -1, 0, 0, 0, -1, 0])
    adv = fit_side(out, gen_batch, verl_mods, n=3).batch["advantages"]
    a, b = int(start[3]), int(end[3])
    assert adv[3, a:b].abs().sum() == 0
    assert torch.equal(adv[3, b : len(ids[3])], plain[3, b : len(ids[3])]) and torch.equal(adv[3, :a], plain[3, :a])
    assert torch.equal(adv[[0, 1, 2, 4, 5, 6, 7, 8]], plain[[0, 1, 2, 4, 5, 6, 7, 8]])


def test_step_metrics_on_the_scripted_step(train_step):
    m = train_step.metrics
    assert m["pasr/format_pass_rate"] == 1.0
    assert m["pasr/refine_rate"] == pytest.approx(4 / 9)
    assert m["pasr/acc_refine"] == pytest.approx(6 / 8)
    assert m["pasr/acc_plain"] == pytest.approx(7 / 9)
    assert m["pasr/judge_errors"] == 1.0
    assert m["pasr/reward_mean"] == pytest.approx(13 / 8)
    assert m["pasr/refine_reward_mean"] == pytest.approx(-1 / 8)
    assert m["pasr/refine_outcome/tie"] == pytest.approx(2 / 9)
    assert m["pasr/refine_outcome/better"] == pytest.approx(1 / 9)
    assert m["pasr/refine_outcome/worse"] == pytest.approx(1 / 9)
    assert m["pasr/refine_outcome/none"] == pytest.approx(4 / 9)
    assert m["pasr/refine_outcome/judge_error"] == pytest.approx(1 / 9)
    assert m["pasr/draft_acc"] == pytest.approx(1 / 4)  # R(a)'s draft "2" is right for query 1 only
    assert (m["pasr/masked_rows"], m["pasr/plain_rows"]) == (1.0, 9.0)
    assert train_step.manager.pop_metrics() == {}  # handed over once


def test_rollout_dump_is_the_record_format(train_step):
    from data.records import iter_records

    path = train_step.tmp / "rollouts" / "step_000005.jsonl"
    records = list(iter_records(path, strict=True))
    assert len(records) == 18 and {r.engine for r in records} == {"verl"} and {r.step for r in records} == {5}
    refine = [r for r in records if r.variant == "refine"]
    plain = [r for r in records if r.variant == "plain"]
    assert len(refine) == len(plain) == 9 and all(r.total_reward is None for r in plain)
    assert [r.total_reward for r in refine] == [t for k in range(3) for t in EXPECTED_TOTALS[k]]
    assert [r.query_id for r in refine[:3]] == ["syn:0"] * 3 and refine[0].gold == "0"
    assert refine[8].judge_error == "judge unavailable" and refine[8].acc is None
    assert refine[0].prompt == "What is 0+0?" and refine[0].prompt_version and plain[0].prompt_version != refine[0].prompt_version


def test_validation_batches_are_scored_without_plain_rows(gen_batch, tokenizer, prompts, verl_mods, tmp_path):
    inner = ScriptedRollout(tokenizer, prompts, verl_mods.agent_loop)
    manager = _manager(inner, tokenizer, prompts, tmp_path)
    val = gen_batch.gen.slice(0, None)
    val.meta_info = {"validate": True, "global_steps": 0}
    try:
        out = manager.generate_sequences(val)
    finally:
        manager.close()
    assert inner.calls == [4] and len(out) == 3  # padded to the divisor, then unpadded
    # first refine script per query: R(0) right, R(2) right, N(4) right
    assert _row_totals(out) == [1.0, 1.0, 1.0]
    assert manager.pop_metrics() == {}
    assert (tmp_path / "rollouts" / "val_step_000000.jsonl").is_file()


# --------------------------------------------------------------------------- trainer subclass
def test_update_actor_adds_pasr_metrics(verl_mods, monkeypatch, train_step):
    from verl import DataProto
    from verl.utils.metric import reduce_metrics

    t = verl_mods.trainer

    def fake_update(self, batch):
        return DataProto.from_single_dict(data={}, meta_info={"metrics": {"actor/pg_loss": [0.1, 0.3]}})

    monkeypatch.setattr(verl_mods.ray_trainer.RayPPOTrainer, "_update_actor", fake_update)
    trainer = object.__new__(t.PasrRayTrainer)
    trainer.global_steps = 5
    trainer.async_rollout_manager = SimpleNamespace(pop_metrics=lambda: {"pasr/refine_rate": 0.5})
    out = trainer._update_actor(train_step.out)
    reduced = reduce_metrics(out.meta_info["metrics"])
    assert reduced["pasr/refine_rate"] == 0.5 and reduced["actor/pg_loss"] == pytest.approx(0.2)
    assert reduced["actor/update_skipped"] == 0.0


def test_update_actor_skips_a_batch_with_nothing_to_train(verl_mods, monkeypatch, train_step, capsys):
    """Every row masked (every judge failed; an RRR step whose first attempts all succeeded): verl's
    token-mean loss would divide by zero tokens, so the actor is not called; the metrics still come."""
    t = verl_mods.trainer
    monkeypatch.setattr(verl_mods.ray_trainer.RayPPOTrainer, "_update_actor", lambda self, b: pytest.fail("updated"))
    trainer = object.__new__(t.PasrRayTrainer)
    trainer.global_steps = 5
    trainer.async_rollout_manager = SimpleNamespace(pop_metrics=lambda: {"pasr/refine_rate": 0.5})
    batch = train_step.out.slice(0, None)
    batch.batch = batch.batch.clone()
    batch.batch["response_mask"] = torch.zeros_like(batch.batch["response_mask"])
    out = trainer._update_actor(batch)
    assert out.meta_info["metrics"] == {"actor/update_skipped": 1.0, "pasr/refine_rate": 0.5}
    assert "step 5: no token to train on; the actor update is skipped" in capsys.readouterr().out


def test_agent_loop_manager_is_enforced(verl_mods):
    from omegaconf import OmegaConf

    t = verl_mods.trainer
    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {"agent": {"num_workers": 1}}}})
    OmegaConf.set_struct(cfg, True)
    t._ensure_pasr_agent_loop_manager(cfg)
    assert cfg.actor_rollout_ref.rollout.agent.agent_loop_manager_class == t.AGENT_LOOP_MANAGER_FQN
    cfg.actor_rollout_ref.rollout.agent.agent_loop_manager_class = "verl.experimental.agent_loop.AgentLoopManager"
    with pytest.raises(t.PasrSetupError, match="not a subclass"):
        t._ensure_pasr_agent_loop_manager(cfg)
    assert issubclass(t.PasrAgentLoopManager, verl_mods.agent_loop.AgentLoopManager)


def test_build_rollout_manager_from_config(config, tokenizer):
    from rewards.judges import RuleJudge

    from recipe.verl_engine.rollout import build_rollout_manager

    inner = SimpleNamespace(generate_sequences=None, start_profile=lambda: "inner")
    manager = build_rollout_manager(config, tokenizer, inner)
    try:
        assert isinstance(manager.judge, RuleJudge) and manager.size_divisor == 8 and manager.run_id == "pasr"
        assert str(manager.rollout_dir) == "checkpoints/pasr/pasr/rollouts"
        assert manager.start_profile() == "inner"  # everything else is the wrapped manager's
    finally:
        manager.close()


def test_decode_keeps_pasr_tags_that_a_tokenizer_marks_special():
    from transformers import AutoTokenizer

    from runtime.decoding import decode_response
    from runtime.model_loading import resolve_model_path

    tok = AutoTokenizer.from_pretrained(resolve_model_path("smollm2"))
    tok.add_special_tokens({"additional_special_tokens": ["<think>", "</think>"]})  # as some chat models do
    ids = tok.encode("<think>a<refine>b</refine></think><answer>1</answer>", add_special_tokens=False)
    ids += [tok.eos_token_id, tok.pad_token_id]
    assert decode_response(tok, ids) == "<think>a<refine>b</refine></think><answer>1</answer>"


# --------------------------------------------------------------------------- run scripts
def _script_overrides(path: Path) -> list[str]:
    """The Hydra overrides a run script passes to recipe.main_pasr, shell variables filled in
    with stand-ins of the right type."""
    text = path.read_text()
    block = text[text.index("python3 -m recipe.main_pasr") :].splitlines()[1:]
    integer_keys = ("batch_size", "_freq", "n_gpus_per_node", "total_epochs", "parallel_size")
    out = []
    for line in block:
        item = line.strip().rstrip("\\").strip()
        if not item or item.startswith("${JUDGE_ARGS") or item == '"$@"':
            continue
        key, _, value = item.partition("=")
        if value.lstrip('"').startswith("$"):
            if key == "trainer.logger":
                value = '["console"]'
            elif key.endswith(integer_keys):
                value = "8"
            else:
                value = "/x"
        out.append(f"{key}={value}")
    return out


@pytest.mark.parametrize(
    "script,extra",
    [("run_pasr_qwen2_5_7b.sh", []), ("run_pasr_qwen3_8b.sh", ["+data.apply_chat_template_kwargs.enable_thinking=true"])],
)
def test_run_scripts_are_valid_and_use_the_paper_settings(script, extra):
    from omegaconf import OmegaConf

    wrapper = REPO / "recipe" / "scripts" / script
    path = REPO / "recipe" / "scripts" / "run_pasr_node.sh"
    for p in (wrapper, path):
        assert subprocess.run(["bash", "-n", str(p)]).returncode == 0
    assert "run_pasr_node.sh" in wrapper.read_text() and all(e in wrapper.read_text() for e in extra)
    text = path.read_text()
    assert "python3 -m recipe data prepare" in text and "vllm serve" in text and "/health" in text
    overrides = _script_overrides(path) + extra
    cfg = _compose(overrides)  # every key exists (Hydra rejects unknown ones)
    ar = cfg.actor_rollout_ref
    assert (cfg.pasr.n_refine, ar.rollout.n, ar.rollout.temperature, cfg.data.max_response_length) == (8, 8, 0.9, 1500)
    assert (ar.actor.optim.lr, ar.actor.kl_loss_coef, ar.actor.clip_ratio) == (1e-6, 0.04, 0.2)
    assert cfg.trainer.resume_mode == "auto" and cfg.trainer.use_v1 is False
    from recipe.verl_engine.config import engine_config, pasr_config

    pasr_config(cfg), engine_config(cfg)
    assert engine_config(cfg).rollout_dir == "/x/rollouts"  # beside the checkpoints, by default
    # the script passes only what differs from the config: every literal value it sets changes it
    default = _compose(extra)
    for item in _script_overrides(path):
        key, _, value = item.partition("=")
        if value != "/x" and key != "trainer.logger" and not value == "8":  # shell variables
            assert OmegaConf.select(default, key) != OmegaConf.select(cfg, key), f"{item} restates the config"


# --------------------------------------------------------------------------- attention (issue 11.2)
def test_attention_falls_back_to_sdpa_without_flash_attn():
    from omegaconf import open_dict
    from verl.utils.config import omega_conf_to_dataclass

    from recipe.verl_engine.config import choose_attention
    from runtime.model_loading import resolve_model_path

    cfg = _compose()
    message = choose_attention(cfg, has_flash_attn=lambda: False)
    model = cfg.actor_rollout_ref.model
    assert model.override_config.attn_implementation == "sdpa" and model.use_remove_padding is False
    assert "flash-attn is not installed" in message and "use_remove_padding=false" in message
    # verl builds the actor's and the reference model's HF config from exactly these keys
    with open_dict(model):
        model.path = resolve_model_path("smollm2")
    hf = omega_conf_to_dataclass(model)
    assert hf.hf_config._attn_implementation == "sdpa" and hf.use_remove_padding is False
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))


def test_attention_is_left_alone_with_flash_attn_or_an_explicit_choice():
    from recipe.verl_engine.config import PreflightError, choose_attention

    cfg = _compose()
    assert choose_attention(cfg, has_flash_attn=lambda: True) is None
    assert "attn_implementation" not in cfg.actor_rollout_ref.model.override_config
    assert cfg.actor_rollout_ref.model.use_remove_padding is True
    eager = _compose(["+actor_rollout_ref.model.override_config.attn_implementation=eager"])
    assert choose_attention(eager, has_flash_attn=lambda: False) is None
    assert eager.actor_rollout_ref.model.override_config.attn_implementation == "eager"
    explicit = _compose(["+actor_rollout_ref.model.override_config.attn_implementation=flash_attention_2"])
    with pytest.raises(PreflightError, match="flash_attention_2 but flash-attn does not import"):
        choose_attention(explicit, has_flash_attn=lambda: False)


def test_pinned_verl_defaults_to_flash_attention():
    from verl.workers.config import HFModelConfig

    assert 'self.override_config.get("attn_implementation", "flash_attention_2")' in _source(HFModelConfig.__post_init__)


def test_flash_attn_importable_is_false_here_when_absent():
    import importlib.util

    from recipe.verl_engine.config import flash_attn_importable

    if importlib.util.find_spec("flash_attn") is None:
        assert flash_attn_importable() is False


# --------------------------------------------------------------------------- node checks (issue 11.7)
def test_task_runner_checks_attention_and_the_judge_where_it_runs(verl_mods):
    t = verl_mods.trainer
    cfg = _compose()
    lines = t.node_checks(cfg, has_flash_attn=lambda: False, judge_check=lambda c: None, node="10.0.0.7")
    assert len(lines) == 1 and "sdpa" in lines[0]
    assert cfg.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"
    down = lambda c: "the judge endpoint pasr.judge.base_url=http://127.0.0.1:8000/v1 does not answer"  # noqa: E731
    with pytest.raises(t.PasrSetupError, match=r"does not answer, checked from node 10\.0\.0\.7"):
        t.node_checks(_compose(), has_flash_attn=lambda: True, judge_check=down, node="10.0.0.7")
    called = []
    t.node_checks(_compose(["pasr_verl.check_judge=false"]), has_flash_attn=lambda: True, judge_check=called.append)
    assert called == []


def test_launcher_is_what_run_ppo_calls(verl_mods):
    from verl.trainer.main_ppo import run_ppo

    src = _source(run_ppo)
    assert "runner = task_runner_class.remote()" in src and "ray.get(runner.run.remote(config))" in src
    assert 'task_runner_class.options(runtime_env={"nsight": nsight_options}).remote()' in src
    launcher = verl_mods.trainer.PasrTaskRunnerActor
    assert launcher.options(runtime_env={"x": 1})._options == {"runtime_env": {"x": 1}}
    assert hasattr(launcher.actor_cls, "set_stop_flag") and hasattr(launcher.actor_cls, "run")


# --------------------------------------------------------------------------- Ray jobs (issue 11.7)
def test_preflight_refuses_a_relative_checkpoint_dir_inside_a_ray_job(monkeypatch):
    from recipe.verl_engine.config import PreflightError, preflight

    ok = dict(local_gpus=lambda: 8, find_module=lambda n: object(), judge_check=lambda c: None)
    preflight(_compose(), **ok)  # outside a job a relative directory is the user's choice
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", '{"runtime_env": {}}')
    with pytest.raises(PreflightError, match=r"trainer.default_local_dir=checkpoints/pasr/pasr is relative: .*starts from scratch"):
        preflight(_compose(), **ok)
    with pytest.raises(PreflightError, match=r"pasr_verl.rollout_dir=dumps is relative"):
        preflight(_compose(["trainer.default_local_dir=/shared/ck", "pasr_verl.rollout_dir=dumps"]), **ok)
    preflight(_compose(["trainer.default_local_dir=/shared/ck"]), **ok)
    preflight(_compose(["trainer.default_local_dir='~/ck'", "pasr_verl.rollout_dir=null"]), **ok)


def test_max_judge_error_rate_is_validated():
    from recipe.pasr_config import ConfigError
    from recipe.verl_engine.config import engine_config

    assert engine_config(_compose()).max_judge_error_rate == 0.2
    with pytest.raises(ConfigError, match=r"max_judge_error_rate must be in \[0, 1\]"):
        engine_config(_compose(["pasr_verl.max_judge_error_rate=1.5"]))


# --------------------------------------------------------------------------- judge errors, no spread (11.3, 11.7)
def test_a_step_over_the_judge_error_limit_stops_after_its_dump(gen_batch, tokenizer, prompts, verl_mods, tmp_path):
    from data.records import iter_records
    from recipe.verl_engine.rollout_wrapper import JudgeErrorRateExceeded

    inner = ScriptedRollout(tokenizer, prompts, verl_mods.agent_loop)
    manager = _manager(inner, tokenizer, prompts, tmp_path, max_judge_error_rate=0.05)  # 1 error in 18 rows
    try:
        with pytest.raises(JudgeErrorRateExceeded, match=r"step 5: the judge failed on 1 of 18 rollouts \(6%\).*'judge unavailable'"):
            manager.generate_sequences(_train_gen_batch(gen_batch, 3))
        assert manager.pop_metrics() == {}  # nothing to train on, nothing logged
        assert len(list(iter_records(tmp_path / "rollouts" / "step_000005.jsonl"))) == 18  # dumped for inspection
        manager.max_judge_error_rate = 0.06
        assert len(manager.generate_sequences(_train_gen_batch(gen_batch, 3))) == 9
    finally:
        manager.close()


class UnformattedRollout(ScriptedRollout):
    """A base model that ignores the format: every refine rollout gets the same reward."""

    def respond(self, messages, seen) -> str:
        return "The answer is 4." if _variant(messages, self.prompts) == "refine" else P(4)


def test_zero_spread_groups_metric_and_loud_warning(train_step, gen_batch, tokenizer, prompts, verl_mods, tmp_path, capsys):
    assert train_step.metrics["pasr/zero_spread_groups"] == 0.0
    manager = _manager(UnformattedRollout(tokenizer, prompts, verl_mods.agent_loop), tokenizer, prompts, tmp_path)
    try:
        out = manager.generate_sequences(_train_gen_batch(gen_batch, 3))
        metrics = manager.pop_metrics()
        first = capsys.readouterr().err
        manager.generate_sequences(_train_gen_batch(gen_batch, 3, step=6))
        second = capsys.readouterr().err
    finally:
        manager.close()
    assert metrics["pasr/zero_spread_groups"] == 1.0 and metrics["pasr/format_pass_rate"] == 0.0
    assert set(_row_totals(out)) == {-1.0}
    assert "PASR WARNING step 5: no refine group has any reward spread" in first and "Cold start" in first
    assert "PASR WARNING step 6" in second and "Cold start" not in second  # the hint once, the warning every step


def test_zero_spread_fraction():
    from recipe.verl_engine.rollout_wrapper import zero_spread_fraction

    assert zero_spread_fraction([1, 1, 0, 2, 3, 3], ["a", "a", "b", "b", "c", "c"]) == pytest.approx(2 / 3)
    assert zero_spread_fraction([], []) == 0.0


# --------------------------------------------------------------------------- validation dumps (issue 11.5)
@pytest.fixture(scope="module")
def val_dataset(tmp_path_factory, tokenizer, prompts):
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from data.examples import Example
    from data.verl_parquet import write_rl_parquet

    tmp = tmp_path_factory.mktemp("val_data")
    examples = [Example(id=f"val:{k}", data_source="synthetic", question=f"What is {k}+{k}?", answer=str(2 * k)) for k in range(3)]
    path = write_rl_parquet(examples, tmp / "val.parquet", prompts.refine, split="test")
    cfg = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 512, "filter_overlong_prompts": False, "cache_dir": str(tmp / "c")})
    return RLHFDataset([str(path)], tokenizer, cfg)


def _validating_trainer(verl_mods, tokenizer, prompts, tmp_path, val_dataset, *, val_batch_size, val_n, step):
    """A PasrRayTrainer with what verl's own _validate reads: config, val dataloader (as
    _create_dataloader builds it), tokenizer, and the PASR rollout around scripted generation."""
    from torchdata.stateful_dataloader import StatefulDataLoader
    from verl.utils.dataset.rl_dataset import collate_fn

    t = object.__new__(verl_mods.trainer.PasrRayTrainer)
    t.config = _compose([f"actor_rollout_ref.rollout.val_kwargs.n={val_n}", "actor_rollout_ref.rollout.agent.num_workers=4"])
    t.tokenizer = tokenizer
    t.use_rm = False
    t.global_steps = step
    t.val_dataloader = StatefulDataLoader(val_dataset, batch_size=val_batch_size, shuffle=False, collate_fn=collate_fn)
    inner = ScriptedRollout(tokenizer, prompts, verl_mods.agent_loop)
    t.async_rollout_manager = _manager(inner, tokenizer, prompts, tmp_path, size_divisor=4, val_n=val_n)
    return t, inner


@pytest.mark.parametrize("val_batch_size,val_n,calls", [(None, 1, [4]), (2, 1, [4, 4]), (2, 2, [4, 4])])
def test_validation_dump_holds_each_question_once(verl_mods, tokenizer, prompts, tmp_path, val_dataset, val_batch_size, val_n, calls):
    """verl's own _validate: batches padded to agent.num_workers with copies of their first rows,
    several batches with data.val_batch_size; the dump has each question's val_n samples once."""
    from data.records import iter_records

    t, inner = _validating_trainer(
        verl_mods, tokenizer, prompts, tmp_path, val_dataset, val_batch_size=val_batch_size or len(val_dataset), val_n=val_n, step=7
    )
    try:
        metrics = t._validate()
    finally:
        t.async_rollout_manager.close()
    assert inner.calls == calls  # verl padded: 3 -> 4, or 2+1 -> 4+4 (with n=2: 4 + 2 -> 4 + 4)
    records = list(iter_records(tmp_path / "rollouts" / "val_step_000007.jsonl", strict=True))
    assert len(records) == 3 * val_n
    assert sorted((r.query_id, r.sample_index) for r in records) == [(f"val:{k}", i) for k in range(3) for i in range(val_n)]
    assert {r.dataset for r in records} == {"val"} and {r.step for r in records} == {7}
    # verl's metrics see the unpadded rows: the first refine answers are right for every question
    assert metrics[f"val-core/synthetic/acc/mean@{val_n}"] == pytest.approx(1.0 if val_n == 1 else 5 / 6)


def test_each_validation_starts_its_own_dump(verl_mods, tokenizer, prompts, tmp_path, val_dataset):
    from data.records import iter_records

    t, _ = _validating_trainer(verl_mods, tokenizer, prompts, tmp_path, val_dataset, val_batch_size=2, val_n=1, step=3)
    try:
        t._validate()
        t.global_steps = 6
        t._validate()
    finally:
        t.async_rollout_manager.close()
    for step in (3, 6):
        assert len(list(iter_records(tmp_path / "rollouts" / f"val_step_{step:06d}.jsonl"))) == 3
    # a resumed run validating the same step again rewrites that step's file instead of appending
    t2, _ = _validating_trainer(verl_mods, tokenizer, prompts, tmp_path, val_dataset, val_batch_size=2, val_n=1, step=6)
    try:
        t2._validate()
    finally:
        t2.async_rollout_manager.close()
    assert len(list(iter_records(tmp_path / "rollouts" / "val_step_000006.jsonl"))) == 3


# --------------------------------------------------------------------------- throughput (issue 11.8)
def test_pinned_fit_throughput_and_loop(verl_mods):
    fit = _source(verl_mods.ray_trainer.RayPPOTrainer.fit)
    assert "metrics.update(compute_throughout_metrics(batch=batch, timing_raw=timing_raw, n_gpus=n_gpus))" in fit
    assert 'batch.meta_info["global_token_num"] = torch.sum(batch.batch["attention_mask"], dim=-1).tolist()' in fit
    # the stop check sits in the loader: a step ends (log, global_steps += 1) before the next batch is asked for
    assert fit.count("for batch_dict in self.train_dataloader:") == 1
    log = fit.index("logger.log(data=metrics, step=self.global_steps)")
    inc = fit.index("self.global_steps += 1", log)
    assert fit.index("if is_last_step:", inc) > inc and "for batch_dict" not in fit[log:]
    assert "self._save_checkpoint()" in fit and "self._load_checkpoint()" in fit
    src = _source(verl_mods.ray_trainer.RayPPOTrainer._save_checkpoint)
    assert 'f"global_step_{self.global_steps}"' in src and "self.train_dataloader.state_dict()" in src
    fn = verl_mods.trainer.verl_fit()
    assert fn.__code__ is verl_mods.ray_trainer.RayPPOTrainer.fit.__code__
    assert fn.__globals__["compute_throughout_metrics"] is verl_mods.trainer.pasr_throughput_metrics
    assert verl_mods.ray_trainer.compute_throughout_metrics.__module__ == "verl.trainer.ppo.metric_utils"


def test_throughput_counts_the_plain_rows(train_step, gen_batch):
    from recipe.verl_engine.rollout_wrapper import UNTRAINED_TOKENS_KEY
    from recipe.verl_engine.trainer import pasr_throughput_metrics

    plain = train_step.out.meta_info[UNTRAINED_TOKENS_KEY]
    assert plain > 0
    # fit(): union with its repeated batch keeps the rollout's meta_info, then counts trained tokens
    batch = gen_batch.batch.repeat(repeat_times=3, interleave=True)
    out = train_step.out.slice(0, None)
    out.meta_info = {k: v for k, v in out.meta_info.items() if k != "timing"}
    batch = batch.union(out)
    batch.meta_info["global_token_num"] = torch.sum(batch.batch["attention_mask"], dim=-1).tolist()
    trained = sum(batch.meta_info["global_token_num"])
    m = pasr_throughput_metrics(batch, {"step": 2.0}, n_gpus=2)
    assert m["perf/trained_num_tokens"] == trained and m["perf/total_num_tokens"] == trained + plain
    assert m["perf/throughput"] == pytest.approx((trained + plain) / 4.0)
    assert m["perf/trained_throughput"] == pytest.approx(trained / 4.0)
    # 9 plain rows of about the same size as the 9 refine rows
    assert 0.5 < plain / trained < 1.5


# --------------------------------------------------------------------------- stopping (issue 11.9)
class FakeFit:
    """verl's fit() loop reduced to what stopping relies on (pinned in test_pinned_fit_throughput_and_loop):
    load, then per batch of self.train_dataloader a step that may checkpoint, log, global_steps += 1."""

    def __init__(self, stop_at_step=None, flag=None):
        self.stop_at_step, self.flag, self.steps = stop_at_step, flag, []

    def __call__(self, trainer):
        trainer._load_checkpoint()
        trainer.global_steps += 1
        for _epoch in range(2):
            for _batch in trainer.train_dataloader:
                self.steps.append(trainer.global_steps)
                if trainer.global_steps == self.stop_at_step:
                    self.flag.append("SIGTERM")  # the signal arrives mid-step
                if trainer.global_steps % trainer.config.trainer.save_freq == 0:
                    trainer._save_checkpoint()
                trainer.global_steps += 1


@pytest.mark.parametrize("save_freq,stop_at,saved", [(10, 3, [3]), (3, 3, [3]), (10, None, [10])])
def test_fit_stops_after_the_step_and_checkpoints_once(verl_mods, monkeypatch, save_freq, stop_at, saved):
    from torchdata.stateful_dataloader import StatefulDataLoader

    t_mod = verl_mods.trainer
    flag: list[str] = []
    monkeypatch.setattr(t_mod, "poll_stop_flag", lambda: flag[0] if flag else None)
    fake = FakeFit(stop_at, flag)
    monkeypatch.setattr(t_mod, "verl_fit", lambda: fake)
    monkeypatch.setattr(verl_mods.ray_trainer.RayPPOTrainer, "_load_checkpoint", lambda self: setattr(self, "global_steps", 1))
    saves = []

    def save(self):
        saves.append((self.global_steps, self.train_dataloader.state_dict()["_num_yielded"]))

    monkeypatch.setattr(verl_mods.ray_trainer.RayPPOTrainer, "_save_checkpoint", save)
    trainer = object.__new__(t_mod.PasrRayTrainer)
    trainer.config = _compose([f"trainer.save_freq={save_freq}"])
    trainer.global_steps = 0
    trainer.train_dataloader = StatefulDataLoader(list(range(5)), batch_size=1)
    trainer.fit()
    if stop_at is None:
        assert fake.steps == list(range(2, 12)) and saves == [(10, 4)]  # resumed at 1: two epochs of 5, verl's saves only
        return
    assert fake.steps == [2, 3]  # step 3 finished, step 4 never started
    # one checkpoint of step 3, whose dataloader state counts the 2 batches trained on
    assert saves == [(3, 2)] and [s for s, _ in saves] == saved
    assert trainer.global_steps == 4


def test_stop_without_a_new_step_saves_nothing(verl_mods, monkeypatch, capsys):
    t = object.__new__(verl_mods.trainer.PasrRayTrainer)
    t.config = _compose()
    t.global_steps, t._last_saved_step = 7, 6  # resumed from 6, stopped before step 7 ran
    monkeypatch.setattr(verl_mods.ray_trainer.RayPPOTrainer, "_save_checkpoint", lambda self: pytest.fail("saved"))
    assert t._checkpoint_on_stop() is None and "already saved" in capsys.readouterr().out
    t.config = _compose(["trainer.save_freq=-1"])
    t._last_saved_step = 2
    assert t._checkpoint_on_stop() is None and "trainer.save_freq <= 0" in capsys.readouterr().out


def test_stop_aware_loader_keeps_the_inner_loader_state():
    from torchdata.stateful_dataloader import StatefulDataLoader

    from recipe.verl_engine.stopping import StopAwareLoader

    stop = []
    inner = StatefulDataLoader(list(range(6)), batch_size=2)
    loader = StopAwareLoader(inner, lambda: bool(stop))
    got = []
    for batch in loader:
        got.append(batch.tolist())
        if len(got) == 2:
            stop.append(1)
    assert got == [[0, 1], [2, 3]] and len(loader) == 3
    assert loader.state_dict()["_num_yielded"] == 2
    assert list(loader) == [] and loader.state_dict()["_num_yielded"] == 2  # not restarted


def test_driver_stop_handler_forwards_one_request_then_aborts():
    import io
    import signal as sig

    from recipe.verl_engine.stopping import DriverStopHandler

    sent = []
    out = io.StringIO()
    before = sig.getsignal(sig.SIGTERM), sig.getsignal(sig.SIGINT)
    handler = DriverStopHandler(sent.append, out=out).install()
    try:
        os.kill(os.getpid(), sig.SIGTERM)
        assert handler.sent.wait(10)
        assert sent == ["SIGTERM"] and "SIGTERM: finishing the current step, saving a checkpoint" in out.getvalue()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), sig.SIGINT)
            import time

            time.sleep(1)  # the handler runs at the next bytecode boundary
        assert sent == ["SIGTERM"] and "SIGINT again: stopping now" in out.getvalue()
        assert (sig.getsignal(sig.SIGTERM), sig.getsignal(sig.SIGINT)) == before  # handlers given back
    finally:
        handler.uninstall()


def test_stop_wait_warning():
    from recipe.verl_engine.stopping import stop_wait_warning

    assert stop_wait_warning({}) is None
    job = {"RAY_JOB_CONFIG_JSON_ENV_VAR": "{}"}
    assert "RAY_JOB_STOP_WAIT_TIME_S" in stop_wait_warning(job)
    assert stop_wait_warning({**job, "RAY_JOB_STOP_WAIT_TIME_S": "900"}) is None


# --------------------------------------------------------------------------- smoke and cold-start scripts
def test_smoke_script_drives_the_node_script_with_the_measured_settings():
    import re

    smoke = REPO / "recipe" / "scripts" / "run_pasr_smoke_1gpu.sh"
    node = (REPO / "recipe" / "scripts" / "run_pasr_node.sh").read_text()
    assert subprocess.run(["bash", "-n", str(smoke)]).returncode == 0
    text = smoke.read_text()
    train = text[text.index("train() {") : text.index("\n}\n", text.index("train() {"))]
    env = dict(re.findall(r"\b([A-Z_]+)=(\"?[^\s\\\\]+)", train.split("bash recipe/scripts/run_pasr_node.sh")[0]))
    assert {"NGPUS", "TRAIN_BSZ", "ROLLOUT_TP", "SAVE_FREQ", "TEST_FREQ", "CKPT_DIR", "DATA_DIR", "MODEL_PATH", "EXP_NAME"} <= set(env)
    for name in env:  # every variable the smoke run sets is one the node script reads
        assert "${" + name in node or "$" + name in node, name
    assert (env["NGPUS"], env["TRAIN_BSZ"], env["ROLLOUT_TP"]) == ("1", "16", "1")
    extra = ["data.max_response_length=384", "trainer.total_training_steps=3", "trainer.max_actor_ckpt_to_keep=2"]
    for item in extra:
        assert item.split("=")[0] in train
    cfg = _compose(_script_overrides(REPO / "recipe" / "scripts" / "run_pasr_node.sh") + extra)
    assert (cfg.pasr.n_refine, cfg.pasr.n_plain, cfg.data.max_response_length) == (8, 8, 384)
    assert "pasr eval" in text or "recipe eval" in text
    assert "--backend vllm" in text and "global_step_$STEPS_TOTAL" in text and "Resuming from" in text


def test_smoke_prelude_clears_only_a_smoke_runs_folder(tmp_path):
    """Both smoke scripts start from smoke_common.sh: a folder with smoke.log loses the paths
    named (and eval/, logs) and keeps the rest; any other non-empty folder is refused, untouched."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    for tool, out in (("nvidia-smi", "FakeGPU, 80 GiB"), ("python3", "/models/smollm2")):
        (fake_bin / tool).write_text(f"#!/bin/sh\necho '{out}'\n")
        (fake_bin / tool).chmod(0o755)
    prelude = f'source recipe/scripts/smoke_common.sh; smoke_prelude "$RUN_DIR/ckpt"; stamp started; echo "model=$MODEL_PATH"'

    def run(run_dir: Path):
        env = {"PATH": f"{fake_bin}:/usr/bin:/bin", "RUN_DIR": str(run_dir)}
        return subprocess.run(["bash", "-c", prelude], cwd=REPO, env=env, capture_output=True, text=True)

    smoke = tmp_path / "smoke"
    for sub in ("ckpt", "eval", "data"):
        (smoke / sub).mkdir(parents=True)
    (smoke / "smoke.log").write_text("old\n")
    done = run(smoke)
    assert done.returncode == 0, done.stderr
    assert "model=/models/smollm2" in done.stdout
    assert sorted(x.name for x in smoke.iterdir()) == ["data", "gpu.txt", "smoke.log"]
    assert "FakeGPU" in (smoke / "gpu.txt").read_text() and "started" in (smoke / "smoke.log").read_text()

    other = tmp_path / "other"
    (other / "ckpt").mkdir(parents=True)
    refused = run(other)
    assert refused.returncode == 2 and "not a smoke run's folder" in refused.stderr
    assert [x.name for x in other.iterdir()] == ["ckpt"]
    for script in ("run_pasr_smoke_1gpu.sh", "run_rrr_smoke_1gpu.sh"):
        assert "smoke_prelude " in (REPO / "recipe" / "scripts" / script).read_text()


def test_smoke_train_and_resume_runs_two_phases_and_stamps_a_failure(tmp_path):
    """Both smoke scripts train through smoke_common.sh's train_and_resume: the script's train()
    to STEPS_FIRST, then to STEPS_TOTAL (resuming), each with the overrides; a failed phase is
    stamped with its log and the second still runs (the checks report what is missing)."""
    script = (
        "source recipe/scripts/smoke_common.sh; SECONDS=0; "
        'train() { echo "train $*" >> "$RUN_DIR/calls"; [[ $1 != 3 ]]; }; '
        "train_and_resume k=v"
    )
    env = {"PATH": "/usr/bin:/bin", "RUN_DIR": str(tmp_path), "STEPS_FIRST": "3", "STEPS_TOTAL": "5"}
    done = subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "calls").read_text().splitlines() == [
        f"train 3 {tmp_path}/train_1.log k=v",
        f"train 5 {tmp_path}/train_2.log k=v",
    ]
    log = (tmp_path / "smoke.log").read_text()
    assert f"run 1 failed: {tmp_path}/train_1.log" in log and "run 2: resume from global_step_3, steps 4-5" in log
    assert "run 2 failed" not in log
    for name in ("run_pasr_smoke_1gpu.sh", "run_rrr_smoke_1gpu.sh"):
        assert 'train_and_resume "$@"' in (REPO / "recipe" / "scripts" / name).read_text()


def _sft_overrides(path: Path) -> list[str]:
    text = path.read_text()
    block = text[text.index("-m verl.trainer.sft_trainer") :].splitlines()[1:]
    out = []
    for line in block:
        item = line.strip().rstrip("\\").strip()
        if not item or item.startswith("${ATTN_ARGS"):
            continue
        if item.startswith('"$@"'):
            break
        key, _, value = item.partition("=")
        if value.lstrip('"').startswith("$"):
            value = {"trainer.total_epochs": "2", "trainer.n_gpus_per_node": "1", "optim.lr": "1e-5"}.get(key, "/x")
        elif value.startswith("'") and value.endswith("'"):
            value = value[1:-1]  # as the shell passes it
        out.append(f"{key}={value}")
    return out


def test_sft_warmup_script_overrides_exist_in_verls_sft_config():
    from hydra import compose, initialize_config_dir

    import verl

    script = REPO / "recipe" / "scripts" / "run_sft_warmup.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    text = script.read_text()
    assert "python3 -m data.sft_parquet" in text and "python3 -m runtime.hf_export" in text
    attn = ["model.use_remove_padding=false", "+model.override_config.attn_implementation=sdpa"]
    assert all(a in text for a in attn)
    overrides = _sft_overrides(script) + attn
    assert "data.messages_key=messages" in overrides
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        cfg = compose(config_name="sft_trainer_engine", overrides=overrides)  # unknown keys fail here
    assert cfg.data.messages_key == "messages" and cfg.model.override_config.attn_implementation == "sdpa"
    assert cfg.model.use_remove_padding is False and cfg.trainer.logger == ["console"]


def test_smoke_validation_check_counts_the_prompts_the_trainer_kept(tmp_path):
    """verl drops prompts over data.max_prompt_length (MATH-500 at 1024 tokens: 499 of 500) and
    prints "filter dataset len: N" for the training set, then the validation set: the check counts
    the validation set's N from run 1's log."""
    text = (REPO / "recipe" / "scripts" / "run_pasr_smoke_1gpu.sh").read_text()
    lines = [ln for ln in text.splitlines() if ln.startswith(("n_val=", '[[ -n "$n_val" ]]'))]
    assert len(lines) == 2
    (tmp_path / "train_1.log").write_text(
        "(TaskRunner pid=1) dataset len: 7473\n(TaskRunner pid=1) filter dataset len: 7473\n"
        "(TaskRunner pid=1) dataset len: 500\n(TaskRunner pid=1) filter dataset len: 499\n")
    script = "set -euo pipefail\n" + "\n".join(lines) + '\necho "$n_val"'
    done = subprocess.run(["bash", "-c", script], cwd=REPO, env={"PATH": "/usr/bin:/bin", "RUN_DIR": str(tmp_path)},
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "499"


def test_pasr_trainer_yaml_states_only_deltas_over_verls_defaults():
    """Every value pasr_trainer.yaml sets differs from verl's own ppo_trainer default (verl-recipe's
    dapo keeps only deltas too): composed side by side, no key of ours restates verl's value."""
    import os

    import verl
    import yaml
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=os.path.join(os.path.dirname(verl.__file__), "trainer", "config"), version_base=None):
        base = compose(config_name="ppo_trainer")
    ours = yaml.safe_load((CONFIG_DIR / "pasr_trainer.yaml").read_text())

    def leaves(node, prefix=""):
        for key, value in node.items():
            if key in ("defaults", "hydra"):
                continue
            path = f"{prefix}.{key}" if prefix else key
            if isinstance(value, dict):
                yield from leaves(value, path)
            else:
                yield path, value

    restated = [path for path, value in leaves(ours)
                if not (isinstance(value, str) and "${" in value) and OmegaConf.select(base, path) == value]
    assert restated == []
    composed = _compose([])  # the paper's values verl already has still hold after the deltas
    actor = composed.actor_rollout_ref.actor
    assert (actor.optim.lr, actor.clip_ratio, actor.kl_loss_type, actor.loss_agg_mode) == (1e-6, 0.2, "low_var_kl", "token-mean")
    assert composed.actor_rollout_ref.rollout.val_kwargs.temperature == 0 and composed.algorithm.norm_adv_by_std_in_grpo
