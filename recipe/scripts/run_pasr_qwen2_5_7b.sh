#!/usr/bin/env bash
# PASR on Qwen2.5-7B-Instruct with verl 0.9.1, one node with 8 GPUs (80 GB class).
#
#   bash recipe/scripts/run_pasr_qwen2_5_7b.sh [EXTRA HYDRA OVERRIDES...]
#   TRAIN_DATASET=math JUDGE_MODEL=Qwen/Qwen2.5-14B-Instruct JUDGE_GPUS=2 bash recipe/scripts/run_pasr_qwen2_5_7b.sh
#       the paper's setup on MATH: a 14B judge served on 2 GPUs (tensor parallel 2), training on the other 6
#   DRY_RUN=1 TRAIN_DATASET=math JUDGE_MODEL=Qwen/Qwen2.5-14B-Instruct JUDGE_GPUS=2 bash recipe/scripts/run_pasr_qwen2_5_7b.sh
#       the same plan checked first (`pasr check`: seconds, no GPU)
#
# Everything but the model is in run_pasr_node.sh (data preparation, an optional LLM judge,
# resume; its header lists the environment variables: DATA_DIR, CKPT_DIR, JUDGE_URL /
# JUDGE_MODEL / JUDGE_GPUS, NGPUS, TRAIN_BSZ, ...); the paper's hyper-parameters are the
# config's defaults (recipe/config/pasr_trainer.yaml, recipe/pasr_config.py).
set -euo pipefail
export MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-7B-Instruct}
export EXP_NAME=${EXP_NAME:-pasr-qwen2.5-7b}
exec bash "$(dirname "$0")/run_pasr_node.sh" "$@"
