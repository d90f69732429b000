"""``pasr train``: PASR (or RRR, ``method=rrr``) on this machine (the embedded default: SmolLM2-135M on CPU)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EPILOG = """examples:
  pasr train --preset demo                      # make demo: warm-up + PASR on SmolLM2, CPU
  pasr train --preset rrr                       # Reflect, Retry, Reward on Countdown, CPU
  pasr train --preset demo trainer.steps=10 rollout.max_new_tokens=64
  pasr train --config my.yaml model.path=/models/qwen2.5-0.5b data.source=gsm8k
  pasr train --resume runs/pasr-demo            # continue from the last checkpoint
  pasr train --resume runs/pasr-demo trainer.steps=120   # extend a run (settings that change
                                                         # what is trained need --force)

Config keys (each documented in recipe/local_engine/config.py): model.*, data.*, rollout.*, algo.*,
warmup.*, trainer.*, and pasr.* (n_refine, n_plain, tie_value, zeta, weights.*, judge.*,
prompts.*; recipe/pasr_config.py: the paper's defaults, which the cpu preset under every preset
changes for the CPU), shared with the verl engine; method (pasr | rrr) and rrr.* (recipe/rrr_config.py)."""


def preset_list() -> str:
    """Every preset in recipe/config/ with its file's first comment line and the presets it
    extends (``extends:``), for ``--help``: the list is read from the files, so a new preset is
    listed without touching this module."""
    from recipe.local_engine.config import CONFIG_DIR, DEFAULT_PRESET, preset_chain

    paths = sorted(CONFIG_DIR.glob("local_*.yaml"))
    width = max(len(p.stem.removeprefix("local_")) for p in paths)  # descriptions in one column
    lines = [f"presets (--preset NAME; without one: {DEFAULT_PRESET}):"]
    for path in paths:
        name = path.stem.removeprefix("local_")
        first = next((ln.lstrip("# ").strip() for ln in path.read_text().splitlines() if ln.startswith("#")), "")
        over = [n for n, _ in preset_chain(name)[1:]]
        lines.append(f"  {name:<{width}}  {first}" + (f" [extends {' -> '.join(over)}]" if over else ""))
    return "\n".join(lines)


def build_parser(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = preset_list() + "\n\n" + EPILOG
    parser.add_argument(
        "--preset",
        default=None,
        help="a preset from recipe/config/local_<name>.yaml (default: 'default', or the one --config's extends: "
        "names; the list below)",
    )
    parser.add_argument(
        "--config", default=None, help="a YAML file merged over the preset (a top-level extends: NAME picks the preset)"
    )
    parser.add_argument("--run-dir", default=None, help="run directory (default: trainer.run_dir)")
    parser.add_argument(
        "--resume",
        default=None,
        metavar="RUN_DIR",
        help="resume the run in RUN_DIR from its last checkpoint (its config.yaml and its directory: not with "
        "--preset, --config or --run-dir); a finished run is left as it is, or extended by more trainer.steps",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="with --resume: accept overrides that change what the run trains (see RESUMABLE_KEYS)",
    )
    parser.add_argument("overrides", nargs="*", help="key=value config overrides, e.g. trainer.steps=20")


# Settings a resume may change: how long the run goes on (more steps extend a finished run;
# fewer than it has done are refused), how often it saves, where it logs and how fast it
# computes. Anything else changes what the remaining steps train (the data position, the group
# size, the phase boundary that the KL reference and the pinned checkpoint hang on), so the run
# would no longer be one run; --force accepts it anyway.
RESUMABLE_KEYS = (
    "trainer.steps",
    "trainer.save_every",
    "trainer.keep_last",
    "trainer.keep_final_optimizer",
    "algo.ref_in_memory",
    "trainer.logger",
    "trainer.project_name",
    "trainer.experiment_name",
    "trainer.dump_rollouts",
    "trainer.eval_at_end",
    "trainer.eval_sampled_k",  # evaluation only: drawn from a forked RNG, no training step changes
    "trainer.eval_temperature",
    "pasr.max_judge_error_rate",
    "model.threads",
    "model.attention",
    "model.device",
    "rollout.gen_batch_size",
    "rollout.eval_batch_size",
    "algo.micro_batch_size",  # the same loss, a few rows at a time
    "warmup.micro_batch_size",
    # where the judge is served (its model and prompt are what judges); given again with its credentials
    "pasr.judge.base_url",
)


def changed_settings(saved, now) -> dict[str, tuple]:
    """``{key: (saved value, new value)}`` for every leaf key that differs."""
    from omegaconf import OmegaConf

    def flat(cfg) -> dict:
        out: dict = {}

        def walk(node, prefix):
            for key, value in node.items():
                if isinstance(value, dict):
                    walk(value, f"{prefix}{key}.")
                else:
                    out[f"{prefix}{key}"] = value

        walk(OmegaConf.to_container(OmegaConf.structured(cfg)), "")
        return out

    a, b = flat(saved), flat(now)
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def warmup_change_refused(saved: int, new: int, done: int, method: str) -> str | None:
    """Why a run at global step ``done`` whose warm-up was ``saved`` steps cannot go on with
    ``warmup.steps=new`` (None: it can). The steps done keep the phase they were trained in, and
    config.yaml must say so: a finished 2 + 3 run resumed with ``warmup.steps=5 trainer.steps=6``
    used to record 5 warm-up steps and train 9 RL steps after its 2. So only a run still inside
    its warm-up may change it, to more steps than it has done."""
    if done == 0 or new == saved:
        return None
    if done >= saved:
        rl = f" and {done - saved} {method} steps" if done > saved else ""
        return f"it is at step {done}, after its {saved} warm-up steps{rl}, and the steps done cannot change phase"
    if new <= done:
        return (
            f"it has done {done} of its {saved} warm-up steps already (a warm-up can end after step {done}, not before)"
        )
    return None


def _resume_config(run_dir: Path, overrides: list[str], force: bool):
    """The run's own config with the overrides, refusing ones that change what it trains, that
    it would ignore (``trainer.run_dir``: the run stays where it is) or that would end it before
    the step it has reached (``config.yaml`` would say so while the checkpoints are past it).
    More ``trainer.steps`` than it had extend it, a finished run included."""
    from data.cli_errors import CliError
    from recipe.local_engine import checkpoint as ckpt
    from recipe.local_engine.config import load_config
    from recipe.pasr_config import ConfigError
    from rewards.judges.redact import has_redacted_credentials
    from runtime.model_loading import ModelNotFoundError

    config_file = run_dir / "config.yaml"
    try:  # not validated: the overrides below may fix a value this machine cannot use (model.threads)
        saved = load_config(config_file=str(config_file), saved_run=True, validate=False)
    except ConfigError as exc:
        raise CliError(f"cannot resume {run_dir}: {exc}") from None
    try:
        cfg = load_config(config_file=str(config_file), overrides=overrides, saved_run=True)
    except ConfigError as exc:  # it names the override
        raise CliError(str(exc)) from None
    changed = changed_settings(saved, cfg)
    if "trainer.run_dir" in changed:
        raise CliError(f"trainer.run_dir cannot be used with --resume: the run stays in {run_dir}")
    try:
        latest = ckpt.latest_checkpoint(run_dir / "checkpoints")
    except ModelNotFoundError as exc:  # a latest pointer that names no folder: one line naming it
        raise CliError(f"cannot resume {run_dir}: {exc}") from None
    done = int(ckpt.trainer_state(latest)["step"]) if latest else 0
    refused = {k: v for k, v in changed.items() if k not in RESUMABLE_KEYS}
    if refused:
        diffs = "; ".join(f"{k}: {a!r} in the run, {b!r} now" for k, (a, b) in refused.items())
        if not force:
            raise CliError(
                f"cannot resume {run_dir} with other settings ({diffs}): the remaining steps would train "
                f"something other than the steps done; drop these overrides, start a new --run-dir, or add "
                f"--force to resume anyway"
            )
        if "warmup.steps" in refused and (
            why := warmup_change_refused(saved.warmup.steps, cfg.warmup.steps, done, cfg.method)
        ):
            raise CliError(
                f"cannot resume {run_dir} with warmup.steps={cfg.warmup.steps}, even with --force: {why}; "
                f"start a new --run-dir"
            )
        print(f"pasr train: warning: --force: resuming {run_dir} with other settings ({diffs})", file=sys.stderr)
    if cfg.pasr.judge.kind in ("openai", "hybrid") and has_redacted_credentials(cfg.pasr.judge.base_url):
        raise CliError(
            f"cannot resume {run_dir}: its config.yaml keeps the judge URL without its credentials "
            f"({cfg.pasr.judge.base_url}); give it again: pasr train --resume {run_dir} pasr.judge.base_url=URL"
        )
    warmup = cfg.warmup.steps
    if warmup + cfg.trainer.steps < done:
        raise CliError(
            f"cannot resume {run_dir} with trainer.steps={cfg.trainer.steps}: it is at step {done} ({warmup} warm-up + "
            f"{done - warmup}); a run can be extended, not shortened (its checkpoints: {run_dir / 'checkpoints'})"
        )
    if cfg.trainer.steps > saved.trainer.steps:
        print(
            f"extending {run_dir} from {saved.trainer.steps} to {cfg.trainer.steps} steps "
            f"({warmup} warm-up steps before them)",
            file=sys.stderr,
        )
    return cfg


def run(args) -> int:
    from data.cli_errors import CliError
    from recipe.local_engine.config import load_config
    from recipe.local_engine.run_io import prepare_run_dir
    from recipe.pasr_config import ConfigError

    if args.force and not args.resume:
        raise CliError("--force only applies to --resume")
    ignored = [
        f"--{name.replace('_', '-')}" for name in ("preset", "config", "run_dir") if args.resume and getattr(args, name)
    ]
    if ignored:
        raise CliError(
            f"{' and '.join(ignored)} cannot be used with --resume: a resumed run keeps its config.yaml and its "
            "directory; change what may change with key=value overrides (trainer.steps=N extends it), or start a "
            "new run without --resume"
        )
    try:
        if args.resume:
            run_dir = Path(args.resume)
        else:
            cfg = load_config(preset=args.preset, config_file=args.config, overrides=args.overrides)
            run_dir = Path(args.run_dir or cfg.trainer.run_dir)
            check_start(cfg)  # before the run folder exists: a refused start leaves nothing behind
        prepare_run_dir(run_dir, resume=bool(args.resume))
    except (ConfigError, OSError) as exc:  # FileExistsError, NotADirectoryError: messages of their own
        raise CliError(str(exc)) from None
    lock = _hold_run_dir(run_dir, resume=bool(args.resume))
    try:
        if args.resume:
            cfg = _resume_config(run_dir, args.overrides, args.force)
            check_start(cfg)
        return _train(cfg, run_dir, resume=bool(args.resume))
    finally:
        lock.release()


def check_start(cfg) -> None:
    """What a run needs from this machine beyond its config, all of it checked at once before
    any training (:class:`CliError` in one line): the model (resolved, the embedded one converted
    into the cache folder, which must be writable), an LLM judge that scores a test item
    (:func:`rewards.judges.ping_judge`: one request; the verl engine's preflight asks the same),
    and a login for a tracker of ``trainer.logger`` that needs one
    (:func:`recipe.metrics_file.tracker_login_problems`: wandb).
    Without it a judge that is not there was found at the first RL step, after the warm-up."""
    from data.cli_errors import CliError
    from recipe.metrics_file import tracker_login_problems
    from rewards.judges import ping_judge
    from runtime.model_loading import ModelLoadError, resolve_model_path

    problems = tracker_login_problems(cfg.trainer.logger)  # wandb's login: before the run folder and model
    try:
        resolve_model_path(cfg.model.path)
    except ModelLoadError as exc:
        problems.append(f"model.path={cfg.model.path}: {exc}")
    if why := ping_judge(cfg.pasr.judge, cfg.pasr.prompts.judge):
        problems.append(f"pasr.judge.kind={cfg.pasr.judge.kind}: {why}")
    if problems:
        raise CliError("; ".join(problems))


def _hold_run_dir(run_dir: Path, resume: bool):
    """Hold ``run_dir`` for this process (:mod:`recipe.run_lock`) before anything is written in
    it: a second ``pasr train`` into it, or ``--resume`` of a run still going, would write every
    step twice and remove the other's half-written checkpoint. A new run's directory is checked
    again once held, since a run started after the first look may have written there."""
    from data.cli_errors import CliError
    from recipe.local_engine.run_io import prepare_run_dir
    from recipe.run_lock import DirectoryInUse, RunLock

    lock = RunLock(run_dir, "pasr train")
    try:
        lock.acquire()
    except DirectoryInUse as exc:
        raise CliError(f"{exc}; wait for it to finish" + ("" if resume else " or use another --run-dir")) from None
    except OSError as exc:
        raise CliError(f"cannot lock {run_dir}: {exc.strerror or exc}") from None
    if not resume:
        try:
            prepare_run_dir(run_dir, resume=False)
        except FileExistsError as exc:
            lock.release()
            raise CliError(str(exc)) from None
    return lock


def _train(cfg, run_dir: Path, resume: bool) -> int:
    """The run proper, while this process holds ``run_dir``."""
    from data.cli_errors import CliError
    from data.examples import DatasetError
    from recipe.judge_errors import JudgeErrorRateExceeded
    from recipe.local_engine.kl_reference import ReferenceUnavailable
    from recipe.local_engine.policy_update import NonFiniteLoss
    from recipe.local_engine.run_io import summarize
    from recipe.local_engine.trainer import LocalPasrTrainer, StopRequested
    from runtime.model_loading import ModelLoadError

    # first thing: a run killed during set-up or its first minutes has still said where it writes
    print(f"pasr train: {'resuming' if resume else 'writing'} {run_dir.resolve()}", file=sys.stderr, flush=True)
    trainer = LocalPasrTrainer(cfg, run_dir, resume=resume)
    try:
        trainer.setup()
    except (ModelLoadError, DatasetError) as exc:  # DataFormatError included: "file:line: problem"
        raise CliError(str(exc)) from None
    try:
        evals = trainer.fit()
    # each message says what failed, where and how to resume
    except (JudgeErrorRateExceeded, NonFiniteLoss, ReferenceUnavailable) as exc:
        raise CliError(str(exc)) from None
    except StopRequested:
        print(
            f"stopped at step {trainer.step}; checkpoint saved. Resume with: pasr train --resume {run_dir}",
            file=sys.stderr,
        )
        return 130
    print(f"\nrun directory: {run_dir}")
    print(f"metrics:       {run_dir / 'metrics.jsonl'}")
    print(f"rollouts:      {run_dir / 'rollouts'}  (inspect with: pasr stats {run_dir} --out {run_dir / 'report'})")
    print(f"checkpoints:   {run_dir / 'checkpoints'}")
    if evals:
        how = "first attempt, then one reflection and retry" if cfg.method == "rrr" else "refine prompt"
        print(f"\nheld-out evaluation (greedy, {how}):\n" + summarize(evals))
    return 0
