"""The ``pasr_trainer`` config: its PASR schema, composing it, and checking it before anything
heavy starts.

``pasr.*``, ``pasr_verl.*`` and ``rrr.*`` come from the dataclasses
:class:`recipe.pasr_config.PasrConfig`, :class:`VerlEngineConfig` and
:class:`recipe.rrr_config.RrrConfig`, registered with Hydra as the config ``pasr_schema``
(:func:`register_schema`) and listed in ``pasr_trainer.yaml``'s defaults: the yaml and the run
scripts set only what differs from them, and Hydra itself types and checks overrides such as
``pasr.n_refine=4``. :func:`compose_config` composes the config as ``recipe.main_pasr`` does
(``pasr submit`` checks a run before it submits it).

``method`` (``pasr`` | ``rrr``, :mod:`recipe.rrr_config`) picks the rollout
(:func:`recipe.verl_engine.rollout.build_rollout_manager`); the yaml derives ``rollout.n``, the
GRPO group ``fit()`` asks per prompt, from the method's own size (``pasr.n_refine`` or
``rrr.n_reflections``).

``python -m recipe.main_pasr`` and ``pasr submit --engine verl`` both fail early, with a
message that says what is wrong, instead of a stack trace from inside verl minutes later:
an unknown ``method``, an invalid or retired (:mod:`recipe.retired_keys`) ``pasr.*`` /
``pasr_verl.*`` / ``rrr.*`` key, ``rollout.n`` differing from the method's group size, an RRR
run whose prompts cannot hold an attempt and a reflection or whose judge is not binary, the v1
trainer, ReMax, vLLM missing, fewer GPUs than ``trainer.nnodes x trainer.n_gpus_per_node``, or
(inside a Ray job) a relative checkpoint directory.

Two more decisions are taken where the trainer runs (the task runner, see
:mod:`recipe.verl_engine.trainer`), because they depend on that node and not on the driver's:
:func:`choose_attention` (``sdpa`` without padding removal when flash-attn is missing) and
:func:`check_judge_endpoint` (the judge must answer from where it is called).
Nothing here imports verl's trainer, torch or ray at module level.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from recipe.config_text import null_interpolations
from recipe.metrics_file import logger_problems
from recipe.pasr_config import ConfigError, PasrConfig, load_pasr_config, merge_structured, refuse_non_finite
from recipe.retired_keys import retired_overrides
from recipe.rrr_config import RrrConfig, check_method, judge_problem, load_rrr_config

CONFIG_DIR = Path(__file__).resolve().parents[1] / "config"
CONFIG_NAME = "pasr_trainer"


@dataclass
class VerlEngineConfig:
    """``pasr_verl.*``: settings of the verl engine only (``pasr.*`` is shared with the local one)."""

    # rollout dumps (RolloutRecord JSONL per step), beside the checkpoints; null = none
    rollout_dir: str | None = "${trainer.default_local_dir}/rollouts"
    run_id: str | None = None  # run id written into every record (null: trainer.experiment_name)
    dump_validation: bool = True  # also dump validation rollouts (val_step_NNNNNN.jsonl)
    check_resources: bool = True  # fail at start when the GPUs the config asks for are not there
    check_judge: bool = True  # fail at start when an LLM judge's base_url does not answer
    # wait up to this long for actor_rollout_ref.model.path to appear before the task runner reads
    # it (0: read at once): a job that writes its starting model while verl starts up (the GPU
    # check's warm-up beside minutes of verl's process start-ups) need not wait to launch verl
    wait_for_model_s: float = 0.0

    def validate(self) -> VerlEngineConfig:
        refuse_non_finite(self, "pasr_verl")
        return self


class PreflightError(RuntimeError):
    """A reason not to start; the message is shown as one line."""


SCHEMA_NAME = "pasr_schema"  # the Hydra config pasr_trainer.yaml lists in its defaults


TYPED_SECTIONS = ("pasr", "pasr_verl", "rrr")  # the config's sections this package's dataclasses type


def register_schema() -> None:
    """Register ``pasr_schema`` (the ``pasr``, ``pasr_verl`` and ``rrr`` sections with their
    dataclass defaults) in Hydra's ConfigStore; every composition of ``pasr_trainer`` needs it first."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(
        name=SCHEMA_NAME, node={"pasr": PasrConfig, "pasr_verl": VerlEngineConfig, "rrr": RrrConfig}
    )


def compose_config(overrides: Iterable[str] = ()):
    """``pasr_trainer`` with Hydra ``overrides``, composed as ``python3 -m recipe.main_pasr`` does.
    A retired key or value among them is a :class:`ConfigError` naming every one
    (:mod:`recipe.retired_keys`; Hydra would call a retired key unknown); Hydra's own errors (an
    unknown key, a wrong type, a malformed override) propagate."""
    from hydra import compose, initialize_config_dir

    overrides = list(overrides)
    retired = retired_overrides(overrides)
    if retired:
        raise ConfigError("; ".join(retired))
    register_schema()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose(config_name=CONFIG_NAME, overrides=list(overrides))


def plain_sections(config) -> None:
    """Turn the typed ``pasr`` / ``pasr_verl`` / ``rrr`` nodes into plain ones (in place, values
    and ``${...}`` kept), once they are checked: the config then travels to Ray's actors and
    verl's workers without a reference to this package's dataclasses."""
    from omegaconf import open_dict

    with open_dict(config):
        for key in TYPED_SECTIONS:
            node = config.get(key)
            if OmegaConf.is_config(node):
                config[key] = OmegaConf.create(OmegaConf.to_container(node, resolve=False))


def _section(config, key: str):
    """A section as plain data with its ``${...}`` resolved against the whole config."""
    node = config.get(key)
    if node is None or not OmegaConf.is_config(node):
        return node
    return OmegaConf.to_container(node, resolve=True)


def method_of(config) -> str:
    """The config's training method, ``pasr`` (also when the key is absent) or ``rrr``."""
    return check_method(str(OmegaConf.select(config, "method", default="pasr")))


def _rollout_n(config, default: int) -> int:
    return int(OmegaConf.select(config, "actor_rollout_ref.rollout.n", default=default))


def pasr_config(config) -> PasrConfig:
    """The validated ``pasr`` section (the judge is there for both methods); with ``method=pasr``
    ``rollout.n`` must be ``pasr.n_refine``."""
    cfg = load_pasr_config(_section(config, "pasr"))
    if method_of(config) != "pasr":
        return cfg
    n = _rollout_n(config, cfg.n_refine)
    if n != cfg.n_refine:
        raise ConfigError(
            f"actor_rollout_ref.rollout.n={n} differs from pasr.n_refine={cfg.n_refine}: set pasr.n_refine "
            "(the config derives rollout.n from it)"
        )
    return cfg


def rrr_config(config) -> RrrConfig:
    """The validated ``rrr`` section; with ``method=rrr`` also what the RRR rollout
    (:mod:`recipe.verl_engine.rrr_rollout`) needs from the rest of the config:

    * ``rollout.n == rrr.n_reflections``: ``fit()`` repeats each prompt ``rollout.n`` times and
      unions the rollout's output with that batch row by row, so the RRR rollout returns a
      query's ``n_reflections`` reflections in its ``rollout.n`` rows (the first attempt is one
      per query, as in the paper; a query without reflections fills its rows with masked
      rows). The yaml derives ``rollout.n`` from ``rrr.n_reflections``.
    * a binary judge (``pasr.judge.kind`` rule or countdown): a reflection's reward is whether
      its retry succeeded;
    * prompts that hold a failed attempt and a reflection: the retry prompt carries the question,
      the attempt (up to ``data.max_response_length`` tokens) and the reflection (up to
      ``rrr.max_reflection_tokens``), and verl's agent loop left-truncates a prompt longer than
      ``rollout.prompt_length`` (``data.max_prompt_length``) with a log warning only: the
      question would be cut off."""
    cfg = load_rrr_config(_section(config, "rrr"))
    if method_of(config) != "rrr":
        return cfg
    problems = []
    n = _rollout_n(config, cfg.n_reflections)
    if n != cfg.n_reflections:
        problems.append(
            f"actor_rollout_ref.rollout.n={n} differs from rrr.n_reflections={cfg.n_reflections}: with method=rrr "
            "fit() asks rollout.n rows per prompt and the RRR rollout fills them with a failed query's reflections; "
            "set rrr.n_reflections (the config derives rollout.n from it)"
        )
    judge = load_pasr_config(_section(config, "pasr")).judge.kind
    if judge_problem(judge):
        problems.append(judge_problem(judge))
    prompt_len = int(OmegaConf.select(config, "actor_rollout_ref.rollout.prompt_length", default=0) or 0)
    response_len = int(OmegaConf.select(config, "actor_rollout_ref.rollout.response_length", default=0) or 0)
    needed = response_len + cfg.max_reflection_tokens
    if prompt_len and response_len and prompt_len <= needed:
        problems.append(
            f"data.max_prompt_length={prompt_len} cannot hold an RRR retry prompt: it carries the question, the "
            f"failed attempt (up to data.max_response_length={response_len} tokens) and the reflection (up to "
            f"rrr.max_reflection_tokens={cfg.max_reflection_tokens}), more than {needed} tokens, and verl's agent "
            f"loop cuts a longer prompt from the left; raise data.max_prompt_length (e.g. {needed + 512})"
        )
    if problems:
        raise ConfigError("; ".join(problems))
    return cfg


def wait_for_model(path: str, timeout_s: float, poll_s: float = 0.5) -> None:
    """Wait up to ``timeout_s`` for the local folder ``path`` (``pasr_verl.wait_for_model_s``); a
    hub name or a path that never appears is left to the loader's own error. The local engine
    renames a checkpoint into place whole, so its folder appearing means its files are there."""
    if timeout_s <= 0 or not str(path).startswith("/"):
        return
    t0 = time.monotonic()
    while not os.path.isdir(path) and time.monotonic() - t0 < timeout_s:
        time.sleep(poll_s)
    print(
        f"pasr verl: model {path} {'there' if os.path.isdir(path) else 'still missing'} "
        f"after {time.monotonic() - t0:.1f} s",
        flush=True,
    )


def engine_config(config) -> VerlEngineConfig:
    if problems := null_interpolations(config, "pasr_verl"):  # ${trainer.default_local_dir}/rollouts, dir null
        raise ConfigError("; ".join(problems))
    merged = merge_structured(VerlEngineConfig, _section(config, "pasr_verl"), "pasr_verl")
    return OmegaConf.to_object(merged).validate()  # type: ignore[union-attr]


def required_gpus(config) -> tuple[int, int]:
    """``(nnodes, n_gpus_per_node)`` the trainer will ask Ray for."""
    return int(config.trainer.nnodes), int(config.trainer.n_gpus_per_node)


def gpu_shortfall(node_gpus: Iterable[float], nnodes: int, per_node: int, where: str = "the cluster") -> str | None:
    """Why ``node_gpus`` (GPUs of each alive node) cannot host ``nnodes`` x ``per_node``, or None.

    verl places one pool of ``per_node`` GPUs on each of ``nnodes`` nodes, so the check is per
    node, not a total."""
    gpus = [int(g) for g in node_gpus]
    fitting = sum(g >= per_node for g in gpus)
    if fitting >= nnodes:
        return None
    have = ", ".join(str(g) for g in gpus) if gpus else "no nodes"
    return (
        f"the config needs {nnodes} node(s) with {per_node} GPU(s) each (trainer.nnodes={nnodes} x "
        f"trainer.n_gpus_per_node={per_node}) but {where} has {sum(gpus)} GPU(s) "
        f"(GPUs per node: {have})"
    )


_NVIDIA_DEV = re.compile(r"^nvidia\d+$")


def count_local_gpus(environ: Mapping[str, str] | None = None, dev: str = "/dev") -> int | None:
    """GPUs this machine exposes, without importing torch: NVIDIA device nodes, narrowed by
    ``CUDA_VISIBLE_DEVICES``. None when it cannot tell (AMD/Ascend devices present): the caller
    then asks torch."""
    environ = os.environ if environ is None else environ
    try:
        names = os.listdir(dev)
    except OSError:
        return None
    nvidia = sum(bool(_NVIDIA_DEV.match(n)) for n in names)
    if nvidia == 0:
        if "kfd" in names or any(n.startswith("davinci") for n in names):
            return None
        return 0
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return nvidia
    entries = [v for v in visible.split(",") if v.strip() and v.strip() != "-1"]
    return min(nvidia, len(entries))


NO_GPU_HINT = (
    "the verl engine trains on GPUs (vLLM rollouts, FSDP actor). Run it on a GPU node, or submit it "
    "to a Ray cluster with GPUs: `pasr submit --address http://HEAD:8265 -- OVERRIDES`; on a CPU "
    "machine use the local engine: `pasr train`"
)


def ray_address(config=None, environ: Mapping[str, str] | None = None) -> str | None:
    """The Ray cluster the trainer will join (``ray_kwargs.ray_init.address`` or ``RAY_ADDRESS``),
    or None when ``ray.init()`` will start a local one."""
    environ = os.environ if environ is None else environ
    if config is not None:
        addr = OmegaConf.select(config, "ray_kwargs.ray_init.address", default=None)
        if addr:
            return str(addr)
    return environ.get("RAY_ADDRESS") or None


def check_judge_endpoint(cfg: PasrConfig) -> str | None:
    """Why the LLM judge cannot score, or None (judges without an endpoint need none): one
    request with the run's own endpoint, model and judge prompt (:func:`rewards.judges.ping_judge`,
    what the local engine asks at its start too).

    Called twice: by the driver before Ray starts (fast answer), and by the task runner, which
    holds the judge client and may run on another node of a cluster (``127.0.0.1`` there is a
    different machine); the second answer is the one that counts."""
    from rewards.judges import ping_judge

    return ping_judge(cfg.judge, cfg.prompts.judge)


# --------------------------------------------------------------------------- attention
FLASH_ATTENTION = ("flash_attention_2", "flash_attention_3")
FALLBACK_ATTENTION = "sdpa"


def flash_attn_importable() -> bool:
    """Whether ``flash_attn`` imports here. A wheel built for another torch is installed but fails
    to import (undefined symbol), so finding the package is not enough."""
    import importlib.util

    if importlib.util.find_spec("flash_attn") is None:
        return False
    try:
        import flash_attn  # noqa: F401
    except Exception:  # ImportError, OSError (missing .so symbol), RuntimeError
        return False
    return True


def choose_attention(config, has_flash_attn: Callable[[], bool] = flash_attn_importable) -> str | None:
    """Make the actor and reference model use an attention that is installed; returns the line
    to log, or None when nothing changed.

    verl 0.9.1 builds the FSDP model with ``override_config.attn_implementation`` or, unset,
    ``flash_attention_2``, and ``use_remove_padding`` packs a batch into one sequence, which only
    flash-attn's varlen kernels attend correctly. The recipe's ``gpu`` extra (verl's ``vllm``
    extra) does not install flash-attn (no wheel on PyPI for torch 2.11), so without this the
    workers die at start. Without flash-attn: ``sdpa`` and no padding removal (what the first GPU
    run needed). An explicit ``flash_attention_*`` without flash-attn fails here instead of in
    every worker. ``config`` is changed in place."""
    from omegaconf import open_dict

    model = config.actor_rollout_ref.model
    override = model.get("override_config") or {}
    asked = override.get("attn_implementation")
    if asked is not None and str(asked) not in FLASH_ATTENTION:
        return None  # the user chose a non-flash attention; leave padding removal to them
    if has_flash_attn():
        return None
    if asked is not None:
        raise PreflightError(
            f"actor_rollout_ref.model.override_config.attn_implementation={asked} but flash-attn does not import "
            f"on this node; install flash-attn for this torch, or drop the override (the recipe then uses "
            f"{FALLBACK_ATTENTION} without padding removal)"
        )
    with open_dict(model):
        if model.get("override_config") is None:
            model.override_config = {}
        model.override_config.attn_implementation = FALLBACK_ATTENTION
        was = bool(model.get("use_remove_padding", False))
        model.use_remove_padding = False
    return (
        f"flash-attn is not installed (or does not import): the actor and reference model use "
        f"attn_implementation={FALLBACK_ATTENTION}"
        + (" and use_remove_padding=false (packed sequences need flash-attn)" if was else "")
        + "; install flash-attn for this torch to get padding removal back"
    )


# --------------------------------------------------------------------------- paths in a Ray job
RAY_JOB_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"  # set by Ray's job supervisor for a job's entrypoint
REMOTE_PREFIXES = ("hdfs://", "s3://", "gs://")


def in_ray_job(environ: Mapping[str, str] | None = None) -> bool:
    environ = os.environ if environ is None else environ
    return bool(environ.get(RAY_JOB_ENV))


def relative_dir_problem(config, engine: VerlEngineConfig) -> str | None:
    """Why the run's directories are unusable in a Ray job, or None.

    A job runs in a temporary copy of its ``working_dir`` (content-hashed, per node): a relative
    ``trainer.default_local_dir`` lands there, so the next submission finds no checkpoint and
    ``resume_mode=auto`` silently starts from scratch, and the dumps disappear with the copy."""
    dirs = {"trainer.default_local_dir": OmegaConf.select(config, "trainer.default_local_dir", default=None)}
    if engine.rollout_dir:
        dirs["pasr_verl.rollout_dir"] = engine.rollout_dir
    for key, value in dirs.items():
        if value is None:
            continue
        text = str(value)
        if text.startswith(("/", "~") + REMOTE_PREFIXES):
            continue
        return (
            f"{key}={text} is relative: in a Ray job it resolves inside the job's temporary working directory, "
            "so checkpoints and dumps are lost with it and a resubmission silently starts from scratch; pass an "
            "absolute path on storage every node sees, e.g. trainer.default_local_dir=/shared/ckpts/EXP"
        )
    return None


def preflight(
    config,
    *,
    local_gpus: Callable[[], int] | None = None,
    cluster_node_gpus: Callable[[str], list[float]] | None = None,
    find_module: Callable[[str], object] | None = None,
    judge_check: Callable[[PasrConfig], str | None] | None = None,
) -> tuple[PasrConfig, VerlEngineConfig]:
    """Validate a composed config and the machine/cluster it is about to run on.

    The callables are seams for tests; by default they ask torch, Ray and importlib."""
    try:
        cfg = pasr_config(config)
        rrr_config(config)
        engine = engine_config(config)
    except ConfigError as exc:
        raise PreflightError(str(exc)) from None

    if bool(OmegaConf.select(config, "trainer.use_v1", default=False)):
        raise PreflightError(
            "trainer.use_v1=true: PASR runs on verl's legacy RayPPOTrainer path (the v1 trainer needs "
            "TransferQueue and its own rollout loop); keep trainer.use_v1=false"
        )
    if str(OmegaConf.select(config, "algorithm.adv_estimator", default="grpo")).lower() == "remax":
        raise PreflightError(
            "algorithm.adv_estimator=remax is not supported: PASR and RRR use GRPO-style groups per uid"
        )

    if engine.check_resources and os.environ.get("PASR_SKIP_GPU_CHECK") != "1":
        nnodes, per_node = required_gpus(config)
        address = ray_address(config)
        if address:
            why = gpu_shortfall(
                (cluster_node_gpus or _cluster_node_gpus)(address), nnodes, per_node, f"the Ray cluster at {address}"
            )
        else:
            if nnodes > 1:
                raise PreflightError(
                    f"trainer.nnodes={nnodes} needs a Ray cluster: start Ray on every node and submit with "
                    "`pasr submit --address http://HEAD:8265`, or set RAY_ADDRESS"
                )
            n_local = (local_gpus or _torch_gpu_count)()
            why = gpu_shortfall([n_local], nnodes, per_node, "this machine")
            if why and n_local == 0:
                why = f"no GPU on this machine: {NO_GPU_HINT}"
        if why:
            raise PreflightError(why + " (pasr_verl.check_resources=false skips this check)")

    if in_ray_job():
        why = relative_dir_problem(config, engine)
        if why:
            raise PreflightError(why)

    rollout_name = OmegaConf.select(config, "actor_rollout_ref.rollout.name", default=None)
    find_module = find_module or _find_spec
    # verl's Tracking fails on these only once fit() starts, after minutes of start-up
    loggers = OmegaConf.select(config, "trainer.logger", default=None) or []
    if problems := logger_problems(loggers if isinstance(loggers, str) else list(loggers), find_module):
        raise PreflightError("; ".join(problems))
    if rollout_name in ("vllm", "sglang") and find_module(rollout_name) is None:
        raise PreflightError(
            f"actor_rollout_ref.rollout.name={rollout_name} but {rollout_name} is not installed "
            f"(pip install 'verl[{rollout_name}]==0.9.1' installs the versions verl pins; for vllm that is "
            "pip install -e '.[gpu]')"
        )

    if engine.check_judge:
        why = (judge_check or check_judge_endpoint)(cfg)
        if why:
            raise PreflightError(why + " (pasr_verl.check_judge=false skips this check)")
    return cfg, engine


def _find_spec(name: str):
    import importlib.util

    return importlib.util.find_spec(name)


def _torch_gpu_count() -> int:
    quick = count_local_gpus()
    if quick == 0:
        return 0
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def _cluster_node_gpus(address: str) -> list[float]:
    """GPUs per alive node of the cluster at ``address``: a dashboard URL is asked through the
    state API, a GCS address (``host:6379``, what a Ray job's ``RAY_ADDRESS`` holds) by
    connecting briefly (verl's ``run_ppo`` connects again afterwards)."""
    if address.startswith(("http://", "https://")):
        from recipe.jobs import cluster_node_gpus

        try:
            return cluster_node_gpus(address)
        except Exception as exc:  # CliError from the jobs side: same message here
            raise PreflightError(str(exc)) from None
    import ray

    try:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    except Exception as exc:
        raise PreflightError(f"cannot connect to the Ray cluster at {address}: {str(exc).splitlines()[0]}") from None
    try:
        return [float(n.get("Resources", {}).get("GPU", 0)) for n in ray.nodes() if n.get("Alive")]
    finally:
        ray.shutdown()
