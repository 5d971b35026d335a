"""The ahead-of-time build of minimm's native ops, used by setup.py when MINIMM_BUILD_EXT=1.

    MINIMM_BUILD_EXT=1 pip install -e . --no-build-isolation

builds ``minimm/_C*.so`` (the loader in minimm/ops/loader.py loads it before trying a JIT build).
The CUDA kernels are included when torch is a CUDA build and a CUDA toolkit is found
(``CUDA_HOME``); ``MINIMM_WITH_CUDA=1`` requires them and ``MINIMM_WITH_CUDA=0`` leaves them out.
Building CUDA on a machine without a GPU needs ``CUDA_HOME`` (the toolkit root) and
``TORCH_CUDA_ARCH_LIST`` (e.g. "9.0") set, see DESIGN.md. Sources and flags come from the loader,
so the JIT and ahead-of-time builds cannot drift apart.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def _with_cuda() -> bool:
    import torch
    from torch.utils.cpp_extension import CUDA_HOME
    choice = os.environ.get('MINIMM_WITH_CUDA')
    available = torch.version.cuda is not None and CUDA_HOME is not None and \
        os.path.exists(os.path.join(CUDA_HOME, 'bin', 'nvcc'))
    if choice == '1' and not available:
        raise RuntimeError('MINIMM_WITH_CUDA=1 but torch is not a CUDA build or no CUDA toolkit was found '
                           f'(CUDA_HOME={CUDA_HOME!r}); set CUDA_HOME to the folder holding bin/nvcc')
    return available if choice is None else choice == '1'


def extension_and_cmdclass():
    """``([extension], {'build_ext': ...})`` for setuptools' ``ext_modules`` and ``cmdclass``."""
    from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

    from minimm.ops.loader import build_settings
    with_cuda = _with_cuda()
    settings = build_settings(with_cuda)
    sources = [os.path.relpath(path, HERE) for path in settings['sources']]
    compile_args = {'cxx': settings['extra_cflags'], 'nvcc': settings['extra_cuda_cflags']}
    make = CUDAExtension if with_cuda else CppExtension
    extension = make('minimm._C', sources=sources, extra_compile_args=compile_args)
    return [extension], {'build_ext': BuildExtension}
