#!/usr/bin/env bash
# The GPU check: on a CUDA machine, prove end to end that minimm's CUDA kernels are right and that
# training with EMAHook runs the fused CUDA plan. Runs unchanged on a bare GPU machine: the
# checkout without its virtual environment, `python3` with torch installed, no network, nothing
# installed. Budget: under 5 minutes on an H200, the cold CUDA build included.
#   1. the interpreter, torch and the GPU;
#   2. build the extension with its CUDA kernels (MINIMM_REQUIRE_EXT=1: any build problem is an
#      error, not a silent fallback), for this GPU's architecture only;
#   3. the CUDA op tests (tests/test_ops_cuda.py: native within the bound of the fallback,
#      misaligned views of every dtype, a side stream, no raw synchronisation, one kernel per plan
#      step, CUDA graphs, a mixed-dtype mirrored pair, a second GPU if present), then again under
#      compute-sanitizer memcheck (without the tests that time or profile);
#   4. the GPU training tests (EMAHook on cuda:0 for the three averaging types, AmpOptimWrapper
#      fp16 resume, SyncBuffersHook over NCCL), the tests that skip without CUDA, the op suites;
#   5. the benchmarks; their short tables are printed last (and kept in bench.txt).
# Everything it writes goes to $OUT when set (else ${TMPDIR:-/tmp}/minimm_gpu_check): the log of
# the whole run (gpu_check.log), the benchmark tables (bench.txt), the build folder, the caches.
# Usage: bash tests/gpu_check.sh        (PYTHON=... to choose another interpreter)
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
RESULTS=${OUT:-${TMPDIR:-/tmp}/minimm_gpu_check}
mkdir -p "$RESULTS"
exec > >(tee "$RESULTS/gpu_check.log") 2>&1
export MINIMM_REQUIRE_EXT=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# The build, pytest's and hypothesis's caches and the bytecode go under $RESULTS, not the checkout.
export TORCH_EXTENSIONS_DIR="$RESULTS/torch_extensions" HYPOTHESIS_STORAGE_DIRECTORY="$RESULTS/hypothesis"
export PYTHONDONTWRITEBYTECODE=1 PYTEST_ADDOPTS="-p no:cacheprovider ${PYTEST_ADDOPTS:-}"
if [ -z "${CUDA_HOME:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then export CUDA_HOME=/usr/local/cuda; fi
export MAX_JOBS=${MAX_JOBS:-$(nproc)}
start=$(date +%s)
failed=()
step() { echo; echo "== $1 ($(( $(date +%s) - start )) s)"; }
run() {  # run "name" command...: a failing step is reported at the end, the others still run
    local name=$1; shift
    "$@" || failed+=("$name")
}

step "interpreter, torch and GPU"
command -v "$PYTHON" || { echo "gpu_check.sh: no $PYTHON on PATH (set PYTHON=...)"; exit 1; }
"$PYTHON" -c 'import sys, torch
print(sys.executable, sys.version.split()[0], "| torch", torch.__version__, "| CUDA", torch.version.cuda)
if not torch.cuda.is_available():
    sys.exit("gpu_check.sh: no CUDA device (torch.cuda.is_available() is False); run this on a GPU machine")
for i in range(torch.cuda.device_count()):
    print(f"cuda:{i}", torch.cuda.get_device_name(i), "capability %d.%d" % torch.cuda.get_device_capability(i))' \
    || exit 1
if [ -z "${TORCH_CUDA_ARCH_LIST:-}" ]; then
    TORCH_CUDA_ARCH_LIST=$("$PYTHON" -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability(0))')
    export TORCH_CUDA_ARCH_LIST
fi
echo "CUDA_HOME=${CUDA_HOME:-unset} TORCH_CUDA_ARCH_LIST=$TORCH_CUDA_ARCH_LIST MAX_JOBS=$MAX_JOBS"

step "build (JIT, with CUDA, into $TORCH_EXTENSIONS_DIR)"
"$PYTHON" -c 'import json, minimm.ops as ops
info = ops.backend_info(); print(json.dumps(info, indent=1))
assert info["cuda"]["backend"] == "native", info' || exit 1

step "CUDA op tests"
run "CUDA op tests" "$PYTHON" -m pytest -q -rs tests/test_ops_cuda.py

step "CUDA op tests under compute-sanitizer memcheck"
SANITIZER=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
if [ -x "$SANITIZER" ]; then
    run "compute-sanitizer memcheck" "$SANITIZER" --tool memcheck --error-exitcode 1 --target-processes all \
        "$PYTHON" -m pytest -q -x tests/test_ops_cuda.py -k "not busy and not one_kernel and not side_stream"
else
    echo "compute-sanitizer not found (looked on PATH and in CUDA_HOME): SKIPPED"
    failed+=("compute-sanitizer missing")
fi

step "training on cuda:0, tests that skip without CUDA, the op suites on this build"
run "GPU training tests" "$PYTHON" -m pytest -q -rs tests/test_gpu_training.py
run "CUDA cases of the model tests" "$PYTHON" -m pytest -q -rs tests/test_base_model.py tests/test_optim_wrapper.py -k cuda
run "op suites" "$PYTHON" -m pytest -q -rs tests/test_ops_ema.py tests/test_ops_pack.py tests/test_ops_schema.py \
    tests/test_ops_agree.py tests/test_averaged_model.py

step "benchmarks"
{
    echo "minimm GPU check, $(date -u +%Y-%m-%d), $("$PYTHON" -c 'import torch; print(torch.cuda.get_device_name(0))')"
    "$PYTHON" -m minimm bench ema --device cuda --workloads resnet50 small resnet50_bf16
    "$PYTHON" -m minimm bench ema-hook --rounds 2
    "$PYTHON" -m minimm bench pack --device cuda
} > "$RESULTS/bench.txt" 2>&1 || failed+=("benchmarks")

step "done"
echo "log: $RESULTS/gpu_check.log"
if [ ${#failed[@]} -gt 0 ]; then echo "FAILED: ${failed[*]}"; else echo "all steps passed"; fi
echo
echo "== benchmark tables (also in $RESULTS/bench.txt)"
cat "$RESULTS/bench.txt"
[ ${#failed[@]} -eq 0 ]
