"""Registry: map a config's ``type`` string to a class or function, then build it.

Laid out as MMEngine's ``mmengine/registry/``: this file holds the ``Registry`` class (read it
first); beside it, ``build_functions.py`` builds from a config, ``root.py`` holds the root
registries, ``default_scope.py`` the "current package" setting, ``utils.py`` the helpers.

A config is plain data (``dict(type='StepLR', step_size=2)``), and a *registry* turns the ``type``
name into the callable that builds the object. Classes join a registry with a decorator::

    @HOOKS.register_module()
    class MyHook(Hook):
        ...

Registration happens when the module holding the decorator is *imported*; a name that is "not in
the registry" almost always means that import never ran (see ``custom_imports`` in
``config/config.py``, and ``locations`` below).

**Registries form a tree.** minimm's root registries (``root.py``) play MMEngine's, so their
scope is ``'mmengine'``. A downstream package never registers into them; it makes children::

    HOOKS = Registry('hook', parent=MMENGINE_HOOKS, locations=['mydet.engine.hooks'])

and its configs say ``default_scope = 'mydet'``. Looking a name up then goes: this registry, then
its parents up to the root. ``'scope.Name'`` names a module in another package's registry
anywhere in the tree. ``locations`` are modules imported on the first lookup, so a registry is
full before anyone asks it for a name.

Also: aliases, ``force``, any importable dotted path (``'torch.optim.SGD'``) as ``type``, and an
error that says what to do. Left out compared with MMEngine: the rich-table ``__repr__``.
"""
import importlib
import inspect
import sys
from contextlib import contextmanager
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from ..utils.misc import import_object
from .build_functions import build_from_cfg
from .default_scope import DefaultScope, registry_for_scope
from .lookup import import_scope_registry, not_found_message, walk

# minimm stands in for two libraries; its own registries answer to the scope names that the
# configs of those libraries' users name (``default_scope='mmengine'``).
_SCOPE_OF_PACKAGE = (('minimm.mmcv', 'mmcv'), ('minimm', 'mmengine'))


class Registry:
    """A name -> callable table with a ``build`` method, one node of a tree of registries.

    Args:
        name: what the registry holds (``'hook'``, ``'model'``...), used in messages.
        build_func: how to build from a config; by default the parent's, else
            :func:`build_from_cfg`.
        parent: the registry this one falls back to (a downstream package's ``HOOKS`` has
            minimm's ``HOOKS`` as parent).
        scope: the package name that selects this registry; by default the top-level package
            of the module that creates it.
        locations: modules to import on the first lookup (where the classes register).
    """

    def __init__(self, name: str, build_func: Optional[Callable] = None,
                 parent: Optional['Registry'] = None, scope: Optional[str] = None,
                 locations: List[str] = []):
        if scope is not None and not isinstance(scope, str):
            raise AssertionError(f'scope must be None or a str, but got {scope!r}')
        if parent is not None and not isinstance(parent, Registry):
            raise AssertionError(f'parent must be None or a Registry, but got {parent!r}')
        self.name = name
        self._module_dict: Dict[str, Callable] = {}
        self._children: Dict[str, 'Registry'] = {}
        self._locations = list(locations)
        self._imported = False
        self._scope = self.infer_scope() if scope is None else scope
        self.parent = parent
        if parent is not None:
            parent._add_child(self)
        if build_func is None:
            build_func = build_from_cfg if parent is None else parent.build_func
        self.build_func = build_func

    @staticmethod
    def infer_scope() -> str:
        """The top-level package of the module that called ``Registry(...)``."""
        # Frame 0 is this function, 1 is __init__, 2 the code that creates the registry.
        module = inspect.getmodule(sys._getframe(2))
        if module is None:  # an interactive session: no module to name the scope after
            return 'mmengine'
        for package, scope in _SCOPE_OF_PACKAGE:
            if module.__name__ == package or module.__name__.startswith(package + '.'):
                return scope
        return module.__name__.split('.')[0]

    @staticmethod
    def split_scope_key(key: str) -> Tuple[Optional[str], str]:
        """``'mydet.RetinaNet'`` -> ``('mydet', 'RetinaNet')``; ``'RetinaNet'``: ``(None, ...)``."""
        scope, dot, rest = key.partition('.')
        return (scope, rest) if dot else (None, key)

    @property
    def scope(self) -> str:
        return self._scope

    @property
    def children(self) -> Dict[str, 'Registry']:
        return self._children

    @property
    def module_dict(self) -> Dict[str, Callable]:
        return self._module_dict

    def __len__(self) -> int:
        return len(self._module_dict)

    def __contains__(self, key: str) -> bool:
        return self.get(key) is not None

    def __repr__(self) -> str:
        return f'Registry of {self.name} (scope {self._scope}): {sorted(self._module_dict)}'

    def _add_child(self, child: 'Registry') -> None:
        if child.scope in self._children:
            raise AssertionError(f'scope {child.scope} exists in {self.name} registry')
        self._children[child.scope] = child

    def _get_root_registry(self) -> 'Registry':
        root = self
        while root.parent is not None:
            root = root.parent
        return root

    def _search_child(self, scope: str) -> Optional['Registry']:
        """The registry of ``scope`` in the subtree below (and including) this one: the first one
        that ``walk`` meets, parents before children."""
        return next((node for node in walk(self) if node._scope == scope), None)

    def _registry_of_scope(self, scope: str) -> Optional['Registry']:
        """The registry of ``scope`` in this tree, after importing ``{scope}.registry`` if the
        tree has none yet (a package's registries join the tree when that module runs)."""
        root = self._get_root_registry()
        found = root._search_child(scope)
        if found is None:
            import_scope_registry(scope)
            found = root._search_child(scope)
        return found

    def import_from_location(self) -> None:
        """Import ``locations`` once, so that their classes are registered before a lookup."""
        if self._imported:
            return
        self._imported = True  # first, so a location that looks a name up cannot recurse
        try:
            for location in self._locations:
                importlib.import_module(location)
        except BaseException:
            self._imported = False
            raise

    def get(self, key: str) -> Any:
        """Return what is registered as ``key``, or ``None``.

        ``'Name'`` is looked up here, then in each parent up to the root. ``'scope.Name'`` is
        looked up in the registry of that scope (imported as ``scope.registry`` if it is not in
        the tree yet). Last, a dotted path nobody registered (``'torch.optim.SGD'``) is imported.
        """
        if not isinstance(key, str):
            raise TypeError(f'key must be a str, but got {type(key)}')
        scope, name = self.split_scope_key(key)
        obj = None
        if scope is None or scope == self._scope:
            # A scoped key belongs to this registry only, not to its parents.
            for registry in self._lineage() if scope is None else [self]:
                registry.import_from_location()
                obj = registry._module_dict.get(name)
                if obj is not None:
                    break
        else:
            target = self._registry_of_scope(scope)
            if target is not None:
                obj = target.get(name)
        return obj if obj is not None else import_object(key)

    @contextmanager
    def switch_scope_and_registry(self, scope: Optional[str]):
        """Make ``scope`` the default scope (``None``: keep the current one) for the ``with``
        block, and give the registry of the tree that serves it (this one if none does)."""
        with DefaultScope.overwrite_default_scope(scope):
            current = DefaultScope.get_current_instance()
            yield self if current is None else registry_for_scope(self, current.scope_name)

    def build(self, cfg: Any, *args, **kwargs) -> Any:
        """Build an object from ``cfg`` (a dict with ``type``) with ``build_func``; for
        ``build_from_cfg``, ``default_args=`` fills the keys ``cfg`` lacks."""
        return self.build_func(cfg, *args, **kwargs, registry=self)

    def _register_module(self, module: Callable, module_name: Union[str, List[str], None],
                         force: bool) -> None:
        if not callable(module):
            raise TypeError(f'module must be Callable, but got {type(module)}')
        names = module_name if module_name is not None else module.__name__
        names = [names] if isinstance(names, str) else list(names)
        # Check every alias before adding any, so that a refused call registers nothing.
        for i, name in enumerate(names):
            if not force and name in self._module_dict:
                existing = self._module_dict[name]
                raise KeyError(f'{name} is already registered in {self.name} at '
                               f'{getattr(existing, "__module__", "?")}; '
                               'pass force=True to replace it')
            if name in names[:i]:
                raise KeyError(f'{name} is listed twice in {names}')
        for name in names:
            self._module_dict[name] = module

    def register_module(self, name: Union[str, List[str], None] = None, force: bool = False,
                        module: Optional[Callable] = None):
        """Register a callable, as a decorator or a direct call.

        ``name`` may be a string or a list of aliases; by default the callable's ``__name__``.
        A duplicate name raises ``KeyError`` unless ``force=True``.
        """
        if not isinstance(force, bool):
            raise TypeError(f'force must be a boolean, but got {type(force)}')
        if not (name is None or isinstance(name, str)
                or (isinstance(name, (list, tuple)) and all(isinstance(n, str) for n in name))):
            raise TypeError('name must be None, an instance of str, or a sequence of str, '
                            f'but got {type(name)}')

        def _register(obj):
            self._register_module(obj, name, force)
            return obj

        return _register if module is None else _register(module)

    def not_found_message(self, type_name: str) -> str:
        """Why ``type_name`` cannot be built here (see ``utils.not_found_message``)."""
        return not_found_message(self, type_name)

    def _lineage(self) -> List['Registry']:
        """This registry and its parents, nearest first (where an unscoped name is looked up)."""
        return [self] + (self.parent._lineage() if self.parent is not None else [])
