#!/usr/bin/env bash
# CI's CUDA compile lane: build the extension *with* the CUDA kernels into a temporary folder,
# on a machine without a GPU, load it (registration only, no kernel runs), and fail loudly on any
# error. Nothing is installed.
# Needs a CUDA build of torch and the CUDA toolkit (CUDA_HOME, default /usr/local/cuda).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
export PATH="$CUDA_HOME/bin:$PATH"
export MINIMM_BUILD_EXT=1 MINIMM_WITH_CUDA=1 MAX_JOBS=${MAX_JOBS:-2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
start=$(date +%s)
"$PYTHON" setup.py -q build_ext --build-temp "$out/temp" --build-lib "$out/lib"
so=$(find "$out/lib" -name '_C*.so')
test -n "$so" || { echo "compile_cuda.sh: no extension was produced" >&2; exit 1; }
readelf -S "$so" | grep -q nv_fatbin || { echo "compile_cuda.sh: $so holds no CUDA code (no .nv_fatbin)" >&2; exit 1; }
# Loading needs no GPU and runs the op and class registration, so a registration bug fails here too.
"$PYTHON" -c "import sys, torch; torch.ops.load_library(sys.argv[1])
for op in ('minimm::ema_update_', 'minimm::pack', 'minimm::unpack_'):
    assert torch._C._dispatch_has_kernel_for_dispatch_key(op, 'CUDA'), f'no CUDA kernel registered for {op}'
assert torch.classes.minimm.EMAPlan and torch.classes.minimm.PackPlan" "$so"
echo "compile_cuda.sh: CUDA build OK in $(( $(date +%s) - start )) s ($(basename "$so"))"
