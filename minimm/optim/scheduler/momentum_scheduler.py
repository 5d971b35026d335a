"""The momentum schedulers: each ``*ParamScheduler`` with ``param_name='momentum'``.

Momentum has two spellings in torch: SGD/RMSprop keep ``momentum`` in the group, Adam-like
optimizers keep ``betas=(beta1, beta2)`` where ``beta1`` plays the role of momentum. The mixin
schedules a ``momentum`` entry in both cases and, for Adam-like optimizers, copies it back into
``betas[0]`` after every step. Same as MMEngine 0.10, which keeps these classes in the same file
(``mmengine/optim/scheduler/momentum_scheduler.py``); downstream schedulers import
``MomentumSchedulerMixin`` from here.
"""
from ...registry import PARAM_SCHEDULERS
from .cosine import CosineAnnealingParamScheduler, CosineRestartParamScheduler
from .decay import (ExponentialParamScheduler, MultiStepParamScheduler, PolyParamScheduler,
                    StepParamScheduler)
from .param_scheduler import OptimizerType
from .reduce_on_plateau import ReduceOnPlateauParamScheduler
from .warmup import ConstantParamScheduler, LinearParamScheduler


class MomentumSchedulerMixin:
    """Schedule ``momentum`` (or ``betas[0]`` for Adam-like optimizers)."""

    def __init__(self, optimizer: OptimizerType, *args, **kwargs):
        if not hasattr(optimizer, 'param_groups'):
            raise TypeError(f'optimizer should have param_groups, but got {type(optimizer)}')
        self.use_betas = False
        if 'momentum' not in optimizer.defaults:
            if 'betas' not in optimizer.defaults:
                raise ValueError(f'{type(self).__name__}: the optimizer has neither `momentum` nor '
                                 '`betas`, so there is no momentum to schedule')
            self.use_betas = True
            for group in optimizer.param_groups:
                group['momentum'] = group['betas'][0]
        super().__init__(optimizer, 'momentum', *args, **kwargs)

    def step(self, *args, **kwargs) -> None:
        super().step(*args, **kwargs)
        if self.use_betas:
            for group in self.optimizer.param_groups:
                group['betas'] = (group['momentum'], group['betas'][1])


@PARAM_SCHEDULERS.register_module()
class ConstantMomentum(MomentumSchedulerMixin, ConstantParamScheduler):
    """ConstantParamScheduler on ``momentum``."""


@PARAM_SCHEDULERS.register_module()
class LinearMomentum(MomentumSchedulerMixin, LinearParamScheduler):
    """LinearParamScheduler on ``momentum``."""


@PARAM_SCHEDULERS.register_module()
class StepMomentum(MomentumSchedulerMixin, StepParamScheduler):
    """StepParamScheduler on ``momentum``."""


@PARAM_SCHEDULERS.register_module()
class MultiStepMomentum(MomentumSchedulerMixin, MultiStepParamScheduler):
    """MultiStepParamScheduler on ``momentum``."""


@PARAM_SCHEDULERS.register_module()
class ExponentialMomentum(MomentumSchedulerMixin, ExponentialParamScheduler):
    """ExponentialParamScheduler on ``momentum``."""


@PARAM_SCHEDULERS.register_module()
class PolyMomentum(MomentumSchedulerMixin, PolyParamScheduler):
    """PolyParamScheduler on ``momentum``."""


@PARAM_SCHEDULERS.register_module()
class CosineAnnealingMomentum(MomentumSchedulerMixin, CosineAnnealingParamScheduler):
    """CosineAnnealingParamScheduler on ``momentum``."""


@PARAM_SCHEDULERS.register_module()
class CosineRestartMomentum(MomentumSchedulerMixin, CosineRestartParamScheduler):
    """CosineRestartParamScheduler on ``momentum``."""


@PARAM_SCHEDULERS.register_module()
class ReduceOnPlateauMomentum(MomentumSchedulerMixin, ReduceOnPlateauParamScheduler):
    """ReduceOnPlateauParamScheduler on ``momentum``."""
