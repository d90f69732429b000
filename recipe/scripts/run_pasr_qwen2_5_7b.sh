#!/usr/bin/env bash
# PASR on Qwen2.5-7B-Instruct with verl 0.9.1, one node with 8 GPUs (80 GB class).
#
#   bash recipe/scripts/run_pasr_qwen2_5_7b.sh [EXTRA HYDRA OVERRIDES...]
#
# Everything but the model is in run_pasr_node.sh (data preparation, an optional LLM judge,
# resume; its header lists the environment variables: DATA_DIR, CKPT_DIR, JUDGE_URL /
# JUDGE_MODEL / JUDGE_GPUS, NGPUS, TRAIN_BSZ, ...); the paper's hyper-parameters are the
# config's defaults (recipe/config/pasr_trainer.yaml, recipe/pasr_config.py).
set -euo pipefail
export MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-7B-Instruct}
export EXP_NAME=${EXP_NAME:-pasr-qwen2.5-7b}
exec bash "$(dirname "$0")/run_pasr_node.sh" "$@"
