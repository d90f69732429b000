"""What the local step benchmarks time: a model on this CPU's threads, the CPU presets' prompts
and one step's queries, set up the same way by ``step_savings`` and ``local_eval_speed`` so
their figures describe the same step."""

from __future__ import annotations

import argparse
from dataclasses import dataclass


def add_subject_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="smollm2", help="model path or name (default: the embedded SmolLM2)")
    parser.add_argument("--queries", type=int, default=8, help="queries in the step (rollout.queries_per_step)")
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: the engine's measured choice)")


@dataclass
class Subject:
    model: object
    tokenizer: object
    prompts: object  # prompts.PromptSet
    queries: list  # data.examples.Example


def load_subject(args: argparse.Namespace) -> Subject:
    """The fp32 model in eval mode on the engine's thread choice, the CPU presets' short prompts
    and ``args.queries`` training problems (fixed seed)."""

    from data.synthetic import generate_problems
    from prompts import PromptSet
    from runtime.cpu_dtype import set_threads
    from runtime.model_loading import load_model_and_tokenizer, resolve_model_path

    set_threads(args.threads)
    model, tok, _ = load_model_and_tokenizer(str(resolve_model_path(args.model)), dtype="float32")
    model.eval()
    prompts = PromptSet.load(refine="refine_system_short", plain="plain_system_short")
    queries = [p.as_example() for p in generate_problems(args.queries, seed=5, difficulty=1, split="train")]
    return Subject(model, tok, prompts, queries)
