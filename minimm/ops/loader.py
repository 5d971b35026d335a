"""The one place that decides whether minimm's native ops are used, once per process.

This file teaches how a PyTorch project ships optional C++/CUDA kernels without making them a
hard dependency. The decision, in order:

1. ``MINIMM_NO_EXT=1``: use the PyTorch fallback (the ``*_ref`` twins), no warning.
2. ``MINIMM_EXT_LIBRARY=path``: load that library as it is (one built elsewhere, such as the
   emulated CUDA device's build of tests/cuda_emu). Else a module prebuilt by
   ``MINIMM_BUILD_EXT=1 pip install -e .`` (``minimm/_C*.so``): load it.
3. A JIT build of the C++/CUDA sources with ``torch.utils.cpp_extension.load`` and ninja: the
   sources are ``minimm/csrc/`` in an installed package (``pip install .`` and wheels carry them,
   see setup.py) or ``csrc/`` in a checkout. Cached in ``TORCH_EXTENSIONS_DIR`` when set, else
   ``<repo>/.torch_extensions`` (git-ignored) for a checkout, else the user's cache,
   ``~/.cache/minimm/torch_extensions`` (never ``site-packages``, which may be read-only).
   The CUDA kernels are built only when a GPU and the CUDA toolkit are there.
   A cached build whose key (sources, headers, flags, torch and Python versions) still matches is
   loaded as it is, without ninja or a compiler; anything else prints a "compiling" line first.
   The build runs the ninja of the ``ninja`` Python package (a dependency) whatever the PATH says.
4. Anything failing (no sources, no ninja, no compiler, build error): the fallback, with one
   warning naming the reason. ``MINIMM_REQUIRE_EXT=1`` turns that into an error (for GPU checks).

Nothing happens at import: the first op call (or :func:`backend_info`) decides, under a lock.
Routing is per device: a CPU-only build has no CUDA kernels, so CUDA tensors then take the
fallback, which is ``torch._foreach_*`` (fused kernels on a GPU).

Left out: prebuilt-module staleness checks (rebuild after changing ``csrc/``), ROCm and Windows.
"""
import contextlib
import glob
import hashlib
import importlib.machinery
import logging
import os
import shutil
import sys
import threading
import time
import warnings
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

import torch

logger = logging.getLogger('minimm')

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_DIR = os.path.dirname(PACKAGE_DIR)
# An installed package carries its own copy of the sources (setup.py); a checkout has csrc/.
PACKAGED_CSRC_DIR = os.path.join(PACKAGE_DIR, 'csrc')
CSRC_DIR = PACKAGED_CSRC_DIR if os.path.isdir(PACKAGED_CSRC_DIR) else os.path.join(REPO_DIR, 'csrc')
CPU_SOURCES = ['ema.cpp', 'pack.cpp']
CUDA_SOURCES = ['ema_kernel.cu', 'pack_kernel.cu']
# A change to a header rebuilds the JIT module too.
HEADERS = ['checks.h', 'table.h', 'ema.h', 'pack.h', 'multi_tensor_apply.cuh']
# -ffp-contract=off: the kernels must round `ema + w * (src - ema)` as three separate operations
# on every machine; a fused multiply-add would change the last bit on some.
CXX_FLAGS = ['-O3', '-ffp-contract=off', '-fopenmp']
NVCC_FLAGS = ['-O3']


def build_settings(with_cuda: bool) -> Dict[str, List[str]]:
    """Sources and flags of the extension, shared by the JIT build and ``setup.py``."""
    sources = [os.path.join(CSRC_DIR, name) for name in CPU_SOURCES]
    if with_cuda:
        sources += [os.path.join(CSRC_DIR, name) for name in CUDA_SOURCES]
    return {'sources': sources, 'extra_cflags': list(CXX_FLAGS),
            'extra_cuda_cflags': list(NVCC_FLAGS)}


class Policy(NamedTuple):
    """What the environment asks for, read once per process (:func:`_get`)."""

    disabled: bool  # MINIMM_NO_EXT=1: the fallback, no warning
    required: bool  # MINIMM_REQUIRE_EXT=1: a failed build or load is an error

    @classmethod
    def from_env(cls) -> 'Policy':
        return cls(_flag('MINIMM_NO_EXT'), _flag('MINIMM_REQUIRE_EXT'))


def _flag(variable: str) -> bool:
    """An on/off environment variable: '1' is on, '0' or unset is off; anything else (``yes``,
    ``true``) is an error rather than a silent "off"."""
    value = os.environ.get(variable, '0')
    if value not in ('0', '1', ''):
        raise ValueError(f'{variable}={value!r}: allowed values are 1 (on) and 0 or unset (off)')
    return value == '1'


class _Decision(NamedTuple):
    """What was decided: which devices have native kernels, and why."""

    devices: Dict[str, str]   # device type -> 'native' or 'fallback'
    reasons: Dict[str, str]   # device type -> one line saying why


_lock = threading.Lock()
_decision: Optional[_Decision] = None
# Called once the native library is loaded. fake.py adds the registration of its fake kernels
# (it imports the twins, which import this module, so this module does not import it).
when_loaded: List[Callable[[], None]] = []


def _find_prebuilt() -> Optional[str]:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        matches = glob.glob(os.path.join(PACKAGE_DIR, '_C' + suffix))
        if matches:
            return matches[0]
    return None


def _cuda_toolkit() -> Optional[str]:
    """The CUDA toolkit root to build with, or None when CUDA kernels cannot or need not be
    built."""
    if torch.version.cuda is None or not torch.cuda.is_available():
        return None
    home = os.environ.get('CUDA_HOME') or os.environ.get('CUDA_PATH')
    if home is None and shutil.which('nvcc'):
        home = os.path.dirname(os.path.dirname(os.path.realpath(shutil.which('nvcc'))))
    return home if home and os.path.exists(os.path.join(home, 'bin', 'nvcc')) else None


def _build_directory(name: str) -> str:
    """``TORCH_EXTENSIONS_DIR/<name>`` when that is set, else ``<repo>/.torch_extensions/<name>``
    in a checkout (git-ignored), else ``<user cache>/minimm/torch_extensions/<name>``."""
    root = os.environ.get('TORCH_EXTENSIONS_DIR')
    if root is None:
        if CSRC_DIR != PACKAGED_CSRC_DIR and os.path.exists(os.path.join(REPO_DIR, '.git')):
            root = os.path.join(REPO_DIR, '.torch_extensions')
        else:
            cache = os.environ.get('XDG_CACHE_HOME') or os.path.expanduser('~/.cache')
            root = os.path.join(cache, 'minimm', 'torch_extensions')
    path = os.path.join(root, name)
    os.makedirs(path, exist_ok=True)
    return path


def _import_cpp_extension():
    """``torch.utils.cpp_extension``, imported without its CUDA_HOME warning.

    On import it guesses a CUDA toolkit folder and, without a GPU, warns "No CUDA runtime is
    found" — noise on every CPU machine that has nvcc on its PATH, printed at every Runner start.
    CUDA builds set CUDA_HOME explicitly (see tests/compile_cuda.sh), so nothing is lost.
    """
    cpp_logger = logging.getLogger('torch.utils.cpp_extension')
    level = cpp_logger.level
    cpp_logger.setLevel(logging.ERROR)
    try:
        from torch.utils import cpp_extension
    finally:
        cpp_logger.setLevel(level)
    return cpp_extension


def _build_key(with_cuda: bool, settings: Dict[str, List[str]]) -> str:
    """A digest of everything the library is built from. Contents, not modification times: a
    checkout or a copy changes the times of files that did not change."""
    digest = hashlib.sha256()
    for path in settings['sources'] + [os.path.join(CSRC_DIR, name) for name in HEADERS]:
        with open(path, 'rb') as f:
            digest.update(f.read())
    flags = [settings['extra_cflags'], settings['extra_cuda_cflags'], with_cuda, torch.__version__,
             sys.version]
    digest.update(repr(flags).encode())
    return digest.hexdigest()


def _read_text(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


@contextlib.contextmanager
def _package_ninja_first():
    """Put the ``ninja`` Python package's binary first on PATH while building. Two ninja versions
    (pip's and the system's) keep their build logs in different formats, so switching between
    them rebuilds everything; always using the package's one keeps the cache valid."""
    try:
        import ninja
        folder = ninja.BIN_DIR
    except (ImportError, AttributeError):  # no package: whatever ninja is on PATH
        yield
        return
    path = os.environ.get('PATH', '')
    os.environ['PATH'] = folder + os.pathsep + path
    try:
        yield
    finally:
        os.environ['PATH'] = path


# Every line the build prints starts with this (tests/test_docs.py drops such lines from what a
# tutorial shows: only the run that compiles prints them).
BUILD_NOTICE = 'minimm: compiling the native ops'
PROGRESS_INTERVAL_S = 15.0


@contextlib.contextmanager
def _progress_lines(interval: float):
    """Print a line every ``interval`` seconds until the block ends. The compiler says nothing
    until it is done, and on a busy machine that took 2 to 4 minutes: a silent terminal for that
    long looks like a hang."""
    done = threading.Event()
    start = time.perf_counter()

    def report():
        while not done.wait(interval):
            print(f'{BUILD_NOTICE}: still compiling, {time.perf_counter() - start:.0f} s so far',
                  flush=True)

    thread = threading.Thread(target=report, name='minimm-build-progress', daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _jit_build(with_cuda: bool) -> str:
    """Load the cached extension when its build key matches, else compile it; returns the build
    directory."""
    name = 'minimm_ext_cuda' if with_cuda else 'minimm_ext_cpu'
    directory = _build_directory(name)
    settings = build_settings(with_cuda)
    library = os.path.join(directory, name + '.so')
    key_file = os.path.join(directory, name + '.key')
    key = _build_key(with_cuda, settings)
    start = time.perf_counter()
    if os.path.exists(library) and _read_text(key_file) == key:
        torch.ops.load_library(library)
        logger.info('minimm: native ops loaded from the cached build in %s', directory)
        return directory
    cpp_extension = _import_cpp_extension()
    compiler = os.environ.get('CXX', 'c++')
    if shutil.which(compiler) is None:
        raise RuntimeError(f'no C++ compiler found ({compiler!r} is not on PATH)')
    with _package_ninja_first():
        if not cpp_extension.is_ninja_available():
            raise RuntimeError('ninja is not installed (pip install ninja)')
        why = ('no cached build' if not os.path.exists(library)
               else 'sources, flags or torch changed')
        print(f'{BUILD_NOTICE} into {directory} ({why}; once: about 30 s on 2 idle cores, '
              f'minutes on a busy machine{" or with CUDA" if with_cuda else ""})', flush=True)
        with _progress_lines(PROGRESS_INTERVAL_S):
            cpp_extension.load(name=name, build_directory=directory, with_cuda=with_cuda,
                               is_python_module=False, verbose=False, **settings)
    # Written whole and then renamed, so another process never reads half a key.
    partial = f'{key_file}.{os.getpid()}'
    with open(partial, 'w') as f:
        f.write(key)
    os.replace(partial, key_file)
    logger.info('minimm: native ops built and loaded from %s in %.1f s', directory,
                time.perf_counter() - start)
    return directory


def _reason(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f'{type(error).__name__}: {lines[-1] if lines else ""}'


def _load(required: bool) -> Tuple[str, Optional[str]]:
    """Load the native library: the prebuilt module, else a JIT build (with the CUDA kernels when
    a GPU and a toolkit are there, else, or when that build fails, without). Returns where it came
    from and why the CUDA kernels are missing, if they are; raises when nothing could be loaded."""
    named = os.environ.get('MINIMM_EXT_LIBRARY')
    if named:
        torch.ops.load_library(named)
        return f'the library named by MINIMM_EXT_LIBRARY ({named})', None
    prebuilt = _find_prebuilt()
    if prebuilt is not None:
        torch.ops.load_library(prebuilt)
        return f'prebuilt module {prebuilt}', None
    if not os.path.exists(os.path.join(CSRC_DIR, CPU_SOURCES[0])):
        raise RuntimeError(f'the C++ sources are not in {CSRC_DIR} (reinstall minimm: '
                           'pip install .)')
    toolkit = _cuda_toolkit()
    cuda_failure = None
    if toolkit is not None:
        os.environ.setdefault('CUDA_HOME', toolkit)
        try:
            return f'{_sources_words()}, JIT-built into {_jit_build(with_cuda=True)}', None
        except Exception as error:  # the CPU kernels may still build: try them alone
            if required:
                raise
            cuda_failure = f'the CUDA build failed ({_reason(error)})'
    return f'{_sources_words()}, JIT-built into {_jit_build(with_cuda=False)}', cuda_failure


def _sources_words() -> str:
    where = 'the installed package' if CSRC_DIR == PACKAGED_CSRC_DIR else 'the checkout'
    return f'the C++ sources of {where} ({CSRC_DIR})'


def _decide(policy: Policy) -> _Decision:
    if policy.disabled:
        why = 'MINIMM_NO_EXT=1'
        return _Decision({'cpu': 'fallback', 'cuda': 'fallback'}, {'cpu': why, 'cuda': why})
    try:
        where, cuda_failure = _load(policy.required)
    except Exception as error:  # any build or load failure means: use the fallback, say why
        why = _reason(error)
        if policy.required:
            raise RuntimeError('MINIMM_REQUIRE_EXT=1 but the native ops could not be loaded: '
                               f'{why}') from error
        warnings.warn(f'minimm: native ops unavailable, using the PyTorch fallback ({why})',
                      stacklevel=3)
        return _Decision({'cpu': 'fallback', 'cuda': 'fallback'}, {'cpu': why, 'cuda': why})
    for register in when_loaded:
        register()
    has_cuda = torch._C._dispatch_has_kernel_for_dispatch_key('minimm::ema_update_', 'CUDA')
    if has_cuda:
        cuda = ('native', where)
    elif not torch.cuda.is_available():
        cuda = ('fallback', 'no CUDA device (torch._foreach_* would be used)')
    else:
        cuda = ('fallback', (cuda_failure or 'the extension has no CUDA kernels (no CUDA toolkit '
                             'found; set CUDA_HOME)') + '; torch._foreach_* is used')
        if policy.required:
            raise RuntimeError(f'MINIMM_REQUIRE_EXT=1 but {cuda[1]}')
        warnings.warn(f'minimm: native CUDA ops unavailable: {cuda[1]}', stacklevel=3)
    return _Decision({'cpu': 'native', 'cuda': cuda[0]}, {'cpu': where, 'cuda': cuda[1]})


def _get() -> _Decision:
    global _decision
    if _decision is None:
        with _lock:
            if _decision is None:
                decision = _decide(Policy.from_env())
                for device in ('cpu', 'cuda'):
                    logger.info('minimm ops on %s: %s (%s)', device, decision.devices[device],
                                decision.reasons[device])
                _decision = decision
    return _decision


def native_for(device: torch.device) -> bool:
    """Whether tensors on ``device`` go to the native kernels."""
    return _get().devices.get(device.type) == 'native'


def backend_info() -> Dict[str, Dict[str, str]]:
    """Per device type, which backend the ops use and why, e.g.
    ``{'cpu': {'backend': 'native', 'reason': 'the C++ sources of ..., JIT-built into ...'},
    'cuda': {...}}``."""
    decision = _get()
    return {device: {'backend': decision.devices[device], 'reason': decision.reasons[device]}
            for device in ('cpu', 'cuda')}


def backend_words() -> str:
    """``backend_info()`` as a line: ``cpu: native (JIT build ...); cuda: fallback (no GPU)``."""
    return '; '.join(f'{device}: {info["backend"]} ({info["reason"]})'
                     for device, info in backend_info().items())
