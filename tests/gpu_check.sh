#!/usr/bin/env bash
# The GPU check: on a CUDA machine, prove that minimm's CUDA kernels are right and that training
# with EMAHook runs the fused CUDA plan. Written for the machine a session is lent as it is: the
# checkout without its virtual environment, `python3` with torch (2.11 or newer), pytest,
# hypothesis and ninja installed, no network, and a 10-minute limit per command that returns at
# most 8 files, none deeper than one folder under $OUT. Budget: 10 minutes with the build (BUDGET_S
# below; the step limits add up to less), so that it fits a 15-minute machine loan with its start.
#   preflight   one line: python, torch and its CUDA, the GPU, nvcc, ninja, pytest, hypothesis,
#               pytest-timeout, compute-sanitizer, CUDA_HOME; stops here without a CUDA device;
#   build       the extension with its CUDA kernels (MINIMM_REQUIRE_EXT=1: a build problem is an
#               error, not a silent fallback), for this GPU's architecture only;
#   cuda ops    tests/test_ops_cuda*.py first, without -x, so that one failure hides no other:
#               the CUDA kernels against the CPU ones, pack and unpack_ of every dtype at several
#               scales among them (SyncBuffersHook on one GPU is world size 1 and packs nothing);
#   memcheck    short, under compute-sanitizer, right after; a runtime whose sanitizer refuses
#               the device is a "skipped" line, not a failure;
#   training    EMAHook on cuda:0, AmpOptimWrapper fp16 resume, SyncBuffersHook over NCCL, the
#               CUDA cases of the model tests;
#   op suites   the CPU/CUDA op suites on this build;
#   benchmarks  short tables, kept in bench.txt, and the device reads per iteration (bench syncs),
#               last.
# Every step has its own time limit and the whole run a deadline (BUDGET_S, default 590 s): a
# hang costs one step, and the summary table (step, result, seconds), printed last, always comes.
# $OUT (default /tmp/minimm_gpu_check/out) gets only gpu_check.log, bench.txt, summary.txt and
# backend.json; the build folder, pytest's and hypothesis's caches go under /tmp.
# Usage: bash tests/gpu_check.sh        (PYTHON=... to choose another interpreter)
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
WORK=${TMPDIR:-/tmp}/minimm_gpu_check
RESULTS=${OUT:-$WORK/out}
BUDGET_S=${BUDGET_S:-590}
mkdir -p "$RESULTS" "$WORK"
exec > >(tee "$RESULTS/gpu_check.log") 2>&1
export MINIMM_REQUIRE_EXT=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export TORCH_EXTENSIONS_DIR="$WORK/torch_extensions" HYPOTHESIS_STORAGE_DIRECTORY="$WORK/hypothesis"
export PYTHONDONTWRITEBYTECODE=1 PYTEST_ADDOPTS="-p no:cacheprovider ${PYTEST_ADDOPTS:-}"
if [ -z "${CUDA_HOME:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then export CUDA_HOME=/usr/local/cuda; fi
[ -n "${CUDA_HOME:-}" ] && export PATH="$CUDA_HOME/bin:$PATH"
export MAX_JOBS=${MAX_JOBS:-$(nproc)}
start=$(date +%s)
rows=()     # "step|result|seconds" for the summary table
failed=0

summary() {
    {
        printf '\n== summary (%s s in all)\n%-12s %-40s %s\n' "$(( $(date +%s) - start ))" step result seconds
        for row in "${rows[@]}"; do IFS='|' read -r name result secs <<< "$row"; printf '%-12s %-40s %s\n' "$name" "$result" "$secs"; done
    } | tee "$RESULTS/summary.txt"
}

# step NAME LIMIT_S COMMAND...: runs COMMAND under `timeout`, within what is left of the budget.
step() {
    local name=$1 limit=$2; shift 2
    local left=$(( BUDGET_S - ($(date +%s) - start) ))
    if [ "$left" -lt 20 ]; then rows+=("$name|not run: out of time budget|0"); failed=1; return; fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo; echo "== $name (limit $limit s, at $(( $(date +%s) - start )) s)"
    local t0=$(date +%s) rc result
    timeout --kill-after=10 "$limit" "$@"; rc=$?
    case $rc in
        0) result=passed ;;
        124|137) result="TIMED OUT after $limit s"; failed=1 ;;
        *) result="FAILED (exit $rc)"; failed=1 ;;
    esac
    rows+=("$name|$result|$(( $(date +%s) - t0 ))")
}

# ---- preflight: one line, then stop without a GPU --------------------------------------------
command -v "$PYTHON" >/dev/null || { echo "gpu_check.sh: no $PYTHON on PATH (set PYTHON=...)"; exit 1; }
SANITIZER=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
[ -x "$SANITIZER" ] || SANITIZER=
NVCC=$( (nvcc --version 2>/dev/null || echo "release missing,") | sed -n 's/.*release \([^,]*\),.*/\1/p')
# One interpreter start for all the versions (importing torch takes seconds); prints the line's
# middle part, then on a second line the GPU's name or "none".
facts=$("$PYTHON" - <<'PY' 2>&1
import importlib.metadata as meta, importlib.util, sys
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
print(f'python {sys.version.split()[0]} | torch {torch_line} | GPU {gpu} | ninja {version("ninja", "ninja")} | '
      f'pytest {version("pytest", "pytest")} | hypothesis {version("hypothesis", "hypothesis")} | '
      f'pytest-timeout {version("pytest_timeout", "pytest-timeout")}')
print(gpu)
PY
) || { echo "$facts"; echo "gpu_check.sh: $PYTHON could not report its versions"; exit 1; }
gpu=$(tail -1 <<< "$facts")
echo "preflight: $(head -1 <<< "$facts") | nvcc ${NVCC:-missing} | compute-sanitizer ${SANITIZER:-missing}" \
     "| CUDA_HOME=${CUDA_HOME:-unset}"
if [ "${gpu:-none}" = none ]; then
    echo "gpu_check.sh: no CUDA device (torch.cuda.is_available() is False); run this on a GPU machine"
    rows+=("preflight|no CUDA device: stopped|$(( $(date +%s) - start ))")
    summary
    exit 1
fi
rows+=("preflight|passed|$(( $(date +%s) - start ))")
if [ -z "${TORCH_CUDA_ARCH_LIST:-}" ]; then
    TORCH_CUDA_ARCH_LIST=$("$PYTHON" -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability(0))')
    export TORCH_CUDA_ARCH_LIST
fi
# pytest-timeout, where installed, ends one hanging test instead of the whole step.
PYTEST=("$PYTHON" -m pytest -q -rs)
[[ "$facts" != *"pytest-timeout missing"* ]] && PYTEST+=(--timeout=60)

# ---- the steps ---------------------------------------------------------------------------------
# Limits: 200 + 80 + 60 + 40 + 25 + 45 + 20 + 20 + 15 + 25 + 50 = 580 s, within BUDGET_S.
step build 200 "$PYTHON" -c 'import json, sys, minimm.ops as ops
info = ops.backend_info(); json.dump(info, open(sys.argv[1], "w"), indent=1); print(json.dumps(info))
assert info["cuda"]["backend"] == "native", info' "$RESULTS/backend.json"
if [[ "${rows[-1]}" != build\|passed* ]]; then summary; exit 1; fi

step "cuda ops" 80 "${PYTEST[@]}" tests/test_ops_cuda.py tests/test_ops_cuda_equal.py

# ---- memcheck: some runtimes' sanitizer refuses the device ("Device not supported", then
# error 999 at the first allocation); that is a skip, not a failure.
if [ -z "$SANITIZER" ]; then
    echo "compute-sanitizer not found (PATH, CUDA_HOME/bin): skipped"
    rows+=("memcheck|skipped: no compute-sanitizer|0")
else
    probe=$(PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 30 "$SANITIZER" --tool memcheck "$PYTHON" -c \
        'import torch; torch.zeros(1, device="cuda")' 2>&1)
    if [ $? -ne 0 ] || grep -qi "not supported" <<< "$probe"; then
        echo "$probe" | tail -3
        echo "sanitizer unavailable on this runtime: skipped"
        rows+=("memcheck|skipped: sanitizer unavailable on this runtime|0")
    else
        # Short: graph replays (their captured tables), the list ops under capture, the list op on
        # every dtype pair aligned or not, and misaligned plans. Without the caching allocator
        # every allocation is its own, so memcheck sees overruns.
        step memcheck 60 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 "$SANITIZER" --tool memcheck \
            --error-exitcode 1 --target-processes all "$PYTHON" -m pytest -q \
            tests/test_ops_cuda_equal.py tests/test_ops_cuda.py \
            -k "replay or list_op or misaligned or captured"
    fi
fi

step training 40 "${PYTEST[@]}" tests/test_gpu_training.py
step "cuda cases" 25 "${PYTEST[@]}" tests/test_base_model.py tests/test_optim_wrapper.py -k cuda
step "op suites" 45 "${PYTEST[@]}" tests/test_ops_ema.py tests/test_ops_pack.py \
    tests/test_ops_schema.py tests/test_ops_agree.py tests/test_averaged_model.py
echo "minimm GPU check, $(date -u +%Y-%m-%d), $gpu" > "$RESULTS/bench.txt"
step "bench ema" 20 "$PYTHON" -m minimm bench ema --device cuda \
    --workloads resnet50 small resnet50_bf16 >> "$RESULTS/bench.txt" 2>&1
step "bench hook" 20 "$PYTHON" -m minimm bench ema-hook --rounds 2 >> "$RESULTS/bench.txt" 2>&1
step "bench pack" 15 "$PYTHON" -m minimm bench pack --device cuda >> "$RESULTS/bench.txt" 2>&1
# The sync-free step on a GPU: set_sync_debug_mode's count of the CUDA waits per iteration.
step "device reads" 25 "${PYTEST[@]}" tests/test_device_reads.py -k cuda
step "bench syncs" 50 "$PYTHON" -m minimm bench syncs >> "$RESULTS/bench.txt" 2>&1

echo; echo "== benchmark tables (also in $RESULTS/bench.txt)"
cat "$RESULTS/bench.txt"
summary
exit $failed
