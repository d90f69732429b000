# Sourced by the one-GPU smoke scripts (run_pasr_smoke_1gpu.sh, run_rrr_smoke_1gpu.sh): what
# every smoke run does before it trains. Needs RUN_DIR (absolute) set; the arguments are the
# paths under it that a previous smoke run left and this one must not resume from.
#
# Every smoke run starts from nothing (a checkpoint left by an earlier one would be resumed);
# only a folder a smoke script made (it has smoke.log) is cleared. Then: stamp() for timed log
# lines, the GPU and library versions in gpu.txt, and MODEL_PATH resolved to an HF folder (the
# embedded model is converted from its GGUF once and cached).
smoke_prelude() {
    if [[ -d "$RUN_DIR" && -n "$(ls -A "$RUN_DIR")" ]]; then
        [[ -f "$RUN_DIR/smoke.log" ]] || { echo "RUN_DIR=$RUN_DIR is not empty and not a smoke run's folder" >&2; exit 2; }
        rm -rf "$@" "$RUN_DIR/eval" "$RUN_DIR"/*.log
    fi
    mkdir -p "$RUN_DIR"
    SECONDS=0
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$RUN_DIR/gpu.txt"
    python3 -c "import verl, vllm, torch, transformers; print('verl', verl.__version__, '| vllm', vllm.__version__, '| torch', torch.__version__, '| transformers', transformers.__version__)" | tee -a "$RUN_DIR/gpu.txt"
    MODEL_PATH=$(python3 -c "import sys; from recipe.model_loading import resolve_model_path; print(resolve_model_path(sys.argv[1]))" "${MODEL_PATH:-smollm2}")
}

stamp() { printf '%4ds  %s\n' "$SECONDS" "$*" | tee -a "$RUN_DIR/smoke.log"; }
