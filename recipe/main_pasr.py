"""PASR (or, with ``method=rrr``, Reflect, Retry, Reward) training on verl:
``python3 -m recipe.main_pasr [HYDRA OVERRIDES]``.

The config is ``recipe/config/pasr_trainer.yaml`` (verl's ``ppo_trainer`` plus ``method``,
``pasr.*``, ``rrr.*`` and ``pasr_verl.*``). Before anything heavy starts, the run is checked
(``recipe.verl_engine.config.preflight``): ``method``, the ``pasr`` and ``rrr`` sections,
``rollout.n`` equal to the method's group size (``pasr.n_refine``, or ``rrr.n_reflections`` with
``method=rrr``, from which the yaml derives it), for RRR a binary judge and a prompt length that
holds an attempt and a reflection, the legacy trainer path, no ReMax, vLLM installed, the GPUs
``trainer.nnodes x trainer.n_gpus_per_node`` present (locally, or on the Ray cluster at
``RAY_ADDRESS`` / ``ray_kwargs.ray_init.address``), absolute run directories inside a Ray job,
and an LLM judge's endpoint. A retired key or value on the command line is refused before
Hydra reads it (:mod:`recipe.retired_keys`). A failed check prints one line and exits with status 2. On a
machine without any GPU the check runs before Hydra, torch or verl are imported, so it answers
at once.

Then verl's own ``run_ppo`` starts (or joins) Ray and runs verl's ``TaskRunner`` setup with
:class:`recipe.verl_engine.trainer.PasrRayTrainer` as the trainer, for both methods: ``method``
only picks the rollout it wraps around verl's agent loop
(:func:`recipe.verl_engine.rollout.build_rollout_manager`).
"""

from __future__ import annotations

import os
import sys

EXIT_PREFLIGHT = 2
_SKIP_ENV = "PASR_SKIP_GPU_CHECK"


def _fail(message: str) -> None:
    print(f"pasr verl: error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_PREFLIGHT)


def _override_values(argv: list[str]) -> dict | None:
    """``{key: value}`` of the Hydra overrides on the command line, read with Hydra's own override
    grammar (no config, torch or verl needed), or None when anything else is there (``--help``,
    ``--cfg job``, ``-m``, a malformed override): Hydra then decides."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    if any(arg.startswith("-") for arg in argv):
        return None
    try:
        overrides = OverridesParser.create().parse_overrides(list(argv))
    except HydraException:
        return None
    return {o.key_or_group: (None if o.is_delete() else o.value()) for o in overrides}


def early_gpu_check(argv: list[str], environ=None) -> str | None:
    """The no-GPU answer, from the command line and /dev only (no config composed, no torch or
    verl imported), or None when the full preflight after composing the config must decide."""
    from recipe.verl_engine.config import NO_GPU_HINT, count_local_gpus

    environ = os.environ if environ is None else environ
    if environ.get(_SKIP_ENV) == "1" or environ.get("RAY_ADDRESS"):
        return None
    values = _override_values(argv)
    if values is None or values.get("ray_kwargs.ray_init.address"):
        return None
    if str(values.get("pasr_verl.check_resources", "")).lower() in ("false", "0", "no", "off"):
        return None
    if count_local_gpus(environ) == 0:
        return f"no GPU on this machine: {NO_GPU_HINT} ({_SKIP_ENV}=1 skips this check)"
    return None


def run(config) -> None:
    """Preflight, then verl's run_ppo with the PASR task runner."""
    from recipe.verl_engine.config import PreflightError, plain_sections, preflight

    try:
        preflight(config)
    except PreflightError as exc:
        _fail(str(exc))
    plain_sections(config)

    from verl.trainer.main_ppo import run_ppo
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    auto_set_device(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))

    from recipe.verl_engine.trainer import PasrTaskRunnerActor

    run_ppo(config, task_runner_class=PasrTaskRunnerActor)


def main() -> None:
    from recipe.retired_keys import retired_overrides

    retired = retired_overrides(sys.argv[1:])  # before Hydra, which would call a retired key unknown
    if retired:
        _fail("; ".join(retired))
    message = early_gpu_check(sys.argv[1:])
    if message:
        _fail(message)

    import hydra

    from recipe.verl_engine.config import register_schema

    register_schema()

    @hydra.main(config_path="config", config_name="pasr_trainer", version_base=None)
    def _hydra_main(config) -> None:
        run(config)

    _hydra_main()


if __name__ == "__main__":
    main()
