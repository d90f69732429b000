# Sourced by the one-GPU smoke scripts (run_pasr_smoke_1gpu.sh, run_rrr_smoke_1gpu.sh): what
# every smoke run does before it trains. Needs RUN_DIR (absolute) set; the arguments are the
# paths under it that a previous smoke run left and this one must not resume from.
#
# Every smoke run starts from nothing (a checkpoint left by an earlier one would be resumed);
# only a folder a smoke script made (it has smoke.log) is cleared. Then: stamp() for timed log
# lines, the GPU and library versions in gpu.txt, and MODEL_PATH resolved to an HF folder (the
# embedded model is converted from its GGUF once and cached). After the script's own train()
# (\$1 = total steps, \$2 = log file, then overrides), train_and_resume runs the two training phases.
smoke_prelude() {
    if [[ -d "$RUN_DIR" && -n "$(ls -A "$RUN_DIR")" ]]; then
        [[ -f "$RUN_DIR/smoke.log" ]] || { echo "RUN_DIR=$RUN_DIR is not empty and not a smoke run's folder" >&2; exit 2; }
        rm -rf "$@" "$RUN_DIR/eval" "$RUN_DIR"/*.log
    fi
    mkdir -p "$RUN_DIR"
    SECONDS=0
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$RUN_DIR/gpu.txt"
    python3 -c "import verl, vllm, torch, transformers; print('verl', verl.__version__, '| vllm', vllm.__version__, '| torch', torch.__version__, '| transformers', transformers.__version__)" | tee -a "$RUN_DIR/gpu.txt"
    MODEL_PATH=$(python3 -c "import sys; from runtime.model_loading import resolve_model_path; print(resolve_model_path(sys.argv[1]))" "${MODEL_PATH:-smollm2}")
}

stamp() { printf '%4ds  %s\n' "$SECONDS" "$*" | tee -a "$RUN_DIR/smoke.log"; }

# Run 1 trains steps 1..STEPS_FIRST and checkpoints; run 2 must resume there and go on to
# STEPS_TOTAL. A failed run is stamped, not fatal: the script's checks say what is missing.
train_and_resume() {
    stamp "run 1: steps 1-$STEPS_FIRST (checkpoint at $STEPS_FIRST)"
    train "$STEPS_FIRST" "$RUN_DIR/train_1.log" "$@" || stamp "run 1 failed: $RUN_DIR/train_1.log"
    stamp "run 2: resume from global_step_$STEPS_FIRST, steps $((STEPS_FIRST + 1))-$STEPS_TOTAL"
    train "$STEPS_TOTAL" "$RUN_DIR/train_2.log" "$@" || stamp "run 2 failed: $RUN_DIR/train_2.log"
}
