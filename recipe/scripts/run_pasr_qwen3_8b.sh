#!/usr/bin/env bash
# PASR on Qwen3-8B with verl 0.9.1, one node with 8 GPUs (80 GB class).
#
#   bash recipe/scripts/run_pasr_qwen3_8b.sh [EXTRA HYDRA OVERRIDES...]
#
# Everything but the model is in run_pasr_node.sh (data preparation, optional LLM judge,
# resume; its header lists the environment variables); the run's settings are the paper setup
# (recipe/config/setup/paper_qwen2_5_7b.yaml: the node script's default SETUP) with this model
# and experiment name.
# Qwen3 is a hybrid thinking model: with enable_thinking (its chat template's default, set
# explicitly here) it opens its reply with <think>, which is the block PASR's format expects.
set -euo pipefail
export MODEL_PATH=${MODEL_PATH:-Qwen/Qwen3-8B}
export EXP_NAME=${EXP_NAME:-pasr-qwen3-8b}
exec bash "$(dirname "$0")/run_pasr_node.sh" +data.apply_chat_template_kwargs.enable_thinking=true "$@"
