"""DefaultScope: which package's registries a build looks in first (MMEngine's
``mmengine/registry/default_scope.py``). Read ``registry.py`` first.

A config that says ``default_scope = 'mydet'`` makes the Runner create a ``DefaultScope`` whose
``scope_name`` is ``'mydet'``. From then on, ``HOOKS.build(...)`` on minimm's root ``HOOKS`` builds
from ``mydet``'s child ``HOOKS`` instead, so ``type='MyHook'`` finds the package's own hook and,
through the parent, every hook of minimm. A ``_scope_`` key in one config dict switches the scope
for that one build.

``DefaultScope`` is a ``ManagerMixin``: named global instances, the newest one current.
"""
import copy
import itertools
import logging
from contextlib import contextmanager
from typing import Optional

from ..utils.manager import ManagerMixin
from .lookup import import_scope_registry

_overwrite_ids = itertools.count()
# (scope, registry name) pairs already warned about: a run builds dozens of objects, and one
# warning says it all.
_warned = set()


class DefaultScope(ManagerMixin):
    """The current default scope, by name.

    Args:
        name: the instance's name (the Runner uses its experiment name).
        scope_name: the package whose registries a build uses first, e.g. ``'mmdet'``.
    """

    def __init__(self, name: str, scope_name: str):
        super().__init__(name)
        if not isinstance(scope_name, str):
            raise TypeError(f'scope_name should be a str, but got {type(scope_name)}')
        self._scope_name = scope_name

    @property
    def scope_name(self) -> str:
        return self._scope_name

    @classmethod
    def get_current_instance(cls) -> Optional['DefaultScope']:
        """The newest instance, or ``None`` when no scope was ever set (then nothing switches)."""
        return super().get_current_instance() if cls._instance_dict else None

    @classmethod
    @contextmanager
    def overwrite_default_scope(cls, scope_name: Optional[str]):
        """Make ``scope_name`` current for the ``with`` block (``None``: change nothing)."""
        if scope_name is None:
            yield
            return
        saved = copy.copy(cls._instance_dict)
        cls.get_instance(f'overwrite-{next(_overwrite_ids)}', scope_name=scope_name)
        try:
            yield
        finally:
            cls._instance_dict.clear()
            cls._instance_dict.update(saved)


def registry_for_scope(registry, scope_name: str):
    """The registry of ``scope_name`` in ``registry``'s tree, else ``registry`` itself.

    A package extends only the registries it needs (minidet: ``HOOKS`` and ``MODELS``), so for
    the others ``registry`` serves, silently. Only a scope whose ``{scope}.registry`` cannot be
    imported (the package is not installed) is warned about, once per registry: MMEngine warns
    in both cases, at every build.
    """
    found = registry._registry_of_scope(scope_name)
    if found is not None:
        return found
    if (scope_name, registry.name) not in _warned and not import_scope_registry(scope_name):
        _warned.add((scope_name, registry.name))
        root = registry._get_root_registry()
        _warn(f'Failed to search registry with scope "{scope_name}" in the "{root.name}" '
              f'registry tree: `{scope_name}.registry` cannot be imported (is `{scope_name}` '
              f'installed?), so the "{registry.scope}::{registry.name}" registry builds '
              'instead, and modules registered only in that package will not be found.')
    return registry


def init_default_scope(scope: str) -> None:
    """Make ``scope`` the default scope, warning when it replaces a different current one."""
    current = DefaultScope.get_current_instance()
    if current is None or not DefaultScope.check_instance_created(scope):
        DefaultScope.get_instance(scope, scope_name=scope)
    elif current.scope_name != scope:
        _warn(f'The current default scope "{current.scope_name}" is not "{scope}"; '
              f'init_default_scope makes "{scope}" the current default scope.')
        DefaultScope.get_instance(f'{scope}-{next(_overwrite_ids)}', scope_name=scope)


def _warn(message: str) -> None:
    # Here, and from the module: the logging package imports the registries to register in them.
    from ..logging.logger import print_log
    print_log(message, logger='current', level=logging.WARNING)
