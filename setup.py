"""Install minimm.

    pip install -e .            # pure Python; the native extension is JIT-built on first use
    MINIMM_BUILD_EXT=1 pip install -e . --no-build-isolation   # also build it ahead of time
"""
import os

from setuptools import find_packages, setup


def ext_modules_and_cmdclass():
    """The ahead-of-time extension build, only when asked for with MINIMM_BUILD_EXT=1."""
    if os.environ.get('MINIMM_BUILD_EXT') != '1':
        return [], {}
    from minimm_build import extension_and_cmdclass  # noqa: F401  (filled in by the ops work)
    return extension_and_cmdclass()


ext_modules, cmdclass = ext_modules_and_cmdclass()

setup(
    name='minimm',
    version='0.1.0',
    description='A small, readable re-implementation of the MMEngine/MMCV registry, hooks and runner, '
                'with a fused C++/CUDA EMA update.',
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    python_requires='>=3.9',
    packages=find_packages(include=['minimm', 'minimm.*']),
    package_data={'minimm': ['configs/*.py', 'dataset/data/*']},
    include_package_data=True,
    install_requires=['torch>=2.1', 'numpy', 'ninja'],
    extras_require={'test': ['pytest', 'hypothesis']},
    entry_points={'console_scripts': ['minimm=minimm.cli:main']},
    ext_modules=ext_modules,
    cmdclass=cmdclass,
)
