"""The Runner, its loops, hook priorities and checkpoint files."""
from .base_loop import BaseLoop
from .checkpoint import find_latest_checkpoint
from .loops import EpochBasedTrainLoop, IterBasedTrainLoop, TestLoop, ValLoop
from .priority import Priority, get_priority
from .runner import Runner

__all__ = ['Runner', 'BaseLoop', 'Priority', 'get_priority', 'EpochBasedTrainLoop', 'IterBasedTrainLoop',
           'ValLoop', 'TestLoop', 'find_latest_checkpoint']
