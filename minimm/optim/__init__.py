"""Optimizer wrappers, their constructors and parameter schedulers; importing this registers them."""
from .amp_optim_wrapper import AmpOptimWrapper
from .optim_wrapper import OptimWrapper
from .optimizer import DefaultOptimWrapperConstructor, build_optim_wrapper
from .scheduler import *  # noqa: F401,F403  (every scheduler, and build_param_scheduler)
from .scheduler import __all__ as _scheduler_all

__all__ = ['OptimWrapper', 'AmpOptimWrapper', 'build_optim_wrapper',
           'DefaultOptimWrapperConstructor'] + _scheduler_all
