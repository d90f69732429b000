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
# JUDGE_MODEL / JUDGE_GPUS, NGPUS, NNODES, TRAIN_BSZ, ...). The run's settings are the paper
# setup, recipe/config/setup/paper_qwen2_5_7b.yaml (batch, tensor parallel size, epochs,
# preemption-safe checkpoints, the judge's tie band), the one `pasr submit ... -- setup=paper_qwen2_5_7b`
# runs too; its model and experiment name are the defaults below.
set -euo pipefail
export SETUP=${SETUP-paper_qwen2_5_7b}
export MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-7B-Instruct}
export EXP_NAME=${EXP_NAME:-pasr-qwen2.5-7b}
exec bash "$(dirname "$0")/run_pasr_node.sh" "$@"
