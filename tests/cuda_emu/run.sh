#!/usr/bin/env bash
# CI's emulated-device lane: build the emulated CUDA device (build.py), then run the CUDA tests on
# it in a process that loads it as minimm's native library, under AddressSanitizer and UBSan.
#   bash tests/cuda_emu/run.sh [pytest arguments]      (PYTHON=... for another interpreter)
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-.venv/bin/python}
# The sanitizers' runtimes must be loaded before anything else in the (uninstrumented) interpreter.
preload="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
start=$SECONDS
library=$(LD_PRELOAD=$preload "$PYTHON" tests/cuda_emu/build.py \
    2> >(grep -v 'swapcontext\|No CUDA runtime' >&2) | tail -1)
echo "emulated device built in $((SECONDS - start)) s: $library"
# One thread: the CPU kernels then run as the emulator does, and the lane keeps to one core.
# --capture=sys: a sanitizer writes its report to file descriptor 2 and ends the process, so
# pytest must not hold that descriptor (its default capture would swallow the report).
# The equality tests run three times: blocks and threads forward, reversed, then shuffled
# (MINIMM_EMU_ORDER, tests/cuda_emu/device.py); the emulator's own tests once.
for order in 0 1 2; do
    files=(tests/test_ops_cuda_equal.py)
    [ "$order" = 0 ] && files=(tests/test_cuda_emu.py tests/test_ops_cuda_equal.py)
    echo "== block and thread order $order (0 forward, 1 reversed, 2 shuffled)"
    LD_PRELOAD=$preload MINIMM_EXT_LIBRARY=$library OMP_NUM_THREADS=1 MINIMM_EMU_ORDER=$order \
        "$PYTHON" -m pytest -q -p no:cacheprovider --capture=sys "${files[@]}" "$@" \
        2> >(grep -v 'swapcontext' >&2)
done
