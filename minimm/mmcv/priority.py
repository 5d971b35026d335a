"""``Priority`` and ``get_priority``, where MMCV 1.7 has them (``mmcv/runner/priority.py``).

The nine levels and the lookup are the same in MMCV and MMEngine, so this is the one definition
both worlds share (``minimm/runner/priority.py``).
"""
from minimm.runner.priority import Priority, get_priority

__all__ = ['Priority', 'get_priority']
