"""Plants bugs in the kernels and the table code one at a time, in a scratch copy of the checkout,
and shows that a test catches each. Not run by CI; rerun it after changing a kernel, and add a
line for a new one. The table of the last run is in README.md here.

A bug counts as caught only when a test failed on the planted copy that passes on the clean one:
the clean copy is built and the whole emulated lane (run.sh, three orders) run on it first, and
the run stops if anything fails there. Then, per bug, cheaply: the planted file is written, ninja
rebuilds only the objects that include it (the scratch build folder is kept), the tests the bug
was planted against run first (order 0, -x), and only if they pass the whole lane (run.sh -x). A
bug in COMPILE_BUGS is what lane 4 cannot see (the emulator ignores launch bounds): it is checked
by tests/compile_cuda.sh on the planted copy instead (after the same script passed on the clean
one).

Cannot go stale: a bug's text must occur exactly once in its file (checked before anything runs,
and by tests/test_cuda_emu_plants.py in the CPU suite), and the planted copy must build (a bug that
does not compile is a failure of this list, reported as such, not "caught").

    python tests/cuda_emu/plant_bugs.py [--first-only] [SCRATCH_DIR [NAME...]]
        one line per bug; NAME: only the bugs whose names hold it; --first-only: the baseline is
        the chosen bugs' own tests on the clean copy, and a bug they miss is "NOT CAUGHT" (no
        whole lane), for a quick run of a few bugs
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

Bug = collections.namedtuple('Bug', 'name path text replacement first')
EQUAL, EMU = 'tests/test_ops_cuda_equal.py::', 'tests/test_cuda_emu.py::'
PLAN = EQUAL + 'test_cpu_native_equals_the_device_plan'
LIST_OP = EQUAL + 'test_cpu_native_equals_the_device_list_op_aligned_or_not'
ANY_ORDER = EMU + 'test_any_order_and_grid_gives_the_cpu_kernels_bits'
STREAMS = EMU + 'test_a_plan_runs_on_the_current_stream_and_remembers_four_streams_at_most'
TAILS = EMU + 'test_byte_copies_with_tails_equal_the_cpu_pack'
ONE_CHUNK = EMU + 'test_every_element_of_a_plan_is_in_exactly_one_chunk'
FP64 = EMU + 'test_fp64_averages_equal_the_python_weights_bit_for_bit'
COMPILE_LANE = 'tests/compile_cuda.sh'

# One bug each: its file, the text it replaces and with what, and the tests it is planted against
# (run first: those that caught it in the last run). Grouped by file, the headers that many objects
# include last: fewer rebuilds.
BUGS = [Bug(*bug) for bug in [
    ('tail redoes the last vector', 'csrc/ema_kernel.cu',
     'scalar_from = vectors * N;',
     'scalar_from = (vectors > 0 ? vectors - 1 : 0) * N;', FP64),
    ('vector store past the end', 'csrc/ema_kernel.cu',
     '        if (v < vectors) {\n#pragma unroll',
     '        if (v <= vectors) {\n#pragma unroll', ONE_CHUNK),
    ('vector loads without the alignment test', 'csrc/ema_kernel.cu',
     'if (vector_aligned<E, N>(ema) && vector_aligned<S, N>(src)) {',
     'if (true) {', EQUAL + 'test_a_plan_of_misaligned_views_equals_cpu_native'),
    ('grid stride of one block', 'csrc/ema_kernel.cu',
     'u < count * l.targets; u += gridDim.x) {',
     'u < count * l.targets; u += 1) {', PLAN),
    ('counter incremented before the launches', 'csrc/ema_kernel.cu',
     '  for (const Segment& segment : table.segments) launch_kind(segment.kind, '
     'l, segment, stream);\n'
     '  if (steps) {',
     '  if (steps) MINIMM_LAUNCH(increment_kernel, 1, 1, stream, l);\n'
     '  for (const Segment& segment : table.segments) launch_kind(segment.kind, '
     'l, segment, stream);\n'
     '  if (false) {', PLAN),
    ('barrier inside thread 0 only', 'csrc/ema_kernel.cu',
     '    }\n  }\n  __syncthreads();\n}',
     '    }\n    __syncthreads();\n  }\n}', PLAN),
    ('no barrier after thread 0 reads the counter', 'csrc/ema_kernel.cu',
     '  }\n  __syncthreads();\n}',
     '  }\n}', ANY_ORDER),
    ('fused multiply-add', 'csrc/ema_kernel.cu',
     'return static_cast<E>(add_rn(a, mul_rn(w, sub_rn(sv, a))));',
     'return static_cast<E>(std::fma(w, sub_rn(sv, a), a));', LIST_OP),
    ('segment start ignored', 'csrc/ema_kernel.cu',
     'stream, l, s.first, s.count);',
     'stream, l, 0, s.count);', ANY_ORDER),
    ('mirrored byte pairs skipped on skipped calls', 'csrc/ema_kernel.cu',
     'if (row.mode == kCopyAlways || action[k] != kSkip)',
     'if (action[k] != kSkip)', PLAN),
    ('capture keeps nothing alive', 'csrc/ema_kernel.cu',
     '    keep_for_graph(stream, plan.table, counters);',
     '    (void)counters;',
     EMU + 'test_a_graph_keeps_what_it_replays_alive_after_its_plan_and_tensors_are_gone'),
    ('increment on another stream than the current one', 'csrc/ema_kernel.cu',
     'MINIMM_LAUNCH(increment_kernel, 1, 1, stream, l);',
     'MINIMM_LAUNCH(increment_kernel, 1, 1, nullptr, l);', STREAMS),
    ('padding zeroed one byte short', 'csrc/pack_kernel.cu',
     'zero_bytes(dst, chunk.n);',
     'zero_bytes(dst, chunk.n - 1);',
     EQUAL + 'test_cpu_native_and_the_twin_equal_the_device_pack_and_scaled_unpack'),
    ('scaled int64 through int32', 'csrc/pack_kernel.cu',
     'round_into<T>(__dmul_rn(static_cast<double>(v), scale));',
     'round_into<T>(__dmul_rn(static_cast<double>(static_cast<int32_t>(v)), scale));',
     EMU + 'test_int64_values_past_2_31_pack_and_unpack_whole'),
    ('scaled integers truncated, not rounded and clamped', 'csrc/pack_kernel.cu',
     'return round_into<T>(__dmul_rn(static_cast<double>(v), scale));',
     'return static_cast<T>(__dmul_rn(static_cast<double>(v), scale));',
     EQUAL + 'test_integer_results_out_of_range_are_clamped'),
    ('scaled vectors: the elements after them skipped', 'csrc/pack_kernel.cu',
     'scalar_from = vectors * N;',
     'scalar_from = (vectors + 1) * N;', EQUAL + 'test_integer_results_out_of_range_are_clamped'),
    ('elementwise: stores without the bound test', 'csrc/multi_tensor_apply.cuh',
     '      if (j < n) dst[j] = op(d[k], s[k]);',
     '      dst[j] = op(d[k], s[k]);', EQUAL + 'test_a_plan_of_misaligned_views_equals_cpu_native'),
    ('byte copy: the last tail byte dropped', 'csrc/multi_tensor_apply.cuh',
     'j < n; j += kThreads) dst[j] = src[j];',
     'j < n - 1; j += kThreads) dst[j] = src[j];', TAILS),
    ('multi-EMA grid sized for one target', 'csrc/multi_tensor_apply.cuh',
     'grid_of(segment.kind, segment.count * table.targets)',
     'grid_of(segment.kind, segment.count)', EMU + 'test_a_joint_plan_grid_counts_every_target'),
    ('stream list unbounded', 'csrc/multi_tensor_apply.cuh',
     'if (table.streams.size() == kStreamsKept)',
     'if (false)', STREAMS),
    ('16-byte copies on 8-byte alignment', 'csrc/multi_tensor_apply.cuh',
     'if (both % 16 == 0) copy_words<uint4>',
     'if (both % 8 == 0) copy_words<uint4>', TAILS),
    # Since grid_for keeps one block at least, the old form of this bug (chunks - 1 blocks) is
    # harmless; the bug is losing that floor.
    ('empty grid when no block fits', 'csrc/multi_tensor_apply.cuh',
     'static_cast<unsigned int>(std::max<int64_t>(1, fit));',
     'static_cast<unsigned int>(fit);', EMU + 'test_a_grid_has_one_block_at_least'),
    ('table: chunks read at the wrong offset', 'csrc/multi_tensor_apply.cuh',
     'table + rows * static_cast<int64_t>(sizeof(Row))',
     'table + (rows - 1) * static_cast<int64_t>(sizeof(Row))', PLAN),
    ('power rule: exponent gamma, not gamma + 1', 'csrc/ema.h',
     'rn_add(w.gamma, 1.0));',
     'w.gamma);', FP64),
    ('table: segments one chunk short', 'csrc/table.h',
     'start[k], start[k + 1] - start[k], 0}',
     'start[k], start[k + 1] - start[k] - (k == 0), 0}', ONE_CHUNK),
    ('table: chunks overlapping by one element', 'csrc/table.h',
     'static_cast<int32_t>(std::min(per_chunk, numel - first))',
     'static_cast<int32_t>(std::min(per_chunk + 1, numel - first))', ONE_CHUNK),
]]

# Bugs the emulated lane cannot see but the CUDA compile lane can: planted and checked by it.
COMPILE_BUGS = [Bug(*bug) for bug in [
    ('__launch_bounds__ without its minimum of blocks', 'csrc/pack_kernel.cu',
     '__launch_bounds__(kThreads, kMinBlocks)\n    pack_kernel(',
     '__launch_bounds__(kThreads)\n    pack_kernel(', COMPILE_LANE),
]]

# Bugs only a GPU can show: the emulator has one thread of execution, no allocator of device
# memory, no pinned memory. Listed in README.md with what would catch each; not planted here.
GPU_ONLY = [
    ('record_stream dropped (record_on returns early)',
     'tests/test_ops_cuda_equal.py two-streams test, GPU'),
    ('one pinned staging buffer reused by every upload',
     'test_ops_cuda.py on a GPU (non_blocking copy)'),
    ('a race between blocks (two writers of one element)', 'compute-sanitizer racecheck, GPU'),
]


def check_patterns(root: str = REPO) -> list:
    """Why each bug could not be planted in the sources under `root` (empty when all can): its
    text must occur exactly once in its file, and the planted text keep the file's brackets
    balanced (a cheap sign that it still compiles; the plant run builds it)."""
    problems = []
    for name, path, text, replacement, _ in BUGS + COMPILE_BUGS:
        with open(os.path.join(root, path)) as f:
            count = f.read().count(text)
        if count != 1:
            problems.append(f'{name}: its text occurs {count} times in {path}, not once')
        for pair in ('()', '{}', '[]'):
            balance = [t.count(pair[0]) - t.count(pair[1]) for t in (text, replacement)]
            if balance[0] != balance[1]:
                problems.append(f'{name}: the replacement unbalances {pair}')
    return problems


def caught_by(output: str) -> str:
    """What caught a bug in a verbose pytest's output (stderr merged): the first failing test, or
    the test running when a sanitizer ended the process; and the report or emulator error."""
    failed = (re.search(r'^FAILED (tests/\S+)', output, re.M)
              or re.search(r'(tests/\S+::\S+) FAILED', output))
    report = re.search(r'ERROR: AddressSanitizer: [\w-]+|runtime error: [^\n]{0,60}'
                       r'|divergent __syncthreads\(\)|invalid grid|launched on stream \d+'
                       r'|^E +\w+Error: [^\n]{0,70}', output, re.M)
    test = failed[1] if failed else None
    if test is None and report:  # the process died: the last test pytest -v announced
        started = re.findall(r'^(tests/\S+::\S+)', output[:report.start()], re.M)
        test = started[-1] if started else None
    return '; '.join(part for part in (test, report[0] if report else None) if part)


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


class Lanes:
    """The scratch copy's build and test commands, each logged to `log` (one file per call)."""

    def __init__(self, scratch: str):
        self.copy, self.scratch = os.path.join(scratch, 'repo'), scratch
        preload = ':'.join(subprocess.run(['gcc', f'-print-file-name={lib}'], capture_output=True,
                                          text=True).stdout.strip()
                           for lib in ('libasan.so', 'libubsan.so'))
        self.env = dict(os.environ, TORCH_EXTENSIONS_DIR=os.path.join(scratch, 'ext'),
                        PYTHON=sys.executable, ASAN_OPTIONS='detect_leaks=0', PYTHONUNBUFFERED='1')
        # As run.sh runs the tests, in the first of its three orders.
        self.preloaded = dict(self.env, LD_PRELOAD=preload, OMP_NUM_THREADS='1',
                              MINIMM_EMU_ORDER='0')
        self.library = None

    def call(self, command, log: str, env=None):
        with open(os.path.join(self.scratch, log), 'w') as f:
            done = subprocess.run(command, cwd=self.copy, env=env or self.env, stdout=f,
                                  stderr=subprocess.STDOUT)
        with open(os.path.join(self.scratch, log), errors='replace') as f:
            return done.returncode, f.read()

    def build(self, log: str) -> bool:
        code, output = self.call([sys.executable, 'tests/cuda_emu/build.py'], log, self.preloaded)
        if code:
            return False
        self.library = [line for line in output.splitlines() if line.endswith('.so')][-1]
        return True

    def first(self, tests, log: str):
        pytest = [sys.executable, '-m', 'pytest', '-x', '-v', '-p', 'no:cacheprovider',
                  '--capture=sys']
        return self.call(pytest + tests.split(), log,
                         dict(self.preloaded, MINIMM_EXT_LIBRARY=self.library))

    def lane(self, log: str, *args):
        return self.call(['bash', 'tests/cuda_emu/run.sh', '-vv', *args], log)  # -q -vv: -v

    def compile_lane(self, log: str):
        return self.call(['bash', COMPILE_LANE], log)


def plant(lanes: Lanes, index: int, bug: Bug, first_only: bool) -> tuple:
    """Plants `bug`, builds and tests the copy, restores the file: (verdict, build s, test s)."""
    target = os.path.join(lanes.copy, bug.path)
    with open(target) as f:
        original = f.read()
    with open(target, 'w') as f:
        f.write(original.replace(bug.text, bug.replacement))
    start = time.monotonic()
    try:
        if bug.first == COMPILE_LANE:
            built, (code, output) = time.monotonic(), lanes.compile_lane(f'bug{index:02d}.log')
            where = 'compile lane'
        else:
            if not lanes.build(f'bug{index:02d}.build.log'):
                return f'DOES NOT BUILD, see bug{index:02d}.build.log', time.monotonic() - start, 0
            built = time.monotonic()
            code, output = lanes.first(bug.first, f'bug{index:02d}.log')
            where = 'its first tests'
            if code == 0 and not first_only:
                code, output = lanes.lane(f'bug{index:02d}.lane.log', '-x')
                where = 'the whole lane'
    finally:
        with open(target, 'w') as f:
            f.write(original)
    what = caught_by(output) or f'exit code {code}'
    verdict = 'NOT CAUGHT' if code == 0 else f'caught by {where}: {what}'
    return verdict, built - start, time.monotonic() - built


def main(scratch: str, names, first_only: bool = False) -> int:
    problems = check_patterns()
    if problems:
        print('\n'.join(problems))
        return 2
    os.makedirs(scratch, exist_ok=True)
    sync(REPO, os.path.join(scratch, 'repo'))
    lanes = Lanes(scratch)
    chosen = [(k, bug) for k, bug in enumerate(BUGS + COMPILE_BUGS)
              if not names or any(n in bug.name for n in names)]
    start = time.monotonic()
    # The baseline: the whole lane, or (first_only) just the chosen bugs' own tests.
    tests = ' '.join(sorted({bug.first for _, bug in chosen if bug.first != COMPILE_LANE}))
    if not lanes.build('clean.build.log') or (
            lanes.first(tests, 'clean.lane.log') if first_only
            else lanes.lane('clean.lane.log'))[0]:
        print(f'the clean copy fails: see {scratch}/clean.*.log; nothing planted')
        return 2
    compiled = any(bug.first == COMPILE_LANE for _, bug in chosen)
    if compiled and lanes.compile_lane('clean.compile.log')[0]:
        print(f'the clean copy fails {COMPILE_LANE}: see {scratch}/clean.compile.log; '
              'nothing planted')
        return 2
    print(f'clean copy: built, {"its tests" if first_only else "lane 4"} passed in '
          f'{time.monotonic() - start:.0f} s', flush=True)
    failed = 0
    for index, bug in chosen:
        verdict, build_s, test_s = plant(lanes, index, bug, first_only)
        failed += not verdict.startswith('caught')
        print(f'{bug.name:<50} {bug.path.split("/")[-1]:<22} build {build_s:4.0f} s, '
              f'tests {test_s:4.0f} s  {verdict}', flush=True)
    for name, catcher in GPU_ONLY:
        print(f'{name:<50} {"(not planted)":<22} only a GPU: {catcher}')
    print(f'{len(chosen) - failed} of {len(chosen)} caught in {time.monotonic() - start:.0f} s')
    return 1 if failed else 0


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('scratch', nargs='?', default='/tmp/minimm_plant_bugs')
    parser.add_argument('names', nargs='*', help='only the bugs whose names hold one of these')
    parser.add_argument('--first-only', action='store_true',
                        help="the baseline and each bug's check: its own tests, no whole lane")
    args = parser.parse_args()
    sys.exit(main(args.scratch, args.names, args.first_only))
