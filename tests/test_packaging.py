"""`pip install .` and a wheel give the native ops, as an editable install does: the sources travel
with the package and are JIT-built into the user's cache on first use, never into site-packages.

Each install goes into a fresh virtual environment that borrows this interpreter's packages
(torch...) through a .pth file, so nothing is downloaded; `minimm info` then says which build it
loaded. About a minute: one cold CPU build, which the wheel's install then finds in the cache."""
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
# What a copy of the checkout leaves out: environments, build outputs, caches (ignore_patterns
# alone would match minimm/dist/ too).
ANYWHERE = shutil.ignore_patterns('.git', '.venv*', '.torch_extensions', '*.egg-info',
                                  '__pycache__', '.pytest_cache', '.hypothesis', 'work_dirs', '*.so')
AT_THE_ROOT = {'build', 'dist'}  # setup.py's outputs; minimm/dist/ is a package


def not_sources(folder, names):
    left_out = ANYWHERE(folder, names)
    return left_out | (AT_THE_ROOT & set(names) if Path(folder) == REPO else set())


def fresh_venv(path: Path) -> Path:
    """A venv without pip of its own, seeing this interpreter's site-packages after its own."""
    subprocess.run([sys.executable, '-m', 'venv', '--without-pip', str(path)], check=True)
    python = path / 'bin' / 'python'
    own = run_python(python, 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    borrowed = {sysconfig.get_paths()['purelib'], str(Path(torch.__file__).parent.parent)}
    Path(own, 'borrowed.pth').write_text('\n'.join(sorted(borrowed)) + '\n')
    return python


def run_python(python: Path, code: str, cwd=None) -> str:
    return subprocess.run([str(python), '-c', code], check=True, capture_output=True, text=True,
                          cwd=cwd).stdout.strip()


def pip(python: Path, *args: str) -> None:
    subprocess.run([sys.executable, '-m', 'pip', '--python', str(python), *args, '--no-deps',
                    '--no-build-isolation', '--no-index', '-q'], check=True, capture_output=True)


def minimm_info(python: Path, home: Path) -> str:
    unset = ('TORCH_EXTENSIONS_DIR', 'XDG_CACHE_HOME', 'PYTHONPATH')
    env = {k: v for k, v in os.environ.items() if not k.startswith('MINIMM_') and k not in unset}
    env['HOME'] = str(home)
    run = subprocess.run([str(python.parent / 'minimm'), 'info'], env=env, cwd=home,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_pip_install_and_a_wheel_give_the_native_ops_built_into_the_user_cache(tmp_path):
    source = tmp_path / 'minimm-src'
    shutil.copytree(REPO, source, ignore=not_sources)
    home = tmp_path / 'home'
    home.mkdir()
    cache = home / '.cache' / 'minimm' / 'torch_extensions' / 'minimm_ext_cpu'

    installed = fresh_venv(tmp_path / 'venv-install')
    pip(installed, 'install', str(source))
    out = minimm_info(installed, home)
    where = 'import minimm, os; print(os.path.dirname(minimm.__file__))'
    package = Path(run_python(installed, where, cwd=home))
    assert package.is_relative_to(tmp_path / 'venv-install')
    words = f'the C++ sources of the installed package ({package / "csrc"}), JIT-built into {cache}'
    assert f'native ops on cpu: native ({words})' in out, out
    assert not list(package.glob('**/*.so')), 'nothing is built into site-packages'

    pip(installed, 'wheel', str(source), '-w', str(tmp_path / 'dist'))
    wheel, = (tmp_path / 'dist').glob('minimm-*.whl')
    assert 'minimm/csrc/ema_kernel.cu' in zipfile.ZipFile(wheel).namelist()
    from_wheel = fresh_venv(tmp_path / 'venv-wheel')
    pip(from_wheel, 'install', str(wheel))
    out = minimm_info(from_wheel, home)
    assert 'native ops on cpu: native (the C++ sources of the installed package' in out, out
    assert f'JIT-built into {cache})' in out, out  # the same sources: the cached build is reused
