"""MMCV 1.x's optimizer building: ``OPTIMIZERS`` (every ``torch.optim`` class), the constructor
registry ``OPTIMIZER_BUILDERS`` and ``DefaultOptimizerConstructor`` (per-parameter lr and weight
decay from ``paramwise_cfg``)."""
from .builder import OPTIMIZER_BUILDERS, OPTIMIZERS, build_optimizer, build_optimizer_constructor
from .default_constructor import DefaultOptimizerConstructor

__all__ = [
    'OPTIMIZER_BUILDERS', 'OPTIMIZERS', 'DefaultOptimizerConstructor', 'build_optimizer',
    'build_optimizer_constructor'
]
