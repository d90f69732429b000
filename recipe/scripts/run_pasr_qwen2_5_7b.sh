#!/usr/bin/env bash
# PASR on Qwen2.5-7B-Instruct with verl 0.9.1, one node with 8 GPUs (80 GB class).
#
#   bash recipe/scripts/run_pasr_qwen2_5_7b.sh [EXTRA HYDRA OVERRIDES...]
#
# Paper hyper-parameters (group 8, temperature 0.9, 1500 response tokens, lr 1e-6, KL 0.04,
# clip 0.2, 8 plain rollouts a query, tie -0.5), data preparation, an optional LLM judge and
# resume are in run_pasr_node.sh, which also lists the environment variables (DATA_DIR,
# CKPT_DIR, JUDGE_URL / JUDGE_MODEL / JUDGE_GPUS, NGPUS, TRAIN_BSZ, ...).
set -euo pipefail
export MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-7B-Instruct}
export EXP_NAME=${EXP_NAME:-pasr-qwen2.5-7b}
exec bash "$(dirname "$0")/run_pasr_node.sh" "$@"
