"""The extension loader: lazy, one decision per process, and a fallback that says why."""
import json
import os
import subprocess
import sys

import pytest

from minimm.ops import backend_info, loader

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py


def test_backend_info_names_a_backend_and_a_reason_per_device():
    info = backend_info()
    assert set(info) == {'cpu', 'cuda'}
    for device in info.values():
        assert device['backend'] in ('native', 'fallback') and device['reason']


def test_import_is_lazy_and_no_ext_means_fallback():
    code = ('import json, minimm.ops as ops; lazy = ops.loader._decision is None; '
            'import torch; a = [torch.zeros(3)]; ops.ema_update_(a, [torch.ones(3)], 0.5); '
            'print(json.dumps([lazy, ops.backend_info(), a[0].tolist()]))')
    env = dict(os.environ, MINIMM_NO_EXT='1')
    done = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True, timeout=120,
                          cwd=loader.REPO_DIR)
    assert done.returncode == 0, done.stderr
    lazy, info, values = json.loads(done.stdout.strip().splitlines()[-1])
    assert lazy
    assert info['cpu'] == {'backend': 'fallback', 'reason': 'MINIMM_NO_EXT=1'}
    assert values == [0.5, 0.5, 0.5]
    assert 'native ops unavailable' not in done.stderr  # a deliberate choice draws no warning


@pytest.fixture
def no_prebuilt(monkeypatch):
    monkeypatch.delenv('MINIMM_NO_EXT', raising=False)
    monkeypatch.setattr(loader, '_find_prebuilt', lambda: None)
    monkeypatch.setenv('CXX', '/nonexistent/c++')


def test_a_failed_build_falls_back_with_one_warning_naming_the_reason(no_prebuilt, monkeypatch):
    monkeypatch.delenv('MINIMM_REQUIRE_EXT', raising=False)
    with pytest.warns(UserWarning, match='no C\\+\\+ compiler found'):
        decision = loader._decide()
    assert decision.devices == {'cpu': 'fallback', 'cuda': 'fallback'}
    assert 'no C++ compiler found' in decision.reasons['cpu']


def test_require_ext_turns_a_failed_build_into_an_error(no_prebuilt, monkeypatch):
    monkeypatch.setenv('MINIMM_REQUIRE_EXT', '1')
    with pytest.raises(RuntimeError, match='MINIMM_REQUIRE_EXT=1 .*no C\\+\\+ compiler found'):
        loader._decide()


def test_missing_sources_fall_back(no_prebuilt, monkeypatch, tmp_path):
    monkeypatch.delenv('MINIMM_REQUIRE_EXT', raising=False)
    monkeypatch.setattr(loader, 'CSRC_DIR', str(tmp_path))
    with pytest.warns(UserWarning, match='sources are not in'):
        assert loader._decide().devices['cpu'] == 'fallback'
