"""Cost of one PASR step on the local engine, printed side by side.

* the gen / reward / update split of real PASR steps (target: rewards and judging < 5 %);
* rollout throughput of the engine's generation call (``generate_step``: refine + plain chats,
  one batched call) vs a bare ``model.generate`` on the same padded batch (target >= 0.9x);
* peak resident memory of the process (target for the demo: < 8 GB).
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="demo")
    parser.add_argument("--steps", type=int, default=3, help="PASR steps to time (after a 2-step warm-up)")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)

    import torch

    from recipe.local_engine.config import load_config
    from recipe.local_engine.rollout import generate_step
    from recipe.local_engine.trainer import LocalPasrTrainer
    from runtime.hf_generate import SamplingParams, eos_token_ids
    from runtime.prompt_prefill import pad_around_prefixes

    overrides = [
        "warmup.steps=2",
        f"trainer.steps={args.steps}",
        "trainer.eval_at_start=false",
        "trainer.eval_after_warmup=false",
        "trainer.eval_at_end=false",
        "trainer.save_every=1000",
        *args.overrides,
    ]
    cfg = load_config(preset=args.preset, overrides=overrides)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = LocalPasrTrainer(cfg, Path(tmp) / "run")
        trainer.setup()
        trainer.fit()
        import json

        steps = [json.loads(x) for x in (Path(tmp) / "run" / "metrics.jsonl").read_text().splitlines()]
        steps = [s for s in steps if s["phase"] == "pasr"]

        # Rollout call vs bare generate on the same prompts, same sampling, same model.
        model, tok = trainer._generator(), trainer.tokenizer
        queries = trainer.train[: cfg.rollout.queries_per_step]
        params = SamplingParams(cfg.rollout.max_new_tokens, cfg.rollout.temperature, cfg.rollout.top_p, True)
        torch.manual_seed(0)
        t0 = time.perf_counter()
        gens = generate_step(
            model,
            tok,
            queries,
            trainer.prompts,
            cfg.pasr.n_refine,
            cfg.pasr.n_plain,
            params,
            cfg.rollout.gen_batch_size,
            cfg.pasr.prefill_think,
        )
        engine_s = time.perf_counter() - t0
        engine_tokens = sum(len(g.response_ids) for g in gens)
        ids, mask = pad_around_prefixes([g.prompt_ids for g in gens], tok.pad_token_id, [0] * len(gens))  # left padding
        torch.manual_seed(0)
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=cfg.rollout.max_new_tokens,
                eos_token_id=sorted(eos_token_ids(model, tok)),
                pad_token_id=tok.pad_token_id,
                **params.generate_kwargs(),
            )
        bare_s = time.perf_counter() - t0
        eos = eos_token_ids(model, tok)
        bare_tokens = 0
        for row in out[:, ids.shape[1] :].tolist():
            bare_tokens += next((i + 1 for i, t in enumerate(row) if t in eos), len(row))

    split = {k: sum(s[f"timing_s/{k}"] for s in steps) / len(steps) for k in ("gen", "reward", "update")}
    total = sum(split.values())
    print(
        f"\nPASR step ({len(steps)} steps, {cfg.rollout.queries_per_step} queries x "
        f"({cfg.pasr.n_refine} refine + {cfg.pasr.n_plain} plain), "
        f"{cfg.rollout.max_new_tokens} new tokens, rollout {cfg.model.rollout_dtype}, "
        f"torch threads {torch.get_num_threads()})"
    )
    print(f"{'part':<8}{'seconds':>10}{'share':>9}")
    for k, v in split.items():
        print(f"{k:<8}{v:>10.2f}{v / total:>9.1%}")
    print(f"rewards+judging share: {split['reward'] / total:.2%} (target < 5%)")
    e_tps, b_tps = engine_tokens / engine_s, bare_tokens / bare_s
    print(f"\n{'generation':<26}{'tokens':>8}{'seconds':>10}{'tok/s':>9}")
    print(f"{'engine rollout call':<26}{engine_tokens:>8}{engine_s:>10.2f}{e_tps:>9.1f}")
    print(f"{'bare model.generate':<26}{bare_tokens:>8}{bare_s:>10.2f}{b_tps:>9.1f}")
    print(f"ratio engine/bare: {e_tps / b_tps:.2f}x (target >= 0.9x)")
    print(
        f"\npeak resident memory: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GB (target < 8 GB)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
