#!/usr/bin/env bash
# Line coverage of csrc/*.cu and multi_tensor_apply.cuh under the emulated-device lane: builds the
# gcov-instrumented emulator (build.py --coverage, -O0), runs the lane's tests on it, and prints
# gcov's summary for the kernel sources.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-.venv/bin/python}
preload="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
export ASAN_OPTIONS=detect_leaks=0
library=$(LD_PRELOAD=$preload "$PYTHON" tests/cuda_emu/build.py --coverage 2>/dev/null | tail -1)
objects=$(dirname "$library")
rm -f "$objects"/*.gcda
LD_PRELOAD=$preload MINIMM_EXT_LIBRARY=$library OMP_NUM_THREADS=1 \
    "$PYTHON" -m pytest -q -p no:cacheprovider --capture=sys \
    tests/test_cuda_emu.py tests/test_ops_cuda_equal.py \
    2>/dev/null | tail -1
cd "$objects"
gcov -o . ema_device.o pack_device.o 2>/dev/null \
    | grep -A1 "^File '.*\(ema_kernel.cu\|pack_kernel.cu\|multi_tensor_apply.cuh\)'" | grep -v '^--'
