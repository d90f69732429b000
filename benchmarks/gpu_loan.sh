#!/usr/bin/env bash
# The one command of a lent GPU machine of this workplace that runs the GPU check, after the
# seven environment parts have been copied there (../shared/gpu/README.md):
#
#   bash benchmarks/gpu_loan.sh [gpu_check args...]      # --part learn by default
#   BENCH=gpu_scale bash benchmarks/gpu_loan.sh [gpu_scale args...]   # issue #50's scale question
#
# Give both `--commit <the hash of the tree sent>`, written out here: the lent machine's copy of .git
# has been older than the working tree it received (2026-11-28: bbf516e recorded for 32c8928).
#
# 1. unpacks the environment (.gpu/device_setup.sh, ~20 s);
# 2. compiles its Python files in the background: the bundle ships none (pip --no-compile), so
#    every process of verl's start-up (driver, task runner, FSDP worker, vLLM server and engine
#    core, agent-loop worker) would compile what it imports, one after the other;
# 3. runs benchmarks.$BENCH (gpu_check unless BENCH says otherwise) under `timeout` with its run
#    directory on the machine's disk (/root/<bench>: checkpoints are gigabytes) and its JSON in $OUT;
# 4. packs the run directory's logs, dumps and small JSON files (no checkpoints) into
#    $OUT/run.tar.gz (a command brings back at most 8 files); unpacked here,
#    `python -m benchmarks.gpu_check --report DIR` rebuilds the result from it.
# 5. packs this machine's Triton and FlashInfer kernel caches into $OUT/<name>_cache.tar.gz; copied to
#    .gpu/ here and carried to the next loan, they are unpacked before step 3 (the kernels vLLM's
#    engine compiled on a fresh machine: 103 s of its start-up on an H200).
# CHECK_TIMEOUT_S (default 450) bounds step 3; the check's own --budget-s (learn: 430) plus its
# --eval-grace-s is cut to end 15 s inside it, so the check, not `timeout`, ends the run.
set -uo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
: "${OUT:?OUT must name the folder whose files come back}"
# shellcheck disable=SC1091
source "${DEVICE_SETUP:-.gpu/device_setup.sh}"  # a stand-in for a rehearsal on the CPU
echo "gpu_loan: environment ready at $((SECONDS - t0)) s"
export PASR_DATA_DIR=$PWD/.gpu/data
# JIT kernel caches filled on an earlier loan, carried as .gpu/<name>_cache.tar.gz: on a fresh machine
# vLLM 0.24's engine spent 103 s of its start-up compiling kernels (docs/results/gpu_check.md)
for c in triton:.triton flashinfer:.cache/flashinfer; do
  name=${c%%:*} dir=$HOME/${c#*:}
  if [ -f ".gpu/${name}_cache.tar.gz" ]; then
    mkdir -p "$dir" && tar -xzf ".gpu/${name}_cache.tar.gz" -C "$dir" && echo "gpu_loan: $name cache from an earlier loan"
  fi
done
(
  python3 -m compileall -q -j 8 "$E/site" >"$OUT/compileall.log" 2>&1
  echo "compileall done at $((SECONDS - t0)) s" >>"$OUT/compileall.log"
) &
bench=${BENCH:-gpu_check}
run=${RUN_DIR:-/root/${bench//_/-}}
# the check ends itself inside this (it cuts its budget to CHECK_TIMEOUT_S less a margin to write its JSON)
export CHECK_TIMEOUT_S=${CHECK_TIMEOUT_S:-450}
timeout "$CHECK_TIMEOUT_S" python3 -m "benchmarks.$bench" --run-dir "$run" --out "$OUT/$bench.json" "$@" \
  >"$OUT/$bench.out" 2>&1
echo "gpu_loan: $bench exit $? at $((SECONDS - t0)) s" | tee -a "$OUT/$bench.out"
# a device command brings back at most 8 files: the run's logs, dumps and small JSON in one archive
(cd "$run" && find . \( -name checkpoints -o -name merged -o -name 'global_step_*' -o -name data \) -prune -o \
  -type f \( -name '*.log' -o -name '*.json' -o -name '*.jsonl' -o -name '*.yaml' -o -name '*.txt' \) -print |
  tar -czf "$OUT/run.tar.gz" -T -)
# this machine's kernel caches, for the next loan to carry (a file coming back is at most 16 MiB)
for c in triton:.triton flashinfer:.cache/flashinfer; do
  name=${c%%:*} dir=$HOME/${c#*:}
  if [ -d "$dir" ]; then
    tar -czf "$OUT/${name}_cache.tar.gz" -C "$dir" . && [ "$(stat -c %s "$OUT/${name}_cache.tar.gz")" -lt 16000000 ] ||
      rm -f "$OUT/${name}_cache.tar.gz"
  fi
done
du -sh "$OUT"/* "$run" 2>/dev/null
tail -n 60 "$OUT/$bench.out"
