#!/usr/bin/env bash
# PASR with verl 0.9.1 on one node with 8 GPUs (80 GB class): the body the per-model scripts
# (run_pasr_qwen2_5_7b.sh, run_pasr_qwen3_8b.sh) run with their model and defaults.
#
#   MODEL_PATH=Qwen/Qwen2.5-7B-Instruct EXP_NAME=my-run bash recipe/scripts/run_pasr_node.sh [EXTRA HYDRA OVERRIDES...]
#
# The paper's hyper-parameters are the config's defaults (recipe/config/pasr_trainer.yaml, with
# PASR's own in recipe/pasr_config.py); this script passes only the model, data, paths and GPUs.
#
# Prerequisites on the node: `pip install -e '.[gpu]'` (verl[vllm]==0.9.1: the vLLM, torch and
# transformers versions verl pins) from the repository root, the model (hub name or local folder)
# and the data sets reachable. Everything else is here: data preparation, an optional LLM judge on
# GPUs of its own, training, checkpoints and resume. Without flash-attn the trainer switches the
# actor to sdpa without padding removal by itself (it says so in the log). A model that does not
# write the PASR format from the prompt needs the cold start first (run_sft_warmup.sh).
#
# Environment (optional unless marked required):
#   MODEL_PATH      model to train                     (required)
#   EXP_NAME        experiment name                    (required)
#   DATA_DIR        parquet files go here              (default $HOME/data/pasr)
#   TRAIN_DATASET   training data, prepared once into $DATA_DIR/<name or file stem>_train.parquet
#                   (default gsm8k): a set of `pasr data list` (gsm8k, math, synthetic, ...) or a
#                   .jsonl/.json/.parquet file whose layout is read from its fields (MATH's
#                   problem/solution, GSM8K, DeepScaleR's problem/answer, prompt/answer, verl's own)
#   TRAIN_QUESTION_FIELD / TRAIN_ANSWER_FIELD   the fields of a file of another layout (e.g.
#                   instruction / output): `pasr data prepare`'s --question-field/--answer-field
#   TRAIN_FILE      a verl parquet already prepared: trained on as is, TRAIN_DATASET unused
#   VAL_DATASET, VAL_QUESTION_FIELD, VAL_ANSWER_FIELD, VAL_FILE   the same for validation
#                   (default math500, split test)
#   CKPT_DIR        checkpoints and rollout dumps      (default $HOME/ckpts/pasr/$EXP_NAME)
#   NGPUS           GPUs for training                  (default 8, or 8 minus the judge's)
#   TRAIN_BSZ       prompts per step                   (default 16 per training GPU: 128 on 8)
#   TOTAL_EPOCHS    (default 2)   SAVE_FREQ / TEST_FREQ (default 20)
#   Judge (default: the rule judge, Math-Verify; enough for math data):
#   JUDGE_URL       an OpenAI-compatible endpoint, e.g. http://judge-host:8000/v1, with
#   JUDGE_MODEL     the model it serves                -> pasr.judge.kind=$JUDGE_KIND (default hybrid)
#   JUDGE_GPUS      e.g. "6,7": start `vllm serve $JUDGE_MODEL` here on those GPUs (training uses
#                   the others), wait for /health, and point the trainer at it
#   JUDGE_PORT      port of that server (default 8000)
#   JUDGE_HOST      address the trainer uses to reach it (default: this node's first address)
#   WANDB_API_KEY   set -> also log to Weights & Biases
set -euo pipefail
cd "$(dirname "$0")/../.."

: "${MODEL_PATH:?set MODEL_PATH (or use run_pasr_qwen2_5_7b.sh / run_pasr_qwen3_8b.sh)}"
: "${EXP_NAME:?set EXP_NAME}"
DATA_DIR=${DATA_DIR:-$HOME/data/pasr}
TRAIN_DATASET=${TRAIN_DATASET:-gsm8k}
VAL_DATASET=${VAL_DATASET:-math500}
CKPT_DIR=${CKPT_DIR:-$HOME/ckpts/pasr/$EXP_NAME}
TOTAL_EPOCHS=${TOTAL_EPOCHS:-2}
SAVE_FREQ=${SAVE_FREQ:-20}
TEST_FREQ=${TEST_FREQ:-20}
ROLLOUT_TP=${ROLLOUT_TP:-2}
JUDGE_PORT=${JUDGE_PORT:-8000}
JUDGE_KIND=${JUDGE_KIND:-hybrid}

# ---------------------------------------------------------------- data (written once)
# prepare SPLIT DATASET QUESTION_FIELD ANSWER_FIELD: the parquet `pasr data prepare --out DIR`
# writes, <dataset stem>_<split>.parquet, made unless it exists (delete it to prepare it again)
prepare() {
    local split=$1 dataset=$2 question=$3 answer=$4
    local file="$DATA_DIR/$(basename "$dataset" | sed 's/\.[a-z]*$//')_$split.parquet"
    local mapping=()
    [[ -n "$question" ]] && mapping+=(--question-field "$question")
    [[ -n "$answer" ]] && mapping+=(--answer-field "$answer")
    [[ -f "$file" ]] || python3 -m recipe data prepare --dataset "$dataset" --split "$split" --out "$DATA_DIR" \
        ${mapping[@]+"${mapping[@]}"} >&2 || return 1
    echo "$file"
}
mkdir -p "$DATA_DIR" "$CKPT_DIR"
TRAIN_FILE=${TRAIN_FILE:-$(prepare train "$TRAIN_DATASET" "${TRAIN_QUESTION_FIELD:-}" "${TRAIN_ANSWER_FIELD:-}")}
VAL_FILE=${VAL_FILE:-$(prepare test "$VAL_DATASET" "${VAL_QUESTION_FIELD:-}" "${VAL_ANSWER_FIELD:-}")}

# ---------------------------------------------------------------- judge
JUDGE_ARGS=()
if [[ -n "${JUDGE_GPUS:-}" ]]; then
    : "${JUDGE_MODEL:?JUDGE_GPUS needs JUDGE_MODEL (the judge model to serve)}"
    n_judge=$(awk -F, '{print NF}' <<<"$JUDGE_GPUS")
    all_gpus=$(seq -s, 0 $(( $(nvidia-smi -L | wc -l) - 1 )))
    TRAIN_GPUS=$(tr ',' '\n' <<<"$all_gpus" | grep -vxF -f <(tr ',' '\n' <<<"$JUDGE_GPUS") | paste -sd,)
    NGPUS=${NGPUS:-$(awk -F, '{print NF}' <<<"$TRAIN_GPUS")}
    echo "judge: vllm serve $JUDGE_MODEL on GPUs $JUDGE_GPUS; training on GPUs $TRAIN_GPUS"
    CUDA_VISIBLE_DEVICES="$JUDGE_GPUS" vllm serve "$JUDGE_MODEL" --host 0.0.0.0 --port "$JUDGE_PORT" \
        --tensor-parallel-size "$n_judge" --gpu-memory-utilization 0.9 --served-model-name "$JUDGE_MODEL" \
        >"$CKPT_DIR/judge_vllm.log" 2>&1 &
    JUDGE_PID=$!
    trap 'kill "$JUDGE_PID" 2>/dev/null || true' EXIT
    for _ in $(seq 1 180); do
        curl -sf "http://127.0.0.1:$JUDGE_PORT/health" >/dev/null && break
        kill -0 "$JUDGE_PID" 2>/dev/null || { echo "vllm serve exited, see $CKPT_DIR/judge_vllm.log" >&2; exit 1; }
        sleep 5
    done
    curl -sf "http://127.0.0.1:$JUDGE_PORT/health" >/dev/null || { echo "judge not healthy after 15 min" >&2; exit 1; }
    # This node's address, not 127.0.0.1: the judge client lives in verl's task runner, which Ray
    # places on this node when it can but may put on another one (it checks the URL from there).
    JUDGE_HOST=${JUDGE_HOST:-$(hostname -I 2>/dev/null | awk '{print $1}')}
    JUDGE_URL="http://${JUDGE_HOST:-127.0.0.1}:$JUDGE_PORT/v1"
    export CUDA_VISIBLE_DEVICES="$TRAIN_GPUS"
fi
if [[ -n "${JUDGE_URL:-}" ]]; then
    : "${JUDGE_MODEL:?JUDGE_URL needs JUDGE_MODEL (the served model name)}"
    export OPENAI_API_KEY=${OPENAI_API_KEY:-EMPTY}  # vllm serve accepts any key unless --api-key
    JUDGE_ARGS=(pasr.judge.kind="$JUDGE_KIND" pasr.judge.base_url="$JUDGE_URL" pasr.judge.model="$JUDGE_MODEL"
                pasr.judge.cache_path="$CKPT_DIR/judge_cache.jsonl")
fi

NGPUS=${NGPUS:-8}
TRAIN_BSZ=${TRAIN_BSZ:-$((NGPUS * 16))}
MINI_BSZ=${MINI_BSZ:-$((NGPUS * 4))}
LOGGER='["console"]'
[[ -n "${WANDB_API_KEY:-}" ]] && LOGGER='["console","wandb"]'

# ---------------------------------------------------------------- train
# Only what this node and run decide: everything else (the paper's hyper-parameters, PASR's
# group sizes and tie) is recipe/config/pasr_trainer.yaml and recipe/pasr_config.py.
python3 -m recipe.main_pasr \
    data.train_files="$TRAIN_FILE" \
    data.val_files="$VAL_FILE" \
    data.train_batch_size="$TRAIN_BSZ" \
    actor_rollout_ref.model.path="$MODEL_PATH" \
    actor_rollout_ref.actor.ppo_mini_batch_size="$MINI_BSZ" \
    actor_rollout_ref.ref.fsdp_config.param_offload=true \
    actor_rollout_ref.rollout.tensor_model_parallel_size="$ROLLOUT_TP" \
    trainer.experiment_name="$EXP_NAME" \
    trainer.logger="$LOGGER" \
    trainer.n_gpus_per_node="$NGPUS" \
    trainer.default_local_dir="$CKPT_DIR" \
    trainer.save_freq="$SAVE_FREQ" \
    trainer.max_actor_ckpt_to_keep=3 \
    trainer.test_freq="$TEST_FREQ" \
    trainer.total_epochs="$TOTAL_EPOCHS" \
    ${JUDGE_ARGS[@]+"${JUDGE_ARGS[@]}"} \
    "$@"
