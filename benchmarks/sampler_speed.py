"""Sampled generation: transformers' ``torch.multinomial`` against the inverse-CDF sampler, side by side.

``runtime.sampling`` draws each sampled token with one uniform per row instead of
``multinomial``'s exponential per vocabulary entry (the largest non-matmul cost of a PASR step's
generation on CPU, docs/results/step_floors.md). Two measurements, both in one run:

1. **one decode step's draw**: softmax and ``multinomial`` (what ``generate(do_sample=True)``
   does after the temperature) against the temperature warper and :class:`InverseCdfSampler`,
   on ``rows x vocabulary`` scores, in milliseconds;
2. **one PASR step's sampled generation** (``--queries`` x (4 refine + 2 plain) rollouts, one
   batch, the local engine's ``generate_step``) with each sampler from the same seed: seconds,
   and the mean response length as a check that both draw alike (the tokens differ: the two
   use the random stream differently).

    python3 -m benchmarks.sampler_speed --model runs/x/checkpoints/step_000060   # a warmed-up model

A warmed-up checkpoint is the honest subject: the base model runs every row to the token budget.
"""

from __future__ import annotations

import argparse
import time

from benchmarks.step_subject import add_subject_args, load_subject


def _ms_per_call(fn, repeats: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats * 1e3


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_subject_args(parser)
    parser.add_argument("--temperature", type=float, default=0.9)
    parser.add_argument("--repeats", type=int, default=3, help="timed generations per sampler (best of)")
    args = parser.parse_args(argv)

    import torch

    from recipe.local_engine.rollout import generate_step
    from runtime.hf_generate import SamplingParams
    from runtime.sampling import sampling_processors

    class MultinomialParams(SamplingParams):
        """transformers' own sampling mode: the path before runtime.sampling."""

        def generate_kwargs(self) -> dict:
            return {"do_sample": True, "temperature": self.temperature, "top_p": self.top_p, "top_k": 0}

    subject = load_subject(args)
    model, tok = subject.model, subject.tokenizer
    rows = args.queries * 6
    vocab = model.get_output_embeddings().weight.shape[0]

    # generate hands the processors float32 scores whatever the model's dtype
    scores = torch.randn(rows, vocab) * 3
    ours = sampling_processors(args.temperature)
    theirs_ms = _ms_per_call(lambda: torch.multinomial(torch.softmax(scores / args.temperature, dim=-1), 1), 20)
    ours_ms = _ms_per_call(lambda: ours(None, scores.clone()).argmax(dim=-1), 20)
    print(f"torch threads {torch.get_num_threads()}; one decode step's draw, {rows} rows x {vocab} tokens")
    print(f"{'':<24}{'multinomial':>14}{'inverse CDF':>14}{'speed-up':>10}")
    print(f"{'ms':<24}{theirs_ms:>14.1f}{ours_ms:>14.1f}{theirs_ms / ours_ms:>9.1f}x")

    def generation(params) -> tuple[float, float]:
        best, lengths = float("inf"), []
        for repeat in range(args.repeats):
            torch.manual_seed(repeat)
            start = time.perf_counter()
            gens = generate_step(model, tok, subject.queries, subject.prompts, 4, 2, params, rows, True)
            best = min(best, time.perf_counter() - start)
            lengths += [len(g.response_ids) for g in gens]
        return best, sum(lengths) / len(lengths)

    generation(SamplingParams(8, args.temperature))  # warm the allocator and kernels once
    theirs = generation(MultinomialParams(args.max_new_tokens, args.temperature))
    mine = generation(SamplingParams(args.max_new_tokens, args.temperature))
    print(
        f"\none PASR step's sampled generation: {args.queries} x (4 refine + 2 plain), one batch, "
        f"best of {args.repeats}"
    )
    print(f"{'':<24}{'multinomial':>14}{'inverse CDF':>14}{'speed-up':>10}")
    print(f"{'seconds':<24}{theirs[0]:>14.2f}{mine[0]:>14.2f}{theirs[0] / mine[0]:>9.2f}x")
    print(f"{'mean response tokens':<24}{theirs[1]:>14.1f}{mine[1]:>14.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
