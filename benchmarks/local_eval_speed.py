"""Local engine generation: grouped-query attention and wide evaluation batches, side by side.

1. **Attention without KV copies** (``model.attention=grouped``, :mod:`runtime.gqa_attention`):
   with a padding mask, transformers' SDPA path expands the cached keys and values from the 3
   KV heads to all 9 query heads in every layer at every decode step; the grouped path does not.
2. **Wide evaluation batches** (``rollout.eval_batch_size``, 256): a decode step of
   SmolLM2-135M costs nearly as much for 16 rows as for 64 on CPU (the 540 MB of fp32 weights
   are read once a step), so fewer batches take fewer steps; measured, this adds little
   (docs/local_engine.md, "Cheaper steps on CPU").

Columns for a greedy evaluation, ``sdpa, batch 64`` (before), ``grouped, batch 64``,
``grouped, batch 256``, with the refine prompt only (as ``learning_signal`` evaluates its RL
rows) and with both prompts (as the trainer's evaluations do by default); then one PASR step's
sampled generation (8 x (4 + 2), one batch) with sdpa and grouped attention from the same seed. The greedy tokens must
be identical in every column, the sampled ones in both.

    python3 -m benchmarks.local_eval_speed --model runs/x/checkpoints/step_000160   # a warmed-up model

A warmed-up checkpoint is the honest subject: the base model runs every row to the token
budget, so no row stops early.
"""

from __future__ import annotations

import argparse
import time

from benchmarks.step_subject import add_subject_args, load_subject

EVAL_SETTINGS = (("sdpa", 64), ("grouped", 64), ("grouped", 256))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_subject_args(parser)
    parser.add_argument("--problems", type=int, default=128, help="held-out problems (each with both prompts)")
    args = parser.parse_args(argv)

    import torch

    from data.synthetic import generate_problems
    from recipe.local_engine.rollout import generate_step
    from runtime.gqa_attention import use_attention
    from runtime.hf_generate import SamplingParams

    subject = load_subject(args)
    model, tok, prompts, queries = subject.model, subject.tokenizer, subject.prompts, subject.queries
    heldout = [p.as_example() for p in generate_problems(args.problems, seed=11, difficulty=1, split="test")]

    def run(examples, n_refine, n_plain, params, batch_size):
        torch.manual_seed(0)
        t0 = time.perf_counter()
        gens = generate_step(model, tok, examples, prompts, n_refine, n_plain, params, batch_size, True)
        return [g.response_ids for g in gens], time.perf_counter() - t0

    greedy = SamplingParams(args.max_new_tokens, do_sample=False)
    sampled = SamplingParams(args.max_new_tokens, 0.9, 1.0, True)
    run(queries[:2], 1, 1, greedy, 4)  # warm the allocator and kernels once
    evals: dict[str, dict] = {}
    for label, n_plain in (("refine prompt only", 0), ("refine + plain prompt", 1)):
        evals[label] = {}
        for attention, batch in EVAL_SETTINGS:
            use_attention(model, attention)
            evals[label][(attention, batch)] = run(heldout, 1, n_plain, greedy, batch)
    steps = {}
    for attention in ("sdpa", "grouped"):
        use_attention(model, attention)
        steps[attention] = run(queries, 4, 2, sampled, 64)

    print(f"\ngreedy evaluation of {args.problems} problems, seconds; torch threads {torch.get_num_threads()}")
    print(f"{'':<24}" + "".join(f"{f'{a}, batch {b}':>20}" for a, b in EVAL_SETTINGS) + f"{'speed-up':>10}")
    same_eval = True
    for label, cells in evals.items():
        base = cells[EVAL_SETTINGS[0]]
        print(
            f"{label:<24}"
            + "".join(f"{cells[s][1]:>20.1f}" for s in EVAL_SETTINGS)
            + f"{base[1] / cells[EVAL_SETTINGS[-1]][1]:>9.2f}x"
        )
        same_eval &= all(cells[s][0] == base[0] for s in EVAL_SETTINGS)
    print(f"\none PASR step's sampled generation: {args.queries} x (4 refine + 2 plain), one batch")
    print(f"{'':<24}{'sdpa':>20}{'grouped':>20}{'speed-up':>10}")
    print(
        f"{'seconds':<24}{steps['sdpa'][1]:>20.1f}{steps['grouped'][1]:>20.1f}"
        f"{steps['sdpa'][1] / steps['grouped'][1]:>9.2f}x"
    )
    same_step = steps["sdpa"][0] == steps["grouped"][0]
    print(f"\ngreedy tokens identical in every column: {same_eval}; sampled tokens identical: {same_step}")
    return 0 if same_eval else 1


if __name__ == "__main__":
    raise SystemExit(main())
