"""Parameter schedulers (learning rate, momentum); importing this registers them all."""
from .builder import build_param_scheduler
from .cosine import CosineAnnealingParamScheduler, CosineRestartParamScheduler
from .decay import (ExponentialParamScheduler, MultiStepParamScheduler, PolyParamScheduler,
                    StepParamScheduler)
from .lr_scheduler import (ConstantLR, CosineAnnealingLR, CosineRestartLR, ExponentialLR, LinearLR,
                           LRSchedulerMixin, MultiStepLR, OneCycleLR, PolyLR, ReduceOnPlateauLR,
                           StepLR)
from .momentum_scheduler import (ConstantMomentum, CosineAnnealingMomentum, CosineRestartMomentum,
                                 ExponentialMomentum, LinearMomentum, MomentumSchedulerMixin,
                                 MultiStepMomentum, PolyMomentum, ReduceOnPlateauMomentum,
                                 StepMomentum)
from .one_cycle import OneCycleParamScheduler
from .param_scheduler import INF, _ParamScheduler
from .reduce_on_plateau import ReduceOnPlateauParamScheduler
from .warmup import ConstantParamScheduler, LinearParamScheduler

__all__ = [
    'build_param_scheduler', 'INF', '_ParamScheduler', 'LRSchedulerMixin',
    'MomentumSchedulerMixin',
    'ConstantParamScheduler', 'ConstantLR', 'ConstantMomentum',
    'LinearParamScheduler', 'LinearLR', 'LinearMomentum',
    'StepParamScheduler', 'StepLR', 'StepMomentum',
    'MultiStepParamScheduler', 'MultiStepLR', 'MultiStepMomentum',
    'ExponentialParamScheduler', 'ExponentialLR', 'ExponentialMomentum',
    'PolyParamScheduler', 'PolyLR', 'PolyMomentum',
    'CosineAnnealingParamScheduler', 'CosineAnnealingLR', 'CosineAnnealingMomentum',
    'CosineRestartParamScheduler', 'CosineRestartLR', 'CosineRestartMomentum',
    'OneCycleParamScheduler', 'OneCycleLR',
    'ReduceOnPlateauParamScheduler', 'ReduceOnPlateauLR', 'ReduceOnPlateauMomentum',
]
