"""Install minimm.

    pip install -e .            # from a checkout; the native extension is JIT-built on first use
    pip install .               # or a wheel (pip wheel . -w dist): the same, from the package

The C++/CUDA sources travel with the package (``minimm/csrc/`` in a wheel or an install, copied
there by ``build_py`` below), so every kind of install JIT-builds the same extension on first use,
into the user's cache (see minimm/ops/loader.py), never into site-packages.

The native ops can also be built ahead of time into ``minimm/_C*.so`` (the loader in
minimm/ops/loader.py tries it before a JIT build):

    MINIMM_BUILD_EXT=1 pip install -e . --no-build-isolation

The CUDA kernels are included when torch is a CUDA build and a CUDA toolkit is found
(``CUDA_HOME``); ``MINIMM_WITH_CUDA=1`` requires them and ``MINIMM_WITH_CUDA=0`` leaves them out.
Building CUDA on a machine without a GPU needs ``CUDA_HOME`` (the toolkit root) and
``TORCH_CUDA_ARCH_LIST`` (e.g. "9.0") set, see tests/compile_cuda.sh. Sources and flags come from
the loader, so the JIT and ahead-of-time builds cannot drift apart.
"""
import os
import shutil

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildPyWithSources(build_py):
    """build_py, plus a copy of csrc/ as minimm/csrc/: the loader's JIT build finds it there."""

    def run(self):
        super().run()
        if not getattr(self, 'editable_mode', False):  # an editable install reads csrc/ itself
            target = os.path.join(self.build_lib, 'minimm', 'csrc')
            shutil.copytree(os.path.join(HERE, 'csrc'), target, dirs_exist_ok=True)


def _with_cuda() -> bool:
    import torch
    from torch.utils.cpp_extension import CUDA_HOME
    choice = os.environ.get('MINIMM_WITH_CUDA')
    available = torch.version.cuda is not None and CUDA_HOME is not None and \
        os.path.exists(os.path.join(CUDA_HOME, 'bin', 'nvcc'))
    if choice == '1' and not available:
        raise RuntimeError('MINIMM_WITH_CUDA=1 but torch is not a CUDA build or no CUDA toolkit '
                           f'was found (CUDA_HOME={CUDA_HOME!r}); set CUDA_HOME to the folder '
                           'holding bin/nvcc')
    return available if choice is None else choice == '1'


def ext_modules_and_cmdclass():
    """``([extension], {'build_ext': ..., 'build_py': ...})`` when MINIMM_BUILD_EXT=1, else no
    extension and only the build_py that copies the sources."""
    if os.environ.get('MINIMM_BUILD_EXT') != '1':
        return [], {'build_py': BuildPyWithSources}
    from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

    from minimm.ops.loader import build_settings
    with_cuda = _with_cuda()
    settings = build_settings(with_cuda)
    sources = [os.path.relpath(path, HERE) for path in settings['sources']]
    compile_args = {'cxx': settings['extra_cflags'], 'nvcc': settings['extra_cuda_cflags']}
    make = CUDAExtension if with_cuda else CppExtension
    extension = make('minimm._C', sources=sources, extra_compile_args=compile_args)
    return [extension], {'build_ext': BuildExtension, 'build_py': BuildPyWithSources}


ext_modules, cmdclass = ext_modules_and_cmdclass()

setup(
    name='minimm',
    version='0.1.0',
    description='A small, readable re-implementation of the MMEngine/MMCV registry, hooks and runner, '
                'with a fused C++/CUDA EMA update.',
    long_description=open(os.path.join(HERE, 'README.md'), encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    python_requires='>=3.9',
    packages=find_packages(include=['minimm', 'minimm.*']),
    package_data={'minimm': ['configs/*.py', 'dataset/data/*']},
    include_package_data=True,
    install_requires=['torch>=2.1', 'numpy', 'ninja'],
    # The logging services are optional: each backend imports its package on first use.
    # plot: `minimm plot`, `minimm plot-lr` and the tutorials' pictures (the tests redraw them).
    extras_require={
        'test': ['pytest', 'hypothesis', 'tensorboard', 'matplotlib'],
        'tensorboard': ['tensorboard'],
        'loggers': ['tensorboard', 'wandb', 'mlflow-skinny', 'neptune', 'dvclive', 'clearml'],
        'plot': ['matplotlib'],
    },
    entry_points={'console_scripts': ['minimm=minimm.cli:command_line']},
    ext_modules=ext_modules,
    cmdclass=cmdclass,
)
