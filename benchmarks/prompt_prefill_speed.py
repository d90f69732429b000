"""Generation with the prompts' shared prefixes prefilled once, side by side with before, in one run.

Every prompt starts with the chat template and its system prompt (25-40 of the CPU presets'
~72 prompt tokens). ``runtime.hf_generate.prompt_cache`` now prefills each distinct prefix of a
batch once instead of once per row (:mod:`runtime.prompt_prefill`); before, it prefilled each
distinct prompt once (repeated prompts) and nothing else was shared. Rows: a greedy evaluation
with both prompts in wide batches (the trainer's evaluations, ``pasr eval --backend hf``), and
one PASR step's sampled generation (8 x (4 + 2), one batch, whose prompts already repeat).
Settings alternate order over ``--rounds`` rounds (a 2-core VM drifts by several percent over
minutes); times are the sums. Greedy and sampled tokens must be identical in both columns.

The update's log-probs do not share prefixes: a micro-batch holds two or three distinct
prompts, and the update ran 5% slower with them (3 alternating rounds, measured while building
this). The warm-up's loss does: ``benchmarks.warmup_speed``.

    python3 -m benchmarks.prompt_prefill_speed --model runs/x/checkpoints/step_000160   # a warmed-up model

A warmed-up checkpoint is the honest subject: the base model does not write the format and runs
every row to ``--max-new-tokens``.
"""

from __future__ import annotations

import argparse
import contextlib
import time

from benchmarks.step_subject import add_subject_args, load_subject

SETTINGS = ("before", "shared prefixes")


@contextlib.contextmanager
def setting(name: str):
    """Switch prefix sharing off for ``before``, and back on after."""
    import runtime.hf_generate as hf

    saved = hf.shared_prefixes
    if name == "before":
        hf.shared_prefixes = lambda rows: [0] * len(rows)
    try:
        yield
    finally:
        hf.shared_prefixes = saved


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_subject_args(parser)
    parser.add_argument(
        "--problems", type=int, default=128, help="held-out problems in the evaluation (each with both prompts)"
    )
    parser.add_argument("--eval-batch", type=int, default=256, help="evaluation batch (rollout.eval_batch_size)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of both settings, in alternating order")
    args = parser.parse_args(argv)

    import torch

    from data.synthetic import generate_problems
    from recipe.local_engine.rollout import generate_step
    from runtime.gqa_attention import use_attention
    from runtime.hf_generate import SamplingParams

    subject = load_subject(args)
    model, tok, prompts, queries = subject.model, subject.tokenizer, subject.prompts, subject.queries
    use_attention(model, "grouped")  # the local engine's default
    heldout = [p.as_example() for p in generate_problems(args.problems, seed=11, difficulty=1, split="test")]
    greedy = SamplingParams(args.max_new_tokens, do_sample=False)
    sampled = SamplingParams(args.max_new_tokens, 0.9, 1.0, True)
    parts = {
        f"greedy eval ({2 * len(heldout)} rows)": (heldout, 1, 1, greedy, args.eval_batch),
        "step generation (48 rows)": (queries, 4, 2, sampled, 64),
    }

    def generation(examples, n_refine, n_plain, params, batch_size):
        torch.manual_seed(0)
        t0 = time.perf_counter()
        gens = generate_step(model, tok, examples, prompts, n_refine, n_plain, params, batch_size, True)
        return [g.response_ids for g in gens], time.perf_counter() - t0

    generation(queries[:2], 1, 1, greedy, 4)  # warm the allocator and kernels once
    seconds = {name: dict.fromkeys(parts, 0.0) for name in SETTINGS}
    tokens: dict[str, dict[str, list]] = {name: {} for name in SETTINGS}
    for r in range(args.rounds):
        for name in SETTINGS if r % 2 == 0 else SETTINGS[::-1]:
            with setting(name):
                for part, spec in parts.items():
                    tokens[name][part], t = generation(*spec)
                    seconds[name][part] += t

    print(
        f"\n{len(heldout)} held-out problems x 2 prompts (batch {args.eval_batch}); one step: {len(queries)} queries x "
        f"(4 refine + 2 plain); {args.rounds} rounds; torch threads {torch.get_num_threads()}"
    )
    print(f"{'seconds':<30}" + "".join(f"{name:>18}" for name in SETTINGS) + f"{'speed-up':>10}")
    for part in parts:
        cells = [seconds[name][part] for name in SETTINGS]
        print(f"{part:<30}" + "".join(f"{c:>18.2f}" for c in cells) + f"{cells[0] / cells[-1]:>9.2f}x")
    same = all(tokens[name] == tokens[SETTINGS[0]] for name in SETTINGS)
    print(f"greedy and sampled tokens identical in both: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
