"""One prompt pass per distinct prompt, against one per row: the cost of a PASR step's two parts.

A PASR step samples each query's refine prompt ``n_refine`` times and its plain prompt
``n_plain`` times, and trains the ``n_refine`` refine responses on their one prompt. Both the
generation (``recipe.hf_generate.shared_prompt_cache``) and the update's log-probs
(``recipe.local_engine.logprobs._shared_prompt_hidden``) run each distinct prompt once. This
times both on the same batch with the sharing on and off, in one run, and checks that the
generated tokens are identical and the log-probs equal (to fp32 rounding).

    python3 -m benchmarks.shared_prompt                      # the embedded model, the default step shape
    python3 -m benchmarks.shared_prompt --model runs/x/checkpoints/step_000160 --queries 8 --n-plain 2
"""

from __future__ import annotations

import argparse
import contextlib
import time


@contextlib.contextmanager
def unshared():
    """Both prompt-sharing paths switched off (a prompt pass per row, as before them)."""
    import recipe.hf_generate as hf
    import recipe.local_engine.logprobs as lp

    saved = hf.shared_prompt_cache, lp._shared_prompt_hidden
    hf.shared_prompt_cache = lambda *a: None
    lp._shared_prompt_hidden = lambda *a: None
    try:
        yield
    finally:
        hf.shared_prompt_cache, lp._shared_prompt_hidden = saved


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2", help="model path or name (default: the embedded SmolLM2)")
    parser.add_argument("--queries", type=int, default=4, help="queries in the step (rollout.queries_per_step)")
    parser.add_argument("--n-refine", type=int, default=4)
    parser.add_argument("--n-plain", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--micro-batch", type=int, default=8, help="update micro-batch (algo.micro_batch_size)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: the engine's measured choice)")
    args = parser.parse_args(argv)

    import torch

    from data.synthetic import generate_problems
    from prompts import PromptSet
    from recipe.cpu_dtype import choose_threads
    from recipe.hf_generate import SamplingParams
    from recipe.local_engine.logprobs import pack, response_logprobs
    from recipe.local_engine.rollout import generate_step
    from recipe.model_loading import load_model_and_tokenizer, resolve_model_path

    torch.set_num_threads(args.threads or choose_threads(torch.get_num_threads()))
    model, tok, _ = load_model_and_tokenizer(str(resolve_model_path(args.model)), dtype="float32")
    model.eval()
    prompts = PromptSet.load(refine="refine_system_short", plain="plain_system_short")
    queries = [p.as_example() for p in generate_problems(args.queries, seed=5, difficulty=1, split="train")]
    params = SamplingParams(args.max_new_tokens, 0.9, 1.0, True)

    def generation():
        torch.manual_seed(0)
        t0 = time.perf_counter()
        gens = generate_step(model, tok, queries, prompts, args.n_refine, args.n_plain, params, 64, True)
        return gens, time.perf_counter() - t0

    def update(rows):
        """log-probs forward + backward over the refine rows, micro-batched as the update does."""
        model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        out = []
        for i in range(0, len(rows), args.micro_batch):
            mb = rows[i : i + args.micro_batch]
            lp = response_logprobs(model, pack([g.prompt_ids for g in mb], [g.response_ids for g in mb], tok.pad_token_id), 0.9)
            lp.sum().backward()
            out.append(lp.detach().sum(-1))
        return torch.cat(out), time.perf_counter() - t0

    generation()  # warm the allocator and kernels once
    gens_s, gen_s = generation()
    with unshared():
        gens_u, gen_u = generation()
    same_tokens = [g.response_ids for g in gens_s] == [g.response_ids for g in gens_u]
    rows = [g for g in gens_s if g.rollout.variant == "refine"]
    lp_s, upd_s = update(rows)
    with unshared():
        lp_u, upd_u = update(rows)
    max_diff = float((lp_s - lp_u).abs().max())

    n_tokens = sum(len(g.response_ids) for g in gens_s)
    print(f"\none PASR step: {args.queries} queries x ({args.n_refine} refine + {args.n_plain} plain), "
          f"{n_tokens} sampled tokens, {len(rows)} refine rows trained; torch threads {torch.get_num_threads()}")
    print(f"{'part':<34}{'per row':>10}{'per prompt':>12}{'speed-up':>10}")
    print(f"{'generation (s)':<34}{gen_u:>10.2f}{gen_s:>12.2f}{gen_u / gen_s:>9.2f}x")
    print(f"{'update log-probs fwd+bwd (s)':<34}{upd_u:>10.2f}{upd_s:>12.2f}{upd_u / upd_s:>9.2f}x")
    print(f"{'both (s)':<34}{gen_u + upd_u:>10.2f}{gen_s + upd_s:>12.2f}{(gen_u + upd_u) / (gen_s + upd_s):>9.2f}x")
    print(f"generated tokens identical: {same_tokens}; sequence log-probs differ by at most {max_diff:.2e}")
    return 0 if same_tokens else 1


if __name__ == "__main__":
    raise SystemExit(main())
