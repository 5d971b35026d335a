#!/usr/bin/env bash
# The GPU check: on a CUDA machine, build the extension with its CUDA
# kernels (MINIMM_REQUIRE_EXT=1: any build problem is an error, not a silent fallback), run the CUDA
# op tests (native == reference on many shapes and dtypes; no host synchronisation in a plan step
# under torch.cuda.set_sync_debug_mode("error"); a plan step captured and replayed in a CUDA graph)
# plus the op and averaged-model suites, then the EMA and pack benchmarks on the GPU.
# Budget: under 5 minutes (the cold CUDA build is most of it).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
export MINIMM_REQUIRE_EXT=1
if [ -z "${CUDA_HOME:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then export CUDA_HOME=/usr/local/cuda; fi
export MAX_JOBS=${MAX_JOBS:-$(nproc)}
start=$(date +%s)
step() { echo; echo "== $1 ($(( $(date +%s) - start )) s)"; }

step "build (JIT, with CUDA)"
"$PYTHON" -c 'import json, torch, minimm.ops as ops
assert torch.cuda.is_available(), "no CUDA device"
info = ops.backend_info(); print(json.dumps(info, indent=1))
assert info["cuda"]["backend"] == "native", info'

step "CUDA op tests, then the op and averaged-model suites"
"$PYTHON" -m pytest -q tests/test_ops_cuda.py
"$PYTHON" -m pytest -q tests/test_ops_ema.py tests/test_ops_pack.py tests/test_averaged_model.py

step "benchmarks"
"$PYTHON" -m minimm.bench.ema --device cuda --rounds 30
"$PYTHON" -m minimm.bench.pack --device cuda --rounds 30

step "done"
