"""Building an optimizer from config: the OptimWrapper constructors and ``build_optim_wrapper``
(MMEngine 0.10's ``mmengine/optim/optimizer/`` keeps them, with the wrappers, in this folder)."""
from .builder import build_optim_wrapper
from .default_constructor import DefaultOptimWrapperConstructor

__all__ = ['build_optim_wrapper', 'DefaultOptimWrapperConstructor']
