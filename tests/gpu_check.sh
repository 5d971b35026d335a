#!/usr/bin/env bash
# The GPU check: on a CUDA machine, prove end to end that training with EMAHook runs minimm's fused
# CUDA plan. Budget: under 5 minutes on an H200 (the cold CUDA build is most of it).
#   1. build the extension with its CUDA kernels (MINIMM_REQUIRE_EXT=1: any build problem is an
#      error, not a silent fallback);
#   2. the CUDA op tests (native == reference, opcheck, no host sync, CUDA graphs, layouts, device
#      mismatches) and the GPU training tests (EMAHook on cuda:0 for the three averaging types:
#      fused plan, no host sync, weights equal to MMEngine's recurrence; AmpOptimWrapper fp16
#      resume; SyncBuffersHook over NCCL), then the tests that skip without CUDA and the op suites;
#   3. the three benchmarks on the GPU, their tables written to a file that is printed at the end.
# Usage: bash tests/gpu_check.sh [results file]   (PYTHON=... to choose the interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
RESULTS=${1:-${TMPDIR:-/tmp}/minimm_gpu_check.txt}
export MINIMM_REQUIRE_EXT=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ -z "${CUDA_HOME:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then export CUDA_HOME=/usr/local/cuda; fi
export MAX_JOBS=${MAX_JOBS:-$(nproc)}
start=$(date +%s)
step() { echo; echo "== $1 ($(( $(date +%s) - start )) s)"; }

step "CUDA device"
"$PYTHON" -c 'import sys, torch
if not torch.cuda.is_available():
    sys.exit("gpu_check.sh: no CUDA device (torch.cuda.is_available() is False, torch CUDA build: "
             f"{torch.version.cuda}); run this on a GPU machine")
print(torch.cuda.get_device_name(0), "| torch", torch.__version__, "| CUDA", torch.version.cuda)'

step "build (JIT, with CUDA)"
"$PYTHON" -c 'import json, minimm.ops as ops
info = ops.backend_info(); print(json.dumps(info, indent=1))
assert info["cuda"]["backend"] == "native", info'

step "CUDA op tests and training on cuda:0"
"$PYTHON" -m pytest -q -rs tests/test_ops_cuda.py tests/test_gpu_training.py

step "tests that skip without CUDA, and the op suites on this build"
"$PYTHON" -m pytest -q -rs tests/test_base_model.py tests/test_optim_wrapper.py -k cuda
"$PYTHON" -m pytest -q -rs tests/test_ops_ema.py tests/test_ops_pack.py tests/test_ops_schema.py \
    tests/test_averaged_model.py

step "benchmarks (tables in $RESULTS)"
{
    echo "minimm GPU check, $(date -u +%Y-%m-%d), $("$PYTHON" -c 'import torch; print(torch.cuda.get_device_name(0))')"
    "$PYTHON" -m minimm bench ema --device cuda
    "$PYTHON" -m minimm bench ema-hook --rounds 2
    "$PYTHON" -m minimm bench pack --device cuda
} > "$RESULTS"
cat "$RESULTS"

step "done"
