"""``pasr train``: PASR on this machine (the embedded default: SmolLM2-135M on CPU)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EPILOG = """examples:
  pasr train --preset demo                      # the README demo: warm-up + PASR on SmolLM2, CPU
  pasr train --preset demo trainer.steps=10 rollout.max_new_tokens=64
  pasr train --config my.yaml model.path=/models/qwen2.5-0.5b data.source=gsm8k
  pasr train --resume runs/pasr-demo            # continue from the last checkpoint

Config keys (see recipe/config/local_default.yaml): model.*, data.*, rollout.*, algo.*,
warmup.*, trainer.*, and pasr.* (n_refine, n_plain, tie_value, zeta, weights.*, judge.*,
prompts.*), shared with the verl engine."""


def build_parser(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("--preset", default=None, help="a preset from recipe/config/local_<name>.yaml (default: 'default'; 'demo' for the README run)")
    parser.add_argument("--config", default=None, help="a YAML file merged over the preset")
    parser.add_argument("--run-dir", default=None, help="run directory (default: trainer.run_dir)")
    parser.add_argument("--resume", default=None, metavar="RUN_DIR", help="resume the run in RUN_DIR from its last checkpoint (its config.yaml is used)")
    parser.add_argument("overrides", nargs="*", help="key=value config overrides, e.g. trainer.steps=20")


def run(args) -> int:
    from recipe.cli import CliError
    from recipe.local_engine.config import load_config
    from recipe.local_engine.trainer import LocalPasrTrainer, StopRequested, prepare_run_dir, summarize
    from recipe.pasr_config import ConfigError

    try:
        if args.resume:
            run_dir = Path(args.resume)
            if not (run_dir / "config.yaml").is_file():
                raise CliError(f"cannot resume: {run_dir} has no config.yaml (not a pasr train run directory)")
            cfg = load_config(config_file=str(run_dir / "config.yaml"), overrides=args.overrides)
        else:
            cfg = load_config(preset=args.preset or "default", config_file=args.config, overrides=args.overrides)
            run_dir = Path(args.run_dir or cfg.trainer.run_dir)
            prepare_run_dir(run_dir, resume=False)
    except (ConfigError, FileExistsError, FileNotFoundError) as exc:
        raise CliError(str(exc)) from None

    from recipe.model_loading import ModelNotFoundError

    trainer = LocalPasrTrainer(cfg, run_dir, resume=bool(args.resume))
    try:
        trainer.setup()
    except ModelNotFoundError as exc:
        raise CliError(str(exc)) from None
    try:
        evals = trainer.fit()
    except StopRequested:
        print(f"stopped at step {trainer.step}; checkpoint saved. Resume with: pasr train --resume {run_dir}", file=sys.stderr)
        return 130
    print(f"\nrun directory: {run_dir}")
    print(f"metrics:       {run_dir / 'metrics.jsonl'}")
    print(f"rollouts:      {run_dir / 'rollouts'}  (inspect with: pasr stats {run_dir} --out {run_dir / 'report'})")
    print(f"checkpoints:   {run_dir / 'checkpoints'}")
    if evals:
        print("\nheld-out evaluation (greedy, refine prompt):\n" + summarize(evals))
    return 0
