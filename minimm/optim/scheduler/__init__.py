"""Parameter schedulers (learning rate, momentum); importing this registers them all."""
from .builder import build_param_scheduler
from .cosine import (CosineAnnealingLR, CosineAnnealingMomentum, CosineAnnealingParamScheduler,
                     CosineRestartLR, CosineRestartMomentum, CosineRestartParamScheduler)
from .decay import (ExponentialLR, ExponentialMomentum, ExponentialParamScheduler,
                    MultiStepLR, MultiStepMomentum, MultiStepParamScheduler, PolyLR,
                    PolyMomentum, PolyParamScheduler, StepLR, StepMomentum, StepParamScheduler)
from .mixins import LRSchedulerMixin, MomentumSchedulerMixin
from .one_cycle import OneCycleLR, OneCycleParamScheduler
from .param_scheduler import INF, _ParamScheduler
from .reduce_on_plateau import (ReduceOnPlateauLR, ReduceOnPlateauMomentum,
                                ReduceOnPlateauParamScheduler)
from .warmup import (ConstantLR, ConstantMomentum, ConstantParamScheduler, LinearLR,
                     LinearMomentum, LinearParamScheduler)

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
