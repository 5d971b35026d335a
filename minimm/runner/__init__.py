"""The Runner, its loops and hook priorities (checkpoint files: ``minimm/checkpoint.py``)."""
from ..checkpoint import find_latest_checkpoint
from .base_loop import BaseLoop
from .loops import EpochBasedTrainLoop, IterBasedTrainLoop, TestLoop, ValLoop
from .priority import Priority, get_priority
from .runner import Runner

__all__ = ['Runner', 'BaseLoop', 'Priority', 'get_priority', 'EpochBasedTrainLoop',
           'IterBasedTrainLoop', 'ValLoop', 'TestLoop', 'find_latest_checkpoint']
