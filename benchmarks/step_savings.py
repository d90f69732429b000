"""What a local PASR step saves by not computing what it does not need, side by side in one run.

1. **One prompt pass per distinct prompt.** A step samples each query's refine prompt
   ``n_refine`` times and its plain prompt ``n_plain`` times and trains the refine responses on
   their one prompt: generation prefills each distinct prompt once
   (``runtime.hf_generate.prompt_cache``) and the update's log-probs run it once
   (``recipe.local_engine.logprobs._shared_prompt_hidden``); both also run the prefix the
   prompts share once (``benchmarks.prompt_prefill_speed`` times that part alone).
2. **Finished rows leave the batch** (``runtime.hf_generate._generate_dropping_finished``): plain
   answers stop after about 20 tokens, refining ones after 60-90.
3. **One prompt pass for the whole update, micro-batches by response length**
   (``recipe.local_engine.logprobs.PromptPass``): the update's micro-batches, cut by query, each
   ran their prompts and padded their rows to the longest response among them; cut by response
   length instead, rows of one micro-batch end near each other, and the batch's prompts run
   once (update only; the other columns' micro-batches already stop at their own longest
   response, not the batch's, as the update did before this).

Columns: neither (a prompt pass per row, one ``generate`` call until the longest row stops, as
before them), 1, 1 + 2, 1 + 2 + 3. Greedy generation must give identical tokens in all of them;
the update's log-probs equal to fp32 rounding. Sampled steps are timed too (same seed: the tokens differ once
rows leave the batch, their distribution does not).

    python3 -m benchmarks.step_savings --model runs/x/checkpoints/step_000160   # a warmed-up model
    python3 -m benchmarks.step_savings                       # the embedded base model

A warmed-up checkpoint is the honest subject: the base model does not write the format and runs
every row to ``--max-new-tokens``, so no row stops early and dropping them saves nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import time

from benchmarks.step_subject import add_subject_args, load_subject

SETTINGS = ("neither", "shared prompts", "+ rows dropped", "+ length micro-batches")


@contextlib.contextmanager
def setting(name: str):
    """Switch the savings off as ``name`` says (``neither``: both off), and back on after."""
    import recipe.local_engine.logprobs as lp
    import runtime.hf_generate as hf

    saved = hf.prompt_cache, lp._shared_prompt_hidden, hf.DROP_EVERY
    if name == "neither":
        hf.prompt_cache = lambda *a, **k: None
        lp._shared_prompt_hidden = lambda *a: None
    if name in ("neither", "shared prompts"):
        hf.DROP_EVERY = 10**6  # one generate call
    try:
        yield
    finally:
        hf.prompt_cache, lp._shared_prompt_hidden, hf.DROP_EVERY = saved


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_subject_args(parser)
    parser.add_argument("--n-refine", type=int, default=4)
    parser.add_argument("--n-plain", type=int, default=2)
    parser.add_argument("--micro-batch", type=int, default=8, help="update micro-batch (algo.micro_batch_size)")
    args = parser.parse_args(argv)

    import torch

    from recipe.local_engine.logprobs import PackedBatch, PromptPass, length_micro_batches, pack, response_logprobs
    from recipe.local_engine.rollout import generate_step
    from runtime.hf_generate import SamplingParams
    from runtime.prompt_prefill import decoder

    subject = load_subject(args)
    model, tok, prompts, queries = subject.model, subject.tokenizer, subject.prompts, subject.queries
    params = SamplingParams(args.max_new_tokens, 0.9, 1.0, True)

    def generation(sample: bool):
        torch.manual_seed(0)
        t0 = time.perf_counter()
        p = params if sample else SamplingParams(args.max_new_tokens, do_sample=False)
        gens = generate_step(model, tok, queries, prompts, args.n_refine, args.n_plain, p, 64, True)
        return gens, time.perf_counter() - t0

    def update(rows, by_length: bool):
        """log-probs forward + backward over the refine rows, micro-batched by query (rows in
        order, each micro-batch running its own prompts) or as the update does
        (``by_length``: one prompt pass, micro-batches by response length). Either way a
        micro-batch's forward runs only to its own longest response."""
        model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        batch = pack([g.prompt_ids for g in rows], [g.response_ids for g in rows], tok.pad_token_id)
        if by_length:
            prompts = PromptPass.run(decoder(model), batch, separate_backward=True)
            cuts = length_micro_batches(batch.response_mask, args.micro_batch)
        else:
            prompts, cuts = None, list(torch.arange(len(rows)).split(args.micro_batch))
        out = torch.zeros(len(rows), dtype=torch.float64)
        for cut in cuts:
            mb = PackedBatch(
                *(
                    t[cut]
                    for t in (
                        batch.input_ids,
                        batch.attention_mask,
                        batch.position_ids,
                        batch.responses,
                        batch.response_mask,
                    )
                )
            )
            lp = response_logprobs(model, mb, 0.9, prompts, cut)
            lp.sum().backward()
            out[cut] = lp.detach().sum(-1).double()
        if prompts is not None:
            prompts.backward()
        return out, time.perf_counter() - t0

    generation(True)  # warm the allocator and kernels once
    rows = None
    times: dict[str, dict[str, float]] = {}
    greedy_tokens, logprobs = {}, {}
    for name in SETTINGS:
        with setting(name):
            sampled, t_sampled = generation(True)
            greedy, t_greedy = generation(False)
            rows = rows or [g for g in sampled if g.rollout.variant == "refine"]  # the same rows for every update
            logprobs[name], t_update = update(rows, by_length=name == SETTINGS[-1])
        greedy_tokens[name] = [g.response_ids for g in greedy]
        times[name] = {
            "sampled generation": t_sampled,
            "greedy generation": t_greedy,
            "update fwd+bwd": t_update,
            "step (sampled + update)": t_sampled + t_update,
        }

    n_tokens = sum(len(g.response_ids) for g in rows)
    print(
        f"\none PASR step: {args.queries} queries x ({args.n_refine} refine + {args.n_plain} plain), "
        f"{len(rows)} refine rows ({n_tokens} tokens) trained; torch threads {torch.get_num_threads()}"
    )
    widths = [max(17, len(name) + 2) for name in SETTINGS]
    print(f"{'seconds':<26}" + "".join(f"{name:>{w}}" for name, w in zip(SETTINGS, widths)) + f"{'speed-up':>10}")
    for part in times[SETTINGS[0]]:
        cells = [times[name][part] for name in SETTINGS]
        print(f"{part:<26}" + "".join(f"{c:>{w}.2f}" for c, w in zip(cells, widths)) + f"{cells[0] / cells[-1]:>9.2f}x")
    same = all(greedy_tokens[name] == greedy_tokens[SETTINGS[0]] for name in SETTINGS)
    diff = max(float((logprobs[name] - logprobs[SETTINGS[0]]).abs().max()) for name in SETTINGS)
    print(f"greedy tokens identical in all {len(SETTINGS)}: {same}; sequence log-probs differ by at most {diff:.2e}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
