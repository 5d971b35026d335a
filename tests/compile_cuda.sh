#!/usr/bin/env bash
# CI's CUDA compile lane: build the extension *with* the CUDA kernels into a temporary folder,
# on a machine without a GPU, load it (registration only, no kernel runs), and fail loudly on any
# error. Nothing is installed.
# It also prints ptxas's registers and spills of every kernel (nvcc reads NVCC_APPEND_FLAGS) and
# fails when an EMA or pack kernel spills or needs more than 64 registers per thread: each kernel
# is compiled for one dtype pair (csrc/multi_tensor_apply.cuh) so that 4 blocks of 256 threads
# fit on an SM; a change that breaks that should fail here, not on a GPU. And it reads each EMA
# and pack kernel's launch bounds in the PTX nvcc kept (.maxntid, .minnctapersm): they must be
# kThreads and kMinBlocks of csrc/multi_tensor_apply.cuh (the emulated device ignores
# __launch_bounds__, so a kernel that lost them would pass lane 4 and run with other limits).
# Needs a CUDA build of torch and the CUDA toolkit (CUDA_HOME, default /usr/local/cuda).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
export PATH="$CUDA_HOME/bin:$PATH"
export MINIMM_BUILD_EXT=1 MINIMM_WITH_CUDA=1 MAX_JOBS=${MAX_JOBS:-2}
export NVCC_APPEND_FLAGS="${NVCC_APPEND_FLAGS:+$NVCC_APPEND_FLAGS }-Xptxas -v"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mkdir -p "$out/keep"
export NVCC_APPEND_FLAGS="$NVCC_APPEND_FLAGS --keep --keep-dir $out/keep"
start=$(date +%s)
set +e  # the build's own output, less ptxas's lines (tabled below), and the build's exit status
"$PYTHON" setup.py -q build_ext --build-temp "$out/temp" --build-lib "$out/lib" 2>&1 | tee "$out/build.log" \
    | grep -v '^ptxas info\|bytes stack frame'
status=${PIPESTATUS[0]}
set -e
[ "$status" -eq 0 ] || { echo "compile_cuda.sh: the build failed" >&2; exit 1; }
so=$(find "$out/lib" -name '_C*.so')
test -n "$so" || { echo "compile_cuda.sh: no extension was produced" >&2; exit 1; }
# Read whole before grepping: `readelf | grep -q` under pipefail fails when grep quits early.
sections=$(readelf -S "$so")
grep -q nv_fatbin <<<"$sections" || { echo "compile_cuda.sh: $so holds no CUDA code (no .nv_fatbin)" >&2; exit 1; }
# Loading needs no GPU and runs the op and class registration, so a registration bug fails here too.
"$PYTHON" -c "import sys, torch; torch.ops.load_library(sys.argv[1])
for op in ('minimm::ema_update_', 'minimm::pack', 'minimm::unpack_'):
    assert torch._C._dispatch_has_kernel_for_dispatch_key(op, 'CUDA'), f'no CUDA kernel registered for {op}'
assert torch.classes.minimm.EMAPlan and torch.classes.minimm.PackPlan" "$so"
# ptxas -v says, per kernel: "Compiling entry function 'NAME' for 'sm_XX'", then (for NAME) "N bytes
# stack frame, S bytes spill stores, L bytes spill loads" and "Used R registers".
"$PYTHON" - "$out/build.log" <<'PY'
import re, subprocess, sys
rows, name, arch = {}, None, None
for line in open(sys.argv[1], errors='replace'):
    entry = re.search(r"Compiling entry function '(\w+)' for '(sm_\w+)'", line)
    if entry:
        name, arch = entry.groups()
        rows[name, arch] = rows.get((name, arch), {})
    elif name and (m := re.search(r'(\d+) bytes spill stores, (\d+) bytes spill loads', line)):
        rows[name, arch].setdefault('spills', int(m[1]) + int(m[2]))
    elif name and (m := re.search(r'Used (\d+) registers', line)):
        rows[name, arch]['registers'] = int(m[1])
if not rows:
    sys.exit('compile_cuda.sh: no ptxas figures in the build output (was -Xptxas -v passed?)')
names = subprocess.run(['c++filt'], input='\n'.join(n for n, _ in rows), capture_output=True, text=True).stdout.split('\n')
FLOATS = ['float', 'double', 'half', 'bfloat16']  # csrc/ema_kernel.cu kinds; pack.h kernel numbers below
PACK = ['byte copy', 'zeroing'] + [f'scale {t}' for t in 'uint8 int8 int16 int32 int64 half float double bfloat16'.split()]


def what(short):
    kind = re.search(r'(ema|pack)_kernel<(\d+)>', short)
    if not kind:
        return ''
    k = int(kind[2])
    if kind[1] == 'pack':
        return PACK[k]
    return 'byte copy' if k == 16 else f'{FLOATS[k // 4]} EMA of {FLOATS[k % 4]}'


bad = []
print(f'{"kernel":<22} {"rows":<24} {"arch":<7} {"registers":>9} {"spill bytes":>11}')
for (mangled, arch), short in zip(rows, names):
    short = re.sub(r'^void |minimm::\(anonymous namespace\)::|\(.*\)$', '', short)
    figures = rows[mangled, arch]
    regs, spills = figures.get('registers', 0), figures.get('spills', 0)
    print(f'{short:<22} {what(short):<24} {arch:<7} {regs:>9} {spills:>11}')
    if re.search(r'ema_kernel|pack_kernel', short) and (regs > 64 or spills > 0):
        bad.append(f'{short} ({arch}): {regs} registers, {spills} bytes of spills')
if bad:
    sys.exit('compile_cuda.sh: EMA or pack kernels over 64 registers or spilling:\n  ' + '\n  '.join(bad))
PY
# The launch bounds: `.visible .entry NAME(params)`, then `.maxntid X, Y, Z` and `.minnctapersm N`
# before the body's `{`.
"$PYTHON" - "$out/keep" csrc/multi_tensor_apply.cuh <<'PY'
import glob, re, subprocess, sys
header = open(sys.argv[2]).read()
threads = int(re.search(r'constexpr int kThreads = (\d+);', header)[1])
min_blocks = int(re.search(r'constexpr int kMinBlocks = (\d+);', header)[1])
entries = []
for path in sorted(glob.glob(sys.argv[1] + '/*.ptx')):
    for m in re.finditer(r'\.entry\s+(\w+)\([^)]*\)\s*([^{]*)\{', open(path).read()):
        entries.append((m[1], m[2]))
names = subprocess.run(['c++filt'], input='\n'.join(n for n, _ in entries), capture_output=True, text=True).stdout.split('\n')
checked, bad = 0, []
for (mangled, directives), name in zip(entries, names):
    if not re.search(r'(ema|pack)_kernel<', name):
        continue
    checked += 1
    ntid = re.search(r'\.maxntid\s+(\d+)', directives)
    ctas = re.search(r'\.minnctapersm\s+(\d+)', directives)
    got = (int(ntid[1]) if ntid else None, int(ctas[1]) if ctas else None)
    if got != (threads, min_blocks):
        bad.append(f'{re.sub(r"[(].*", "", name)}: .maxntid {got[0]}, .minnctapersm {got[1]}')
if checked == 0:
    sys.exit('compile_cuda.sh: no EMA or pack kernel in the kept PTX (was --keep passed?)')
if bad:
    sys.exit(f'compile_cuda.sh: launch bounds other than kThreads = {threads}, kMinBlocks = {min_blocks}:\n  '
             + '\n  '.join(bad))
print(f'launch bounds: {checked} EMA and pack kernels with .maxntid {threads}, .minnctapersm {min_blocks}')
PY
echo "compile_cuda.sh: CUDA build OK in $(( $(date +%s) - start )) s ($(basename "$so"), torch $("$PYTHON" -c 'import torch; print(torch.__version__)'))"
