"""Shared pytest fixtures, and the check that backend-dependent tests carry their marker."""
from functools import lru_cache
from pathlib import Path

import pytest

from backend_words import backend_words_in_code
from minimm.ops.loader import backend_info


def pytest_configure(config):
    config.addinivalue_line('markers', 'ops_backend: the outcome depends on the op backend '
                            '(native kernels or MINIMM_NO_EXT=1); CI runs these in both lanes')


@lru_cache(maxsize=None)
def _module_words(path: str):
    return backend_words_in_code(Path(path).read_text('utf-8'))


def pytest_collection_modifyitems(config, items):
    """Fail the run when a test module that names backend code (tests/backend_words.py) has a
    test without the ``ops_backend`` marker: CI's MINIMM_NO_EXT=1 lane would silently skip it.
    (tests/test_docs.py marks each doc from its own code, with the same rule.)"""
    unmarked = {}
    for item in items:
        if item.get_closest_marker('ops_backend') is not None:
            continue
        words = _module_words(str(item.path))
        if words:
            unmarked.setdefault(item.nodeid, words)
    if unmarked:
        lines = [f'  {nodeid}: names {", ".join(words[:3])}' for nodeid, words in unmarked.items()]
        raise pytest.UsageError(
            'these tests depend on the op backend but lack @pytest.mark.ops_backend (add '
            '`pytestmark = pytest.mark.ops_backend` to the module), so the MINIMM_NO_EXT=1 lane '
            'would miss them:\n' + '\n'.join(lines[:20]))


@pytest.fixture(params=['ref', 'native'])
def backend(request):
    """The ops backend under test: 'ref' (the PyTorch twins) always, 'native' (the C++ kernels)
    when this process has them for the CPU, else skipped with the loader's reason."""
    if request.param == 'native':
        cpu = backend_info()['cpu']
        if cpu['backend'] != 'native':
            pytest.skip(f"native ops unavailable: {cpu['reason']}")
    return request.param



@pytest.fixture
def native():
    """For tests comparing the native kernels with the twins: skipped, with the loader's reason,
    where this process has no native CPU kernels (the MINIMM_NO_EXT=1 lane)."""
    cpu = backend_info()['cpu']
    if cpu['backend'] != 'native':
        pytest.skip(f"native ops unavailable: {cpu['reason']}")
