"""Where ``ManagerMixin`` used to live; it is in ``minimm/utils/manager.py`` now, as MMEngine keeps
it in ``mmengine/utils/manager.py``. This path stays for code that imports it from here (the
MMEngine peer suite's shim does)."""
from ..utils.manager import ManagerMixin

__all__ = ['ManagerMixin']
