"""minimm.mmcv: MMCV 1.x's ``mmcv.runner``, for contrast with the MMEngine-style core.

Code written against ``mmcv.runner`` (v1.7) runs with the import changed to ``minimm.mmcv``.
The hooks, stages, priorities and runner counters follow MMCV 1.7.2; everything that is not
MMCV-specific (Registry, Priority, checkpoint files, ops, collectives) is minimm's shared code.
"""
from minimm.runner.priority import Priority, get_priority

from .builder import RUNNERS, build_from_cfg, build_runner
from .hooks import HOOKS, Hook
from .log_buffer import LogBuffer

__all__ = ['Priority', 'get_priority', 'RUNNERS', 'build_from_cfg', 'build_runner', 'HOOKS', 'Hook',
           'LogBuffer']
