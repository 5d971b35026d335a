"""The extension loader: lazy, one decision per process, and a fallback that says why."""
import json
import os
import shutil
import subprocess
import sys
import time

import pytest
import torch

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
def no_prebuilt(monkeypatch, tmp_path):
    monkeypatch.delenv('MINIMM_NO_EXT', raising=False)
    monkeypatch.setattr(loader, '_find_prebuilt', lambda: None)
    monkeypatch.setenv('CXX', '/nonexistent/c++')
    monkeypatch.setenv('TORCH_EXTENSIONS_DIR', str(tmp_path / 'no_cache'))  # nothing cached


def test_the_policy_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv('MINIMM_NO_EXT', '1')
    monkeypatch.setenv('MINIMM_REQUIRE_EXT', '0')
    assert loader.Policy.from_env() == loader.Policy(disabled=True, required=False)
    assert loader._decide(loader.Policy.from_env()).reasons == {'cpu': 'MINIMM_NO_EXT=1', 'cuda': 'MINIMM_NO_EXT=1'}


def test_a_failed_build_falls_back_with_one_warning_naming_the_reason(no_prebuilt):
    with pytest.warns(UserWarning, match='no C\\+\\+ compiler found'):
        decision = loader._decide(loader.Policy(disabled=False, required=False))
    assert decision.devices == {'cpu': 'fallback', 'cuda': 'fallback'}
    assert 'no C++ compiler found' in decision.reasons['cpu']


def test_require_ext_turns_a_failed_build_into_an_error(no_prebuilt):
    with pytest.raises(RuntimeError, match='MINIMM_REQUIRE_EXT=1 .*no C\\+\\+ compiler found'):
        loader._decide(loader.Policy(disabled=False, required=True))


def test_missing_sources_fall_back(no_prebuilt, monkeypatch, tmp_path):
    monkeypatch.setattr(loader, 'CSRC_DIR', str(tmp_path))
    with pytest.warns(UserWarning, match='sources are not in'):
        assert loader._decide(loader.Policy(disabled=False, required=False)).devices['cpu'] == 'fallback'


@pytest.mark.parametrize('value', ['yes', 'true', '2'])
def test_an_unknown_switch_value_is_an_error_naming_it(monkeypatch, value):
    monkeypatch.setenv('MINIMM_NO_EXT', value)
    with pytest.raises(ValueError, match=f"MINIMM_NO_EXT='{value}': allowed values are 1 .* 0 or unset"):
        loader.Policy.from_env()


def test_a_build_runs_the_ninja_package_binary_whatever_the_path(monkeypatch, tmp_path, capsys):
    ninja = pytest.importorskip('ninja')
    decoy = tmp_path / 'bin'
    decoy.mkdir()
    (decoy / 'ninja').write_text('#!/bin/sh\necho 1.0.0\n')
    (decoy / 'ninja').chmod(0o755)
    monkeypatch.setenv('PATH', f'{decoy}{os.pathsep}{os.environ["PATH"]}')
    monkeypatch.setenv('TORCH_EXTENSIONS_DIR', str(tmp_path / 'cache'))
    used = []
    cpp_extension = loader._import_cpp_extension()
    monkeypatch.setattr(cpp_extension, 'load', lambda **kwargs: used.append(shutil.which('ninja')))
    loader._jit_build(with_cuda=False)
    assert used == [os.path.join(ninja.BIN_DIR, 'ninja')]
    assert 'minimm: compiling the native ops' in capsys.readouterr().out  # a build always says so
    assert shutil.which('ninja') == str(decoy / 'ninja')  # PATH is given back


def test_a_build_prints_progress_lines_the_docs_drop(monkeypatch, tmp_path, capsys):
    """The compiler is silent until it is done (minutes on a busy machine): the build prints a
    line every PROGRESS_INTERVAL_S meanwhile, each starting as tests/test_docs.py's mask rule
    expects, so no tutorial's shown output depends on whether its run compiled."""
    monkeypatch.setenv('TORCH_EXTENSIONS_DIR', str(tmp_path))
    monkeypatch.setattr(loader, 'PROGRESS_INTERVAL_S', 0.01)
    printed = []

    def slow_build(**kwargs):  # returns once a progress line is out (or after 60 s)
        deadline = time.monotonic() + 60
        while 'still compiling' not in ''.join(printed) and time.monotonic() < deadline:
            printed.append(capsys.readouterr().out)
            time.sleep(0.01)

    cpp_extension = loader._import_cpp_extension()
    monkeypatch.setattr(cpp_extension, 'load', slow_build)
    loader._jit_build(with_cuda=False)
    lines = ''.join(printed + [capsys.readouterr().out]).splitlines()
    assert 'minutes on a busy machine' in lines[0]
    assert any('still compiling' in line for line in lines[1:]), lines
    assert all(line.startswith('minimm: compiling the native ops') for line in lines), lines


def test_a_cached_build_is_loaded_without_ninja_or_a_compiler(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv('TORCH_EXTENSIONS_DIR', str(tmp_path))
    monkeypatch.setenv('CXX', '/nonexistent/c++')
    monkeypatch.setenv('PATH', str(tmp_path / 'empty'))
    cached = tmp_path / 'minimm_ext_cpu'
    cached.mkdir()
    (cached / 'minimm_ext_cpu.so').write_bytes(b'')
    (cached / 'minimm_ext_cpu.key').write_text(loader._build_key(False, loader.build_settings(False)))
    loaded = []
    monkeypatch.setattr(torch.ops, 'load_library', loaded.append)
    assert loader._jit_build(with_cuda=False) == str(cached)
    assert loaded == [str(cached / 'minimm_ext_cpu.so')]
    assert 'compiling' not in capsys.readouterr().out
    (cached / 'minimm_ext_cpu.key').write_text('built from other sources')
    with pytest.raises(RuntimeError, match='no C\\+\\+ compiler'):  # a stale cache is rebuilt
        loader._jit_build(with_cuda=False)


def test_the_real_cached_build_loads_in_a_process_without_a_compiler(native):
    code = 'import json, minimm.ops as ops; print(json.dumps(ops.backend_info()))'
    env = dict(os.environ, PATH='', CXX='/nonexistent/c++')
    env.pop('MINIMM_NO_EXT', None)
    done = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True, timeout=120,
                          cwd=loader.REPO_DIR)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1])['cpu']['backend'] == 'native', done.stderr
    assert 'compiling' not in done.stdout
