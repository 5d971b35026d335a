"""``Priority`` and ``get_priority``, where MMEngine has them (``mmengine/runner/priority.py``).

Both worlds order hooks by the same nine levels, so the definition lives once, on the floor both
stand on: ``minimm/priority.py``.
"""
from ..priority import Priority, get_priority

__all__ = ['Priority', 'get_priority']
