"""LR and momentum mixins: how ``StepLR`` is made from ``StepParamScheduler``.

Every schedule is written once, for any ``param_name`` (``StepParamScheduler``). The classes people
put in configs fix the name with a mixin listed first in the bases::

    class StepLR(LRSchedulerMixin, StepParamScheduler): ...        # param_name='lr'
    class StepMomentum(MomentumSchedulerMixin, StepParamScheduler): ...

Momentum has two spellings in torch: SGD/RMSprop keep ``momentum`` in the group, Adam-like
optimizers keep ``betas=(beta1, beta2)`` where ``beta1`` plays the role of momentum. The momentum
mixin schedules a ``momentum`` entry in both cases and, for Adam-like optimizers, copies it back
into ``betas[0]`` after every step. Same as MMEngine.
"""
from .param_scheduler import OptimizerType


class LRSchedulerMixin:
    """Schedule ``param_groups[i]['lr']``."""

    def __init__(self, optimizer: OptimizerType, *args, **kwargs):
        super().__init__(optimizer, 'lr', *args, **kwargs)


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
