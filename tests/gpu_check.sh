#!/usr/bin/env bash
# The GPU check: on a CUDA machine, prove that minimm's CUDA kernels are right and that training
# with EMAHook runs the fused CUDA plan. Written for the machine a session is lent as it is: the
# checkout without its virtual environment, `python3` with torch, no network, $OUT for what comes
# back (a few files, no folders), and a loan of 15 minutes in all, its start (a few minutes)
# included.
#
# Two sizes. The default, the first run on a fresh machine: its step limits add up to at most 300 s,
# the build included, so that a failed first run leaves time for a second:
#   preflight   one line of versions, then stops within seconds when something the run needs is
#               missing: nvidia-smi and a GPU, nvcc (CUDA_HOME), torch with CUDA, ninja, pytest;
#   build       the extension with its CUDA kernels (MINIMM_REQUIRE_EXT=1: a build problem is an
#               error, not a silent fallback), for this GPU's architecture only;
#   cuda ops    tests/test_ops_cuda*.py, without -x so that one failure hides no other: the CUDA
#               kernels against the CPU ones, bit for bit;
#   memcheck    compute-sanitizer on a small named subset (MEMCHECK_QUICK below: captured graphs,
#               misaligned views, a plan rebuilt after a capture); a runtime whose sanitizer
#               refuses the device is a "skipped" line, not a failure;
#   training    EMAHook on cuda:0 (the fused plan ran, no host sync, MMEngine's recurrence);
#   bench       one short table; a benchmark prints, it never fails on speed (nor on its limit);
#   sharded nccl  the multi-process sharded tests (tests/test_fsdp*.py, tests/test_sharded*.py,
#               those present) under NCCL (MINIMM_DIST_BACKEND=nccl, tests/dist_utils.py), one
#               GPU per rank: only where nvidia-smi lists two GPUs or more. Elsewhere (the lent
#               machine has one) its limit is 0 and its summary line says why it was skipped; with
#               two GPUs its 90 s come on top of the budgets below (the 300 s are the one-GPU loan's).
# `--full` (about 10 minutes: a second run once the default passed) adds the whole memcheck list,
# AMP resume and SyncBuffersHook over NCCL, the CUDA cases of the model tests, the CPU/CUDA op
# suites (they need hypothesis), every benchmark and the device reads per iteration.
# `--dry-run` prints the steps of either size with their limits and `total: N s`, and runs nothing.
#
# Every step runs under its own limit within the run's budget (the sum of the limits): a hang
# costs one step, and the summary (one line per step: result, seconds), printed last, always comes.
# $OUT (default /tmp/minimm_gpu_check/out) gets gpu_check.log, summary.txt, backend.json and
# bench.txt; the build folder, pytest's and hypothesis's caches go under /tmp.
# Usage: bash tests/gpu_check.sh [--full] [--dry-run]      (PYTHON=... for another interpreter)
set -uo pipefail
cd "$(dirname "$0")/.."
full=0 dry=0
for arg in "$@"; do
    case $arg in
        --full) full=1 ;;
        --dry-run) dry=1 ;;
        *) echo "gpu_check.sh: unknown argument $arg (allowed: --full, --dry-run)"; exit 2 ;;
    esac
done

MEMCHECK_QUICK='graph_replay_equals_the_eager_step or rebuilt_after_a_capture or pack_plan_graph_replay or misaligned_views'
MEMCHECK_FULL='replay or list_op or misaligned or captured'
# name | limit in seconds | hard (a failure fails the run) or soft (benchmarks) | function below
if [ "$full" = 1 ]; then
    STEPS=('preflight|20|hard|-' 'build|140|hard|run_build' 'cuda ops|60|hard|run_cuda_ops'
           'memcheck|90|hard|run_memcheck_full' 'training|45|hard|run_training_full'
           'cuda cases|25|hard|run_cuda_cases' 'op suites|60|hard|run_op_suites'
           'bench ema|30|soft|run_bench_ema_full' 'bench hook|25|soft|run_bench_hook'
           'bench pack|20|soft|run_bench_pack' 'device reads|25|hard|run_device_reads'
           'bench syncs|45|soft|run_bench_syncs')
else
    STEPS=('preflight|20|hard|-' 'build|140|hard|run_build' 'cuda ops|45|hard|run_cuda_ops'
           'memcheck|45|hard|run_memcheck_quick' 'training|25|hard|run_training'
           'bench ema|20|soft|run_bench_ema')
fi
# The NCCL step's limit: 90 s with two GPUs or more, 0 (skipped, nothing started) with fewer.
GPUS=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU')
SHARDED_S=0
[ "$GPUS" -ge 2 ] && SHARDED_S=90
STEPS+=("sharded nccl|$SHARDED_S|hard|run_sharded_nccl")
BUDGET_S=0
for s in "${STEPS[@]}"; do IFS='|' read -r _ limit _ _ <<< "$s"; BUDGET_S=$((BUDGET_S + limit)); done

if [ "$dry" = 1 ]; then
    for s in "${STEPS[@]}"; do
        IFS='|' read -r name limit kind fn <<< "$s"
        printf 'step %-13s limit %4d s  %s  %s\n' "$name" "$limit" "$kind" "$fn"
    done
    echo "total: $BUDGET_S s"
    exit 0
fi

PYTHON=${PYTHON:-python3}
WORK=${TMPDIR:-/tmp}/minimm_gpu_check
RESULTS=${OUT:-$WORK/out}
mkdir -p "$RESULTS" "$WORK"
exec > >(tee "$RESULTS/gpu_check.log") 2>&1
export MINIMM_REQUIRE_EXT=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export TORCH_EXTENSIONS_DIR="$WORK/torch_extensions" HYPOTHESIS_STORAGE_DIRECTORY="$WORK/hypothesis"
export PYTHONDONTWRITEBYTECODE=1 PYTEST_ADDOPTS="-p no:cacheprovider ${PYTEST_ADDOPTS:-}"
if [ -z "${CUDA_HOME:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then export CUDA_HOME=/usr/local/cuda; fi
[ -n "${CUDA_HOME:-}" ] && export PATH="$CUDA_HOME/bin:$PATH"
export MAX_JOBS=${MAX_JOBS:-$(nproc)} PYTHON RESULTS MEMCHECK_QUICK MEMCHECK_FULL
start=$(date +%s)
rows=()     # "step|result|seconds" for the summary
failed=0

summary() {
    {
        printf '\n== summary (%s s in all, budget %s s)\n' "$(( $(date +%s) - start ))" "$BUDGET_S"
        for row in "${rows[@]}"; do IFS='|' read -r name result secs <<< "$row"; printf '%-13s %-44s %s s\n' "$name" "$result" "$secs"; done
    } | tee "$RESULTS/summary.txt"
}

# ---- the steps' commands (run under `timeout` in a child bash, hence exported) ----------------
run_build() {
    "$PYTHON" -c 'import json, sys, minimm.ops as ops
info = ops.backend_info(); json.dump(info, open(sys.argv[1], "w"), indent=1); print(json.dumps(info))
assert info["cuda"]["backend"] == "native", info' "$RESULTS/backend.json"
}
# pytest-timeout, where installed, ends one hanging test instead of the whole step.
pytest_() { "$PYTHON" -m pytest -q -rs $PYTEST_TIMEOUT "$@"; }
run_cuda_ops() { pytest_ tests/test_ops_cuda.py tests/test_ops_cuda_equal.py; }
# Without the caching allocator every allocation is its own, so memcheck sees overruns. Some
# runtimes' sanitizer refuses the device ("Device not supported", then error 999 at the first
# allocation): exit code 75, a skip.
memcheck() {
    [ -n "$SANITIZER" ] || { echo "compute-sanitizer not found (PATH, CUDA_HOME/bin)"; return 75; }
    local log rc
    log=$(mktemp)
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 "$SANITIZER" --tool memcheck --error-exitcode 1 --target-processes all \
        "$PYTHON" -m pytest -q tests/test_ops_cuda_equal.py tests/test_ops_cuda.py -k "$1" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    grep -qi "device not supported" "$log" && rc=75
    rm -f "$log"
    return "$rc"
}
run_memcheck_quick() { memcheck "$MEMCHECK_QUICK"; }
run_memcheck_full() { memcheck "$MEMCHECK_FULL"; }
run_training() { pytest_ tests/test_gpu_training.py -k ema_hook; }
run_training_full() { pytest_ tests/test_gpu_training.py; }
run_cuda_cases() { pytest_ tests/test_base_model.py tests/test_optim_wrapper.py -k cuda; }
run_op_suites() {
    pytest_ tests/test_ops_ema.py tests/test_ops_pack.py tests/test_ops_schema.py tests/test_ops_agree.py \
        tests/test_averaged_model.py tests/test_ops_power_weight.py
}
# The sync-free step on a GPU: set_sync_debug_mode's count of the CUDA waits per iteration.
run_device_reads() { pytest_ tests/test_device_reads.py -k cuda; }
# The sharded tests present, under NCCL; exit 76 (a skip) when there are none.
run_sharded_nccl() {
    local files=() f
    for f in tests/test_fsdp*.py tests/test_sharded*.py; do [ -e "$f" ] && files+=("$f"); done
    [ "${#files[@]}" -gt 0 ] || { echo "no tests/test_fsdp*.py or tests/test_sharded*.py here"; return 76; }
    MINIMM_DIST_BACKEND=nccl pytest_ "${files[@]}"
}
bench() { "$PYTHON" -m minimm bench "$@" >> "$RESULTS/bench.txt" 2>&1; }
run_bench_ema() { bench ema --device cuda --workloads small resnet50 --rounds 5 --copies ''; }
run_bench_ema_full() { bench ema --device cuda --workloads resnet50 small resnet50_bf16; }
run_bench_hook() { bench ema-hook --rounds 2; }
run_bench_pack() { bench pack --device cuda; }
run_bench_syncs() { bench syncs; }
export -f run_build pytest_ run_cuda_ops memcheck run_memcheck_quick run_memcheck_full run_training \
    run_training_full run_cuda_cases run_op_suites run_device_reads bench run_bench_ema run_bench_ema_full \
    run_bench_hook run_bench_pack run_bench_syncs run_sharded_nccl

# step NAME LIMIT KIND FUNCTION: runs FUNCTION under `timeout`. A soft step (a benchmark) that
# fails or runs out of time says so in the summary and fails nothing.
step() {
    local name=$1 limit=$2 kind=$3 fn=$4
    if [ "$limit" = 0 ]; then  # the NCCL step with fewer than two GPUs
        echo; echo "== $name: skipped, $GPUS GPU here, it needs 2"
        rows+=("$name|skipped: $GPUS GPU here, it needs 2|0")
        return
    fi
    echo; echo "== $name (limit $limit s, at $(( $(date +%s) - start )) s)"
    local t0=$(date +%s) rc result
    timeout --kill-after=5 "$limit" bash -c "$fn"; rc=$?
    case $rc in
        0) result=passed ;;
        124|137) result="TIMED OUT after $limit s" ;;
        75) result="skipped: no sanitizer for this device"; rc=0 ;;
        76) result="skipped: no sharded tests in this checkout"; rc=0 ;;
        *) result="FAILED (exit $rc)" ;;
    esac
    if [ "$rc" -ne 0 ]; then
        if [ "$kind" = soft ]; then result="$result: a benchmark, not a failure"; else failed=1; fi
    fi
    rows+=("$name|$result|$(( $(date +%s) - t0 ))")
}

# ---- preflight: one line of versions, then what is missing, in seconds --------------------------
SANITIZER=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
[ -x "$SANITIZER" ] || SANITIZER=
export SANITIZER
NVCC=$( (nvcc --version 2>/dev/null || echo "release missing,") | sed -n 's/.*release \([^,]*\),.*/\1/p')
missing=()
command -v nvidia-smi >/dev/null || missing+=("nvidia-smi (no NVIDIA driver)")
[ "${NVCC:-missing}" = missing ] && missing+=("nvcc (set CUDA_HOME to the CUDA toolkit)")
# One interpreter start for all the versions (importing torch takes seconds): the line's middle
# part, then on a second line the GPU's name or "none".
# Its limit is the preflight step's (PREFLIGHT_S overrides it: a loaded machine imports torch slowly).
IFS='|' read -r _ preflight_s _ _ <<< "${STEPS[0]}"
facts=$(timeout "${PREFLIGHT_S:-$preflight_s}" "$PYTHON" - <<'PY' 2>&1
import importlib.metadata as meta, importlib.util, shutil, sys
def version(module, dist):
    try:
        return meta.version(dist) if importlib.util.find_spec(module) else 'missing'
    except meta.PackageNotFoundError:
        return 'missing'
gpu = 'none'
try:
    import torch
    torch_line = f'{torch.__version__} CUDA {torch.version.cuda}'
    if torch.cuda.is_available():
        gpu = torch.cuda.get_device_name(0) + ' (sm %d%d)' % torch.cuda.get_device_capability(0)
except ImportError:
    torch_line = 'missing'
ninja = version('ninja', 'ninja') if importlib.util.find_spec('ninja') else ('on PATH' if shutil.which('ninja') else 'missing')
print(f'python {sys.version.split()[0]} | torch {torch_line} | GPU {gpu} | ninja {ninja} | '
      f'pytest {version("pytest", "pytest")} | hypothesis {version("hypothesis", "hypothesis")} | '
      f'pytest-timeout {version("pytest_timeout", "pytest-timeout")}')
print(gpu)
PY
) || { echo "$facts"; echo "gpu_check.sh: $PYTHON could not report its versions within ${PREFLIGHT_S:-$preflight_s} s"; exit 1; }
gpu=$(tail -1 <<< "$facts")
echo "preflight: $(head -1 <<< "$facts") | nvcc ${NVCC:-missing} | compute-sanitizer ${SANITIZER:-missing}" \
     "| CUDA_HOME=${CUDA_HOME:-unset}"
[[ "$facts" == *"torch missing"* ]] && missing+=("torch")
[ "${gpu:-none}" = none ] && missing+=("a CUDA device: torch.cuda.is_available() is False (no CUDA device)")
[[ "$facts" == *"ninja missing"* ]] && missing+=("ninja (the extension's build needs it)")
[[ "$facts" == *"pytest missing"* ]] && missing+=("pytest")
[ "$full" = 1 ] && [[ "$facts" == *"hypothesis missing"* ]] && missing+=("hypothesis (the op suites of --full)")
if [ "${#missing[@]}" -gt 0 ]; then
    printf 'gpu_check.sh: missing: %s\n' "${missing[@]}"
    reason="missing ${#missing[@]}: stopped"
    [[ "${missing[*]}" == *"no CUDA device"* ]] && reason="no CUDA device: stopped"
    rows+=("preflight|$reason|$(( $(date +%s) - start ))")
    summary
    exit 1
fi
rows+=("preflight|passed|$(( $(date +%s) - start ))")
if [ -z "${TORCH_CUDA_ARCH_LIST:-}" ]; then
    TORCH_CUDA_ARCH_LIST=$("$PYTHON" -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability(0))')
    export TORCH_CUDA_ARCH_LIST
fi
PYTEST_TIMEOUT=
[[ "$facts" != *"pytest-timeout missing"* ]] && PYTEST_TIMEOUT=--timeout=60
export PYTEST_TIMEOUT
echo "minimm GPU check, $(date -u +%Y-%m-%d), $gpu" > "$RESULTS/bench.txt"

# ---- the steps ---------------------------------------------------------------------------------
for s in "${STEPS[@]:1}"; do
    IFS='|' read -r name limit kind fn <<< "$s"
    step "$name" "$limit" "$kind" "$fn"
    if [[ "$name" == build && "${rows[-1]}" != build\|passed* ]]; then summary; exit 1; fi
done

echo; echo "== benchmark tables (also in $RESULTS/bench.txt)"
cat "$RESULTS/bench.txt"
summary
exit $failed
