"""Builds the emulated CUDA device (README.md beside this file) and prints the library's path.

The library is the whole extension: csrc/*.cpp as they are and csrc/*.cu compiled as host C++
against shim/ (ema_device.cpp, pack_device.cpp include them), plus emulator.cpp; everything under
AddressSanitizer and UndefinedBehaviorSanitizer, at -O1 (a cold build takes a few minutes on two
cores; ninja rebuilds only what changed). ``--coverage`` builds a second, instrumented copy for
gcov in its own folder.

    python tests/cuda_emu/build.py [--coverage]
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CSRC = os.path.join(REPO, 'csrc')
# The plans' classes first: the emulator's methods take them.
SOURCES = [os.path.join(CSRC, 'ema.cpp'), os.path.join(CSRC, 'pack.cpp')] + [
    os.path.join(HERE, name) for name in ('emulator.cpp', 'ema_device.cpp', 'pack_device.cpp')]
# Every error is fatal (a UBSan report aborts the process); vptr checks need RTTI of torch's
# classes, which its libraries do not export.
SANITIZE = ['-fsanitize=address,undefined', '-fno-sanitize=vptr', '-fno-sanitize-recover=all']


def build(coverage: bool) -> str:
    # Run with the sanitizers' runtimes preloaded (run.sh), so that the check at the end, loading
    # the library, works; the compilers need no such thing.
    os.environ.pop('LD_PRELOAD', None)
    from torch.utils import cpp_extension
    name = 'minimm_cuda_emu_coverage' if coverage else 'minimm_cuda_emu'
    root = os.environ.get('TORCH_EXTENSIONS_DIR', os.path.join(REPO, '.torch_extensions'))
    directory = os.path.join(root, name)
    os.makedirs(directory, exist_ok=True)
    optimise = ['-O0', '--coverage'] if coverage else ['-O1']
    # -ffp-contract=off as the project's own builds (minimm/ops/loader.py); -Wno-unknown-pragmas
    # for the kernels' `#pragma unroll`.
    flags = optimise + ['-g', '-ffp-contract=off', '-fopenmp', '-Wno-unknown-pragmas'] + SANITIZE
    cpp_extension.load(name=name, sources=SOURCES, extra_cflags=flags,
                       extra_ldflags=SANITIZE + ['-fopenmp'] + (['--coverage'] if coverage else []),
                       extra_include_paths=[os.path.join(HERE, 'shim'), CSRC],
                       build_directory=directory, is_python_module=False, with_cuda=False,
                       verbose=False)
    return os.path.join(directory, name + '.so')


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--coverage', action='store_true', help='the gcov-instrumented build')
    print(build(parser.parse_args().coverage))
    sys.stdout.flush()
