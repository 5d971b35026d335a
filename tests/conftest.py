"""Shared pytest fixtures."""
import pytest

from minimm.ops.loader import backend_info


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
