"""The warm-up's update with its rows padded into a batch and laid end to end, side by side.

A warm-up batch pads every row to the longest prompt plus the longest target: on the local
defaults (8 rows a step, refine- and plain-prompt traces, targets of about 10 to 90 tokens)
about a quarter of its tokens were padding. ``recipe.local_engine.policy_update.sft_loss`` can
lay the rows end to end in one sequence (each row masked off from the others) and compute the
same loss without them, at the price of attention over the whole sequence; it does so where a
FLOP count says it pays (``recipe.local_engine.logprobs.end_to_end_pays``). Every prompt also
starts with the template and one of two system prompts (about half its tokens): laid end to
end, each such prefix can come once, with each row seeing its own (:mod:`runtime.prompt_prefill`).

Columns: the padded batch and the rows end to end, each with every prompt whole (before shared
prefixes), then end to end with shared prefixes (the trainer's choice now). All run the forward
and backward pass of the same warm-up steps (the trainer's own batches,
``LocalPasrTrainer.warmup_batch``) on the same model; the losses must agree.

    python3 -m benchmarks.warmup_speed                 # the local defaults, 8 steps
    python3 -m benchmarks.warmup_speed --steps 4 warmup.refine_style=check
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=8, help="warm-up steps to time (from step 1)")
    parser.add_argument("overrides", nargs="*", help="key=value config overrides of the local defaults")
    args = parser.parse_args(argv)

    import torch

    from recipe.local_engine.config import load_config
    from recipe.local_engine.logprobs import end_to_end_pays
    from recipe.local_engine.policy_update import sft_loss
    from recipe.local_engine.trainer import LocalPasrTrainer

    cfg = load_config(overrides=args.overrides)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = LocalPasrTrainer(cfg, Path(tmp) / "run")
        trainer.setup()
    model, pad = trainer.model, trainer.tokenizer.pad_token_id
    model.train()

    import recipe.local_engine.logprobs as lp

    def whole(layout):
        """``layout`` with every prompt run whole (no shared prefix)."""

        def loss(prompts, responses):
            saved, lp.shared_prefixes = lp.shared_prefixes, lambda rows: [0] * len(rows)
            try:
                return sft_loss(model, prompts, responses, pad, layout=layout)
            finally:
                lp.shared_prefixes = saved

        return loss

    def end_to_end_loss(prompts, responses):
        return sft_loss(model, prompts, responses, pad, layout="end_to_end")

    columns = {
        "padded, whole": whole("padded"),
        "end to end, whole": whole("end_to_end"),
        "+ shared prefixes": end_to_end_loss,
    }
    seconds = dict.fromkeys(columns, 0.0)
    losses: dict[str, list[float]] = {name: [] for name in columns}
    real = padded = 0
    batches = [trainer.warmup_batch(step) for step in range(1, args.steps + 1)]
    end_to_end_loss(*batches[0]).backward()  # warm the allocator and kernels once
    for i, (prompts, responses) in enumerate(batches):
        real += sum(map(len, prompts)) + sum(map(len, responses))
        padded += len(prompts) * (max(map(len, prompts)) + max(map(len, responses)))
        order = list(columns) if i % 2 == 0 else list(columns)[::-1]  # alternate who goes first
        for name in order:
            model.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            loss = columns[name](prompts, responses)
            loss.backward()
            seconds[name] += time.perf_counter() - t0
            losses[name].append(loss.item())

    print(
        f"\n{args.steps} warm-up steps of {cfg.warmup.batch_size} rows: {real} tokens, {padded} with padding "
        f"({1 - real / padded:.0%} padding); torch threads {torch.get_num_threads()}"
    )
    print(f"{'':<26}" + "".join(f"{name:>20}" for name in columns) + f"{'speed-up':>10}")
    first, last = seconds[next(iter(columns))], seconds["+ shared prefixes"]
    print(
        f"{'forward + backward, s':<26}" + "".join(f"{seconds[n]:>20.1f}" for n in columns) + f"{first / last:>9.2f}x"
    )
    chosen = sum(end_to_end_pays(model.config, *batch) for batch in batches)
    print(f"the trainer (sft_loss layout=auto) lays {chosen} of these {args.steps} batches end to end")
    reference = losses[next(iter(columns))]
    gap = max(abs(a - b) for values in losses.values() for a, b in zip(values, reference))
    print(f"losses differ by at most {gap:.1e} (mean loss {sum(reference) / args.steps:.4f})")
    return 0 if gap < 1e-4 else 1


if __name__ == "__main__":
    raise SystemExit(main())
