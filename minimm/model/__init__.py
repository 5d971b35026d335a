"""Models: BaseModel, the data preprocessor, the demo DigitsCNN, the averaged models and the
distributed wrappers (importing registers them)."""
from .averaged_model import (BaseAveragedModel, ExponentialMovingAverage, MomentumAnnealingEMA,
                             PowerFunctionEMA, StochasticWeightAverage)
from .averaging_group import AveragingGroup
from .base_model import BaseDataPreprocessor, BaseModel
from .data_preprocessor import ImgDataPreprocessor, stack_batch
from .digits_cnn import DigitsCNN
from .fully_sharded import MMFullyShardedDataParallel
from .utils import convert_sync_batchnorm, revert_sync_batchnorm
from .wrappers import MMDistributedDataParallel, is_model_wrapper
