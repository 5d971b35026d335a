"""``Priority`` and ``get_priority``, where MMCV 1.7 has them (``mmcv/runner/priority.py``).

The nine levels and the lookup are the same in MMCV and MMEngine, so this is the one definition
both worlds share (``minimm/priority.py``, on the lowest floor: importing it loads nothing of the
MMEngine side).
"""
from minimm.priority import Priority, get_priority

__all__ = ['Priority', 'get_priority']
