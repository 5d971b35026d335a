"""Plants bugs in the kernels and the table code one at a time, in a scratch copy of the checkout,
and runs the emulated-device lane on each: every one should be caught. Not run by CI (one to
three minutes a bug on two cores); rerun it after changing a kernel, and add a line for a new one.

    python tests/cuda_emu/plant_bugs.py [SCRATCH_DIR [NAME...]]   (one line per bug; NAME: only
                                                                 the bugs whose names hold it)
"""
import os
import re
import shutil
import subprocess
import sys

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
     'c < count; c += gridDim.x) {',
     'c < count; c += 1) {'),
    ('counter incremented before the launches', 'csrc/ema_kernel.cu',
     '  for (const Segment& segment : table.segments) launch_kind(segment.kind, '
     'l, segment, stream);\n'
     '  if (steps) {',
     '  if (steps) MINIMM_LAUNCH(increment_kernel, 1, 1, stream, steps);\n'
     '  for (const Segment& segment : table.segments) launch_kind(segment.kind, '
     'l, segment, stream);\n'
     '  if (false) {'),
    ('barrier inside thread 0 only', 'csrc/ema_kernel.cu',
     '    weight = action == kAverage ? step_weight(l.rule, count) : 0.0;\n  }\n  __syncthreads();',
     '    weight = action == kAverage ? step_weight(l.rule, count) : 0.0;\n'
     '    __syncthreads();\n'
     '  }'),
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
     'if (row.mode == kCopyAlways || action != kSkip)',
     'if (action != kSkip)'),
    ('capture keeps nothing alive', 'csrc/ema_kernel.cu',
     '    plan.captured.on_capture(plan.table_storages, {plan.table.device.storage(), '
     'steps.storage()});',
     '    ;'),
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
    ('scaled integers truncated, not rounded and clamped', 'csrc/pack_kernel.cu',
     'return round_into<T>(__dmul_rn(static_cast<double>(v), scale));',
     'return static_cast<T>(__dmul_rn(static_cast<double>(v), scale));'),
    ('table: segments one chunk short', 'csrc/table.h',
     'start[k], start[k + 1] - start[k], 0}',
     'start[k], start[k + 1] - start[k] - (k == 0), 0}'),
]


def caught_by(output: str) -> str:
    """The first sanitizer report or failing test of a lane's output."""
    for pattern in (r'ERROR: AddressSanitizer: [\w-]+', r'runtime error: [^\n]{0,60}',
                    r'divergent __syncthreads\(\)', r'invalid grid', r'FAILED (\S+)'):
        found = re.search(pattern, output)
        if found:
            return found[1] if found.groups() else found[0]
    return ''


def main(scratch: str, names) -> int:
    copy = os.path.join(scratch, 'repo')
    shutil.rmtree(copy, ignore_errors=True)
    leave_out = shutil.ignore_patterns('.git', '.venv*', '.torch_extensions', '__pycache__')
    shutil.copytree(REPO, copy, ignore=leave_out)
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=os.path.join(scratch, 'ext'), PYTHON=sys.executable)
    missed = 0
    for index, (name, path, text, replacement) in enumerate(BUGS):
        if names and not any(n in name for n in names):
            continue
        target = os.path.join(copy, path)
        with open(target) as f:
            original = f.read()
        assert original.count(text) == 1, f'{name}: the text to replace is not in {path} once'
        with open(target, 'w') as f:
            f.write(original.replace(text, replacement))
        run = subprocess.run(['bash', 'tests/cuda_emu/run.sh', '-x', '-q'], cwd=copy, env=env,
                             capture_output=True, text=True)
        with open(target, 'w') as f:
            f.write(original)
        log = os.path.join(scratch, f'bug{index:02d}.log')
        with open(log, 'w') as f:
            f.write(run.stdout + run.stderr)
        missed += run.returncode == 0
        how = caught_by(run.stdout + run.stderr) or f'exit code {run.returncode}, see {log}'
        verdict = f'caught: {how}' if run.returncode else 'NOT CAUGHT'
        print(f'{name:<52} {path.split("/")[-1]:<24} {verdict}', flush=True)
    return 1 if missed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else '/tmp/minimm_plant_bugs', sys.argv[2:]))
