"""Plants bugs in the kernels and the table code one at a time, in a scratch copy of the checkout,
and runs the emulated-device lane on each: every one should be caught. Not run by CI (one to
three minutes a bug on two cores, about an hour for all); rerun it after changing a kernel, and add
a line for a new one. The table of the last run is in README.md here.

Cannot go stale: a bug's text must occur exactly once in its file (checked before anything runs,
and by tests/test_cuda_emu_plants.py in the CPU suite), and the planted copy must build (the
emulated device is built first; a bug that does not compile is a failure of this list, reported
as such, not "caught").

    python tests/cuda_emu/plant_bugs.py [SCRATCH_DIR [NAME...]]   (one line per bug; NAME: only
                                                                 the bugs whose names hold it)
"""
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# (name, file, text, replacement): one bug each.
BUGS = [  # grouped by file: a bug and the next in the same file rebuild one object
    ('tail redoes the last vector', 'csrc/ema_kernel.cu',
     'scalar_from = vectors * N;',
     'scalar_from = (vectors > 0 ? vectors - 1 : 0) * N;'),
    ('vector store past the end', 'csrc/ema_kernel.cu',
     '        if (v < vectors) {\n#pragma unroll',
     '        if (v <= vectors) {\n#pragma unroll'),
    ('vector loads without the alignment test', 'csrc/ema_kernel.cu',
     'if (vector_aligned<E, N>(ema) && vector_aligned<S, N>(src)) {',
     'if (true) {'),
    ('grid stride of one block', 'csrc/ema_kernel.cu',
     'u < count * l.targets; u += gridDim.x) {',
     'u < count * l.targets; u += 1) {'),
    ('counter incremented before the launches', 'csrc/ema_kernel.cu',
     '  for (const Segment& segment : table.segments) launch_kind(segment.kind, '
     'l, segment, stream);\n'
     '  if (steps) {',
     '  if (steps) MINIMM_LAUNCH(increment_kernel, 1, 1, stream, l);\n'
     '  for (const Segment& segment : table.segments) launch_kind(segment.kind, '
     'l, segment, stream);\n'
     '  if (false) {'),
    ('barrier inside thread 0 only', 'csrc/ema_kernel.cu',
     '    }\n  }\n  __syncthreads();\n}',
     '    }\n    __syncthreads();\n  }\n}'),
    ('no barrier after thread 0 reads the counter', 'csrc/ema_kernel.cu',
     '  }\n  __syncthreads();\n}',
     '  }\n}'),
    ('fused multiply-add', 'csrc/ema_kernel.cu',
     'return static_cast<E>(add_rn(a, mul_rn(w, sub_rn(sv, a))));',
     'return static_cast<E>(std::fma(w, sub_rn(sv, a), a));'),
    ('segment start ignored', 'csrc/ema_kernel.cu',
     'stream, l, s.first, s.count);',
     'stream, l, 0, s.count);'),
    ('mirrored byte pairs skipped on skipped calls', 'csrc/ema_kernel.cu',
     'if (row.mode == kCopyAlways || action[k] != kSkip)',
     'if (action[k] != kSkip)'),
    ('capture keeps nothing alive', 'csrc/ema_kernel.cu',
     '    keep_for_graph(stream, plan.table, counters);',
     '    (void)counters;'),
    ('increment on another stream than the current one', 'csrc/ema_kernel.cu',
     'MINIMM_LAUNCH(increment_kernel, 1, 1, stream, l);',
     'MINIMM_LAUNCH(increment_kernel, 1, 1, nullptr, l);'),
    ('byte copy: the last tail byte dropped', 'csrc/multi_tensor_apply.cuh',
     'j < n; j += kThreads) dst[j] = src[j];',
     'j < n - 1; j += kThreads) dst[j] = src[j];'),
    ('multi-EMA grid sized for one target', 'csrc/multi_tensor_apply.cuh',
     'grid_of(segment.kind, segment.count * table.targets)',
     'grid_of(segment.kind, segment.count)'),
    ('stream list unbounded', 'csrc/multi_tensor_apply.cuh',
     'if (table.streams.size() == kStreamsKept)',
     'if (false)'),
    ('16-byte copies on 8-byte alignment', 'csrc/multi_tensor_apply.cuh',
     'if (both % 16 == 0) copy_words<uint4>',
     'if (both % 8 == 0) copy_words<uint4>'),
    ('empty grid for a one-chunk segment', 'csrc/multi_tensor_apply.cuh',
     'std::min<int64_t>(int64_t{sms} * per_sm, chunks)',
     'std::min<int64_t>(int64_t{sms} * per_sm, chunks - 1)'),
    ('table: chunks read at the wrong offset', 'csrc/multi_tensor_apply.cuh',
     'table + rows * static_cast<int64_t>(sizeof(Row))',
     'table + (rows - 1) * static_cast<int64_t>(sizeof(Row))'),
    ('padding zeroed one byte short', 'csrc/pack_kernel.cu',
     'zero_bytes(dst, chunk.n);',
     'zero_bytes(dst, chunk.n - 1);'),
    ('scaled int64 through int32', 'csrc/pack_kernel.cu',
     'round_into<T>(__dmul_rn(static_cast<double>(v), scale));',
     'round_into<T>(__dmul_rn(static_cast<double>(static_cast<int32_t>(v)), scale));'),
    ('scaled integers truncated, not rounded and clamped', 'csrc/pack_kernel.cu',
     'return round_into<T>(__dmul_rn(static_cast<double>(v), scale));',
     'return static_cast<T>(__dmul_rn(static_cast<double>(v), scale));'),
    ('table: segments one chunk short', 'csrc/table.h',
     'start[k], start[k + 1] - start[k], 0}',
     'start[k], start[k + 1] - start[k] - (k == 0), 0}'),
    ('table: chunks overlapping by one element', 'csrc/table.h',
     'static_cast<int32_t>(std::min(per_chunk, numel - first))',
     'static_cast<int32_t>(std::min(per_chunk + 1, numel - first))'),
    ('power rule: exponent gamma, not gamma + 1', 'csrc/ema.h',
     'rn_add(w.gamma, 1.0));',
     'w.gamma);'),
]

# Bugs only a GPU (or the CUDA compile lane) can show: the emulator has one thread of execution,
# no allocator of device memory, no pinned memory and no launch bounds. Listed in README.md with
# what would catch each; not planted here.
GPU_ONLY = [
    ('__launch_bounds__ dropped', 'tests/compile_cuda.sh (lane 3): .maxntid / .minnctapersm'),
    ('record_stream dropped (record_on returns early)', 'tests/test_ops_cuda_equal.py two-streams test, GPU'),
    ('one pinned staging buffer reused by every upload', 'test_ops_cuda.py on a GPU (non_blocking copy)'),
    ('a race between blocks (two writers of one element)', 'compute-sanitizer racecheck, GPU'),
]


def check_patterns(root: str = REPO) -> list:
    """Why each bug could not be planted in the sources under `root` (empty when all can): its
    text must occur exactly once in its file, and the planted text keep the file's brackets
    balanced (a cheap sign that it still compiles; the plant run builds it)."""
    problems = []
    for name, path, text, replacement in BUGS:
        with open(os.path.join(root, path)) as f:
            count = f.read().count(text)
        if count != 1:
            problems.append(f'{name}: its text occurs {count} times in {path}, not once')
        for pair in ('()', '{}', '[]'):
            if text.count(pair[0]) - text.count(pair[1]) != replacement.count(pair[0]) - replacement.count(pair[1]):
                problems.append(f'{name}: the replacement unbalances {pair}')
    return problems


def caught_by(output: str) -> str:
    """What caught a bug in a lane's output: the first failing test, and the sanitizer report or
    emulator error beside it (a sanitizer ends the process: then no test is named)."""
    what = []
    for pattern in (r'FAILED (\S+)', r'ERROR: AddressSanitizer: [\w-]+', r'runtime error: [^\n]{0,60}',
                    r'divergent __syncthreads\(\)', r'invalid grid', r'launched on stream \d+'):
        found = re.search(pattern, output)
        if found:
            what.append(found[1] if found.groups() else found[0])
    return '; '.join(what[:2])


def sync(source: str, copy: str) -> None:
    """Makes `copy` a copy of the checkout, writing only the files that differ: a second run
    reuses the scratch build (ninja rebuilds what changed since)."""
    leave_out = ('.git', '.torch_extensions', '__pycache__')
    for folder, dirs, files in os.walk(source):
        dirs[:] = [d for d in dirs if d not in leave_out and not d.startswith('.venv')]
        target = os.path.join(copy, os.path.relpath(folder, source))
        os.makedirs(target, exist_ok=True)
        for name in files:
            with open(os.path.join(folder, name), 'rb') as f:
                data = f.read()
            path = os.path.join(target, name)
            if not os.path.exists(path) or open(path, 'rb').read() != data:
                with open(path, 'wb') as f:
                    f.write(data)


def main(scratch: str, names) -> int:
    problems = check_patterns()
    if problems:
        print('\n'.join(problems))
        return 2
    copy = os.path.join(scratch, 'repo')
    sync(REPO, copy)
    preload = ':'.join(subprocess.run(['gcc', f'-print-file-name={lib}'], capture_output=True, text=True).stdout.strip()
                       for lib in ('libasan.so', 'libubsan.so'))
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=os.path.join(scratch, 'ext'), PYTHON=sys.executable)
    failed = 0
    for index, (name, path, text, replacement) in enumerate(BUGS):
        if names and not any(n in name for n in names):
            continue
        target = os.path.join(copy, path)
        with open(target) as f:
            original = f.read()
        with open(target, 'w') as f:
            f.write(original.replace(text, replacement))
        start = time.monotonic()
        build = subprocess.run([sys.executable, 'tests/cuda_emu/build.py'], cwd=copy, capture_output=True, text=True,
                               env=dict(env, LD_PRELOAD=preload, ASAN_OPTIONS='detect_leaks=0'))
        run = build if build.returncode else subprocess.run(['bash', 'tests/cuda_emu/run.sh', '-x', '-q'], cwd=copy,
                                                            env=env, capture_output=True, text=True)
        with open(target, 'w') as f:
            f.write(original)
        log = os.path.join(scratch, f'bug{index:02d}.log')
        with open(log, 'w') as f:
            f.write(run.stdout + run.stderr)
        if build.returncode:
            verdict = f'DOES NOT BUILD, see {log}'
        elif run.returncode == 0:
            verdict = 'NOT CAUGHT'
        else:
            verdict = 'caught: ' + (caught_by(run.stdout + run.stderr) or f'exit code {run.returncode}, see {log}')
        failed += build.returncode != 0 or run.returncode == 0
        print(f'{name:<52} {path.split("/")[-1]:<24} {time.monotonic() - start:4.0f} s  {verdict}', flush=True)
    for name, catcher in GPU_ONLY:
        print(f'{name:<52} {"(not planted)":<24}         only a GPU or lane 3: {catcher}')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else '/tmp/minimm_plant_bugs', sys.argv[2:]))
