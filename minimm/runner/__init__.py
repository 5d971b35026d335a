"""The Runner (and the FlexibleRunner, with its strategies), its loops, hook priorities and
MMEngine's checkpoint API (``checkpoint.py``; the file I/O under it: ``minimm/checkpoint.py``)."""
from .base_loop import BaseLoop
from .checkpoint import (CheckpointLoader, find_latest_checkpoint, get_state_dict, load_checkpoint,
                         load_state_dict, save_checkpoint, weights_to_cpu)
from .loops import EpochBasedTrainLoop, IterBasedTrainLoop, TestLoop, ValLoop
from .priority import Priority, get_priority
from .runner import Runner
from .flexible_runner import FlexibleRunner
from .strategies import DDPStrategy, FSDPStrategy

__all__ = ['Runner', 'FlexibleRunner', 'DDPStrategy', 'FSDPStrategy', 'BaseLoop', 'Priority',
           'get_priority', 'EpochBasedTrainLoop', 'IterBasedTrainLoop', 'ValLoop', 'TestLoop',
           'CheckpointLoader', 'find_latest_checkpoint', 'get_state_dict', 'load_checkpoint',
           'load_state_dict', 'save_checkpoint', 'weights_to_cpu']
