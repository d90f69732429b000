#!/usr/bin/env bash
# Cold start for the verl engine: a supervised warm-up on PASR-format traces with verl 0.9.1's
# own SFT trainer, before PASR, for a model that does not write <think>/<refine>/<answer> from the
# prompt. (The base SmolLM2-135M scores format -1 on every rollout: every GRPO group has equal
# rewards, every advantage is 0 and PASR learns nothing; the trainer warns "no reward spread".)
#
#   MODEL_PATH=/models/base bash recipe/scripts/run_sft_warmup.sh [EXTRA SFT OVERRIDES...]
#
# The last line on stdout is the warmed-up model as a Hugging Face folder (the SFT checkpoint
# merged with verl's model merger, cached): train PASR from it with
#   MODEL_PATH=$(bash recipe/scripts/run_sft_warmup.sh | tail -1) EXP_NAME=... bash recipe/scripts/run_pasr_node.sh
#
# The traces are the local engine's warm-up traces (python3 -m data.sft_parquet): synthetic
# arithmetic, most under the refine prompt (40% of those with a refine that corrects a wrong
# step), 30% under the plain prompt so the plain baseline answers in the same format.
#
# Environment: MODEL_PATH (required; `smollm2` = the embedded SmolLM2-135M-Instruct),
#   OUT_DIR (default $HOME/ckpts/pasr-sft/<model name>), SFT_FILE (default
#   $HOME/data/pasr/warmup_sft.parquet, written once), N_TRACES (2000), EPOCHS (2), LR (1e-5),
#   NGPUS (default: all GPUs of this node).
set -euo pipefail
cd "$(dirname "$0")/../.."

: "${MODEL_PATH:?set MODEL_PATH (a local folder, a hub name, or smollm2)}"
MODEL_PATH=$(python3 -c "import sys; from runtime.model_loading import resolve_model_path; print(resolve_model_path(sys.argv[1]))" "$MODEL_PATH")
OUT_DIR=${OUT_DIR:-$HOME/ckpts/pasr-sft/$(basename "$MODEL_PATH")}
SFT_FILE=${SFT_FILE:-$HOME/data/pasr/warmup_sft.parquet}
N_TRACES=${N_TRACES:-2000}
EPOCHS=${EPOCHS:-2}
LR=${LR:-1e-5}
NGPUS=${NGPUS:-$(nvidia-smi -L | wc -l)}

[[ -f "$SFT_FILE" ]] || python3 -m data.sft_parquet --out "$SFT_FILE" --n "$N_TRACES" >&2

# verl's FSDP engine defaults to flash_attention_2 with packed sequences; without flash-attn use
# sdpa on padded batches (the same choice the PASR trainer makes by itself)
ATTN_ARGS=()
if ! python3 -c "import flash_attn" >/dev/null 2>&1; then
    echo "flash-attn does not import: SFT with attn_implementation=sdpa and use_remove_padding=false" >&2
    ATTN_ARGS=(model.use_remove_padding=false +model.override_config.attn_implementation=sdpa)
fi

torchrun --standalone --nnodes=1 --nproc_per_node="$NGPUS" -m verl.trainer.sft_trainer \
    data.train_files="$SFT_FILE" \
    data.messages_key=messages \
    data.max_length=1024 \
    data.truncation=error \
    data.train_batch_size=64 \
    data.micro_batch_size_per_gpu=8 \
    model.path="$MODEL_PATH" \
    optim.lr="$LR" \
    trainer.default_local_dir="$OUT_DIR" \
    trainer.project_name=pasr-sft \
    trainer.experiment_name="$(basename "$OUT_DIR")" \
    trainer.total_epochs="$EPOCHS" \
    trainer.logger='["console"]' \
    trainer.n_gpus_per_node="$NGPUS" \
    trainer.nnodes=1 \
    ${ATTN_ARGS[@]+"${ATTN_ARGS[@]}"} \
    "$@" >&2

# the last checkpoint (FSDP shards + config/tokenizer) as a loadable folder
python3 -m runtime.hf_export "$OUT_DIR"
