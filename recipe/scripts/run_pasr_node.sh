#!/usr/bin/env bash
# PASR with verl 0.9.1 on one node with 8 GPUs (80 GB class): the body the per-model scripts
# (run_pasr_qwen2_5_7b.sh, run_pasr_qwen3_8b.sh) run with their model and defaults.
#
#   MODEL_PATH=Qwen/Qwen2.5-7B-Instruct EXP_NAME=my-run bash recipe/scripts/run_pasr_node.sh [EXTRA HYDRA OVERRIDES...]
#
# The run's settings are one setup, recipe/config/setup/$SETUP.yaml over recipe/config/pasr_trainer.yaml
# (PASR's own in recipe/pasr_config.py): batch, tensor parallel size, epochs, checkpoints, the
# judge's tie band. `pasr submit ... -- setup=paper_qwen2_5_7b ...` composes the same config. This
# script passes the setup, the model, data, paths and GPUs, and a setting only when its variable
# below is set.
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
#   EXP_NAME        experiment name: the checkpoint folder's and the tracker run's (required)
#   SETUP           a run setup of recipe/config/setup/ (default paper_qwen2_5_7b: the paper's
#                   hyper-parameters, preemption-safe checkpoints); SETUP= (empty): pasr_trainer.yaml alone
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
#   NGPUS           GPUs for training a node           (default the node's; with JUDGE_GPUS the node's minus the judge's)
#   NNODES          nodes of this Ray cluster to train on (default 1; every node trains on NGPUS)
#   NODE_GPUS       GPUs a node has                    (default: nvidia-smi's count, else 8)
#   Unset, each of these is the setup's: TRAIN_BSZ (prompts a step), MINI_BSZ (default TRAIN_BSZ / 4
#   when TRAIN_BSZ is set), ROLLOUT_TP, TOTAL_EPOCHS, SAVE_FREQ (steps between checkpoints),
#   KEEP_CKPTS (checkpoints kept), TEST_FREQ (steps between validations)
#   Judge (default: the rule judge, Math-Verify; enough for math data):
#   JUDGE_GPUS      e.g. 2, with JUDGE_MODEL: serve the judge with vLLM on 2 GPUs of this node's Ray
#                   cluster (`pasr judge serve`: a Ray actor, tensor parallel 2, ~28 GB of bf16 weights
#                   for a 14B judge), train on the node's other GPUs (NGPUS defaults to them), stop
#                   the judge when training ends; its log is $CKPT_DIR/judge_vllm.log
#   JUDGE_URL       or a judge served elsewhere: an OpenAI-compatible endpoint, e.g.
#                   http://judge-host:8000/v1, with JUDGE_MODEL the model it serves
#   JUDGE_MODEL     the judge model                    -> pasr.judge.kind=$JUDGE_KIND
#   JUDGE_KIND      openai (default: every rollout asked) or hybrid (Math-Verify for math golds, the
#                   LLM judge only for the rest: on MATH it is barely asked)
#   JUDGE_PORT      port of the served judge           (default: a free one on its node)
#   JUDGE_ZETA      pasr.zeta with an LLM judge        (default: the setup's 0.05; its scores are graded, not 0/1)
#   DRY_RUN=1       check the plan instead of training (`pasr check`: config, data, model, judge, GPU
#                   and batch arithmetic, memory, the plan with an estimated step time; seconds, no GPU
#                   needed). Without it the same check runs first and a plan it refuses is not started
#   NO_CHECK=1      train without that check
#   WANDB_API_KEY   set -> also log to Weights & Biases
set -euo pipefail
SELF="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$0")/../.."

: "${MODEL_PATH:?set MODEL_PATH (or use run_pasr_qwen2_5_7b.sh / run_pasr_qwen3_8b.sh)}"
: "${EXP_NAME:?set EXP_NAME}"
DATA_DIR=${DATA_DIR:-$HOME/data/pasr}
TRAIN_DATASET=${TRAIN_DATASET:-gsm8k}
VAL_DATASET=${VAL_DATASET:-math500}
CKPT_DIR=${CKPT_DIR:-$HOME/ckpts/pasr/$EXP_NAME}
SETUP=${SETUP-paper_qwen2_5_7b}  # set but empty: none
JUDGE_KIND=${JUDGE_KIND:-openai}
# the tie band for the LLM judge's graded scores (docs/judges_and_data.md): the setup's, else 0.05
JUDGE_ZETA=${JUDGE_ZETA:-}
[[ -n "$SETUP" ]] || JUDGE_ZETA=${JUDGE_ZETA:-0.05}

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
LAUNCH=()  # what runs the training command: nothing, pasr judge serve, or pasr check
NODE_GPUS=${NODE_GPUS:-$( (nvidia-smi -L 2>/dev/null || true) | wc -l)}
[[ "$NODE_GPUS" -gt 0 ]] || NODE_GPUS=8  # a dry run on a machine without GPUs plans the 8-GPU node
if [[ -n "${JUDGE_GPUS:-}" ]]; then
    : "${JUDGE_MODEL:?JUDGE_GPUS needs JUDGE_MODEL (the judge model to serve)}"
    [[ "$JUDGE_GPUS" =~ ^[0-9]+$ ]] || {
        echo "JUDGE_GPUS=$JUDGE_GPUS: give the number of GPUs for the judge (e.g. JUDGE_GPUS=2); Ray picks them" >&2
        exit 2
    }
    NGPUS=${NGPUS:-$((NODE_GPUS - JUDGE_GPUS))}
    LAUNCH=(python3 -m recipe judge serve --judge-model "$JUDGE_MODEL" --judge-gpus "$JUDGE_GPUS"
            --log "$CKPT_DIR/judge_vllm.log" ${JUDGE_PORT:+--port "$JUDGE_PORT"} --)
    JUDGE_ARGS=(pasr.judge.kind="$JUDGE_KIND")
elif [[ -n "${JUDGE_URL:-}" ]]; then
    : "${JUDGE_MODEL:?JUDGE_URL needs JUDGE_MODEL (the served model name)}"
    export OPENAI_API_KEY=${OPENAI_API_KEY:-EMPTY}  # vllm serve accepts any key unless --api-key
    JUDGE_ARGS=(pasr.judge.kind="$JUDGE_KIND" pasr.judge.base_url="$JUDGE_URL" pasr.judge.model="$JUDGE_MODEL")
fi
if [[ ${#JUDGE_ARGS[@]} -gt 0 ]]; then
    JUDGE_ARGS+=(${JUDGE_ZETA:+pasr.zeta="$JUDGE_ZETA"})
    # the setup keeps the judge's cache beside the checkpoints; without one, so does this
    [[ -n "$SETUP" ]] || JUDGE_ARGS+=(pasr.judge.cache_path="$CKPT_DIR/judge_cache.jsonl")
fi
if [[ -n "${DRY_RUN:-}" ]]; then
    LAUNCH=(python3 -m recipe check --node-gpus "$NODE_GPUS"
            ${JUDGE_GPUS:+--judge-gpus "$JUDGE_GPUS" --judge-model "$JUDGE_MODEL"} --)
fi

NGPUS=${NGPUS:-$NODE_GPUS}

# ---------------------------------------------------------------- the run's overrides
# The setup, then what this node and run decide, then a setting only where its variable is set:
# everything else (the paper's hyper-parameters, PASR's group sizes and tie, checkpoints) is the
# setup's (recipe/config/setup/), over recipe/config/pasr_trainer.yaml and recipe/pasr_config.py.
RUN_ARGS=(${SETUP:+setup="$SETUP"}
          data.train_files="$TRAIN_FILE"
          data.val_files="$VAL_FILE"
          actor_rollout_ref.model.path="$MODEL_PATH"
          trainer.experiment_name="$EXP_NAME"
          trainer.n_gpus_per_node="$NGPUS"
          trainer.default_local_dir="$CKPT_DIR")
setting() { [[ -z "$2" ]] || RUN_ARGS+=("$1=$2"); }  # KEY VALUE: the override when VALUE is set
[[ -n "${TRAIN_BSZ:-}" ]] && MINI_BSZ=${MINI_BSZ:-$((TRAIN_BSZ / 4))}
setting trainer.nnodes "${NNODES:-}"
setting data.train_batch_size "${TRAIN_BSZ:-}"
setting actor_rollout_ref.actor.ppo_mini_batch_size "${MINI_BSZ:-}"
setting actor_rollout_ref.rollout.tensor_model_parallel_size "${ROLLOUT_TP:-}"
setting trainer.total_epochs "${TOTAL_EPOCHS:-}"
setting trainer.save_freq "${SAVE_FREQ:-}"
setting trainer.max_actor_ckpt_to_keep "${KEEP_CKPTS:-}"
setting trainer.test_freq "${TEST_FREQ:-}"
[[ -n "${WANDB_API_KEY:-}" ]] && RUN_ARGS+=('trainer.logger=["console","wandb"]')

# ---------------------------------------------------------------- check, then train
# The plan is checked first, as DRY_RUN=1 checks it (this script's own command under pasr check):
# what verl would refuse after minutes of start-up (and a judge load) stops here in seconds.
if [[ -z "${DRY_RUN:-}" && -z "${NO_CHECK:-}" ]]; then
    DRY_RUN=1 bash "$SELF" "$@" || {
        echo "pasr check refused this run (the FAIL lines above); NO_CHECK=1 trains without the check" >&2
        exit 2
    }
fi
${LAUNCH[@]+"${LAUNCH[@]}"} python3 -m recipe.main_pasr "${RUN_ARGS[@]}" ${JUDGE_ARGS[@]+"${JUDGE_ARGS[@]}"} "$@"
