"""The learning-rate schedulers: each ``*ParamScheduler`` with ``param_name='lr'``.

Every schedule is written once, for any ``param_name`` (``StepParamScheduler`` in ``decay.py``).
The classes people put in configs fix the name with a mixin listed first in the bases::

    class StepLR(LRSchedulerMixin, StepParamScheduler): ...        # param_name='lr'

MMEngine 0.10 keeps the same classes in the same file
(``mmengine/optim/scheduler/lr_scheduler.py``); downstream schedulers import ``LRSchedulerMixin``
from here.
"""
from ...registry import PARAM_SCHEDULERS
from .cosine import CosineAnnealingParamScheduler, CosineRestartParamScheduler
from .decay import (ExponentialParamScheduler, MultiStepParamScheduler, PolyParamScheduler,
                    StepParamScheduler)
from .one_cycle import OneCycleParamScheduler
from .param_scheduler import OptimizerType
from .reduce_on_plateau import ReduceOnPlateauParamScheduler
from .warmup import ConstantParamScheduler, LinearParamScheduler


class LRSchedulerMixin:
    """Schedule ``param_groups[i]['lr']``."""

    def __init__(self, optimizer: OptimizerType, *args, **kwargs):
        super().__init__(optimizer, 'lr', *args, **kwargs)


@PARAM_SCHEDULERS.register_module()
class ConstantLR(LRSchedulerMixin, ConstantParamScheduler):
    """ConstantParamScheduler on ``lr``."""


@PARAM_SCHEDULERS.register_module()
class LinearLR(LRSchedulerMixin, LinearParamScheduler):
    """LinearParamScheduler on ``lr``: the usual warm-up."""


@PARAM_SCHEDULERS.register_module()
class StepLR(LRSchedulerMixin, StepParamScheduler):
    """StepParamScheduler on ``lr``."""


@PARAM_SCHEDULERS.register_module()
class MultiStepLR(LRSchedulerMixin, MultiStepParamScheduler):
    """MultiStepParamScheduler on ``lr``."""


@PARAM_SCHEDULERS.register_module()
class ExponentialLR(LRSchedulerMixin, ExponentialParamScheduler):
    """ExponentialParamScheduler on ``lr``."""


@PARAM_SCHEDULERS.register_module()
class PolyLR(LRSchedulerMixin, PolyParamScheduler):
    """PolyParamScheduler on ``lr``."""


@PARAM_SCHEDULERS.register_module()
class CosineAnnealingLR(LRSchedulerMixin, CosineAnnealingParamScheduler):
    """CosineAnnealingParamScheduler on ``lr``."""


@PARAM_SCHEDULERS.register_module()
class CosineRestartLR(LRSchedulerMixin, CosineRestartParamScheduler):
    """CosineRestartParamScheduler on ``lr``."""


@PARAM_SCHEDULERS.register_module()
class OneCycleLR(LRSchedulerMixin, OneCycleParamScheduler):
    """OneCycleParamScheduler on ``lr``."""


@PARAM_SCHEDULERS.register_module()
class ReduceOnPlateauLR(LRSchedulerMixin, ReduceOnPlateauParamScheduler):
    """ReduceOnPlateauParamScheduler on ``lr``."""
