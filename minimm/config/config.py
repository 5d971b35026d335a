"""Config: load a ``.py`` config file, with ``_base_`` inheritance and dotted-key overrides.

An OpenMMLab config is a Python file whose module-level names are the settings::

    _base_ = ['../_base_/schedule.py']          # inherit, then override
    model = dict(type='DigitsCNN', num_classes=10)
    optim_wrapper = dict(optimizer=dict(lr=0.05))  # merged into the base's optim_wrapper

:meth:`Config.fromfile` executes the file in a fresh namespace and keeps every top-level name except
dunder names, modules, classes and functions (``from torch.optim import SGD`` is not a setting;
``type=SGD`` in a dict is). Base files (``_base_``, a path or a list of paths relative to the
file) are loaded first; the child's dicts are merged into theirs key by key, and a child dict
with ``_delete_=True`` replaces the base's dict instead. While the file runs, ``_base_`` refers to
the merged base config, so ``lr = _base_.optim_wrapper.optimizer.lr * 2`` works.
``custom_imports = dict(imports=['my_pkg.my_hooks'])`` imports modules (which registers their
classes) when the config is loaded.

:meth:`Config.merge_from_dict` applies ``--cfg-options`` style overrides
(``{'model.num_classes': 5, 'custom_hooks.0.momentum': 0.001}``, parsed in ``cfg_options.py``);
:meth:`Config.dump` and :attr:`Config.pretty_text` write the settings back as Python
(``dump.py``).

Before a file runs, its text is rewritten as MMEngine rewrites it (``substitution.py``):
``{{fileBasenameNoExtension}}`` and the other predefined variables, ``{{$ENV_NAME:default}}``, and
``{{_base_.a.b}}``, which stands for the base config's value at ``a.b`` (any object, also inside
nested dicts and lists). A ``_base_`` edited in place (``_base_.model.depth = 50``) is the base the
child is merged into, as in MMEngine.

Left out compared with MMEngine: YAML/JSON configs, the lazy-import (``read_base``) style and
scopes; a config using one is an error naming the file and the line. Differences on purpose: the
caller's dicts are never mutated (MMEngine pops ``_delete_`` from them), ``_delete_`` is removed at
every level, and errors name the offending dotted key.
"""
import ast
import importlib
import inspect
import os.path as osp
import warnings
from typing import Any, Dict, List, Optional, Union

from .dump import format_config
from .substitution import (_pre_substitute_base_vars, _substitute_base_vars,
                           _substitute_env_variables, _substitute_predefined_vars,
                           parse_config_text)

__all__ = ['Config', 'ConfigDict']

BASE_KEY = '_base_'
DELETE_KEY = '_delete_'
RESERVED_KEYS = ('filename', 'text', 'pretty_text')


class ConfigDict(dict):
    """A dict whose keys can also be read and written as attributes: ``cfg.model.type``.

    Nested plain dicts (also inside lists and tuples) are converted to ConfigDicts when they are
    stored, so attribute access works at every depth. A missing key raises ``KeyError`` for
    ``cfg['x']`` and ``AttributeError`` for ``cfg.x`` — it is never created on read.
    """

    def __init__(self, *args, **kwargs):
        super().__init__()
        self.update(*args, **kwargs)

    @classmethod
    def _hook(cls, value: Any) -> Any:
        if type(value) is dict:
            return cls(value)
        if type(value) in (list, tuple):
            return type(value)(cls._hook(item) for item in value)
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, self._hook(value))

    def update(self, *args, **kwargs) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise self._no_attribute(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __delattr__(self, name: str) -> None:
        try:
            del self[name]
        except KeyError:
            raise self._no_attribute(name) from None

    def _no_attribute(self, name: str) -> AttributeError:
        return AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def copy(self) -> 'ConfigDict':
        return type(self)(self)

    def to_dict(self) -> dict:
        """A deep copy made of plain dicts (lists and tuples are rebuilt too)."""
        return _to_plain(self)


def _to_plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _to_plain(item) for key, item in value.items()}
    if type(value) in (list, tuple):
        return type(value)(_to_plain(item) for item in value)
    return value


class Config:
    """A loaded configuration: a :class:`ConfigDict` plus where it came from.

    Keys are read and written as attributes or items (``cfg.model``, ``cfg['model']``); dict
    methods (``get``, ``keys``, ``items``) are those of the underlying ConfigDict.

    Args:
        cfg_dict: the settings; copied (containers only), so the caller's dict is not changed.
        cfg_text: the source text, if any.
        filename: the file it was loaded from, if any.

    ``filename`` and ``text`` (each file of the ``_base_`` chain, prefixed with its path) are
    plain attributes set once here, where MMEngine has read-only properties. They stay read-only
    in effect: every attribute assignment on a Config goes to its settings.
    """

    def __init__(self, cfg_dict: Optional[dict] = None, cfg_text: Optional[str] = None,
                 filename: Optional[str] = None):
        if cfg_dict is None:
            cfg_dict = {}
        if not isinstance(cfg_dict, dict):
            raise TypeError(f'cfg_dict must be a dict, but got {type(cfg_dict).__name__}')
        for key in cfg_dict:
            if key in RESERVED_KEYS:
                raise KeyError(f'{key!r} is reserved for the Config object and cannot be a '
                               'config key')
        object.__setattr__(self, '_cfg_dict', ConfigDict(_to_plain(cfg_dict)))
        object.__setattr__(self, 'filename', None if filename is None else str(filename))
        object.__setattr__(self, 'text', cfg_text or '')

    @staticmethod
    def fromfile(filename: str, cfg_options: Optional[dict] = None,
                 import_custom_modules: bool = True, use_predefined_variables: bool = True,
                 use_environment_variables: bool = True) -> 'Config':
        """Load a ``.py`` config and its ``_base_`` files, run ``custom_imports``, merge options.

        ``use_predefined_variables`` / ``use_environment_variables`` (as in MMEngine) turn the
        ``{{fileDirname}}``-style and ``{{$ENV_NAME:default}}`` substitutions off.
        """
        filename = osp.abspath(osp.expanduser(str(filename)))
        substitutions = dict(predefined=use_predefined_variables,
                             environment=use_environment_variables)
        cfg_dict, texts = _load_file(filename, chain=(), substitutions=substitutions)
        custom_imports = cfg_dict.get('custom_imports')
        if import_custom_modules and custom_imports:
            _import_custom_modules(custom_imports)
        cfg = Config(cfg_dict, cfg_text='\n'.join(texts), filename=filename)
        if cfg_options:
            cfg.merge_from_dict(cfg_options)
        return cfg

    @property
    def pretty_text(self) -> str:
        """The settings as Python source, one ``name = value`` statement per key."""
        return format_config(self._cfg_dict, for_file=False)

    def dump(self, file: Optional[str] = None) -> Optional[str]:
        """Write the config as a ``.py`` file that ``fromfile`` loads back (no file: return it).

        Literals (None, bool, int, float, str and lists, tuples, dicts of them) are written as
        they are, and a class or function by its import path (``type=SGD`` becomes
        ``type='torch.optim.SGD'``, which the registry builds from), as MMEngine 0.10 does. What
        cannot be written at all (an object, a lambda) is left out with a warning naming its key,
        so that dumping never stops a run.
        """
        text = format_config(self._cfg_dict, for_file=True)
        if file is None:
            return text
        if not str(file).endswith('.py'):
            raise ValueError(f'minimm dumps configs as .py files only, but got {file}')
        with open(file, 'w', encoding='utf-8') as f:
            f.write(text)
        return None

    def merge_from_dict(self, options: Dict[str, Any], allow_list_keys: bool = True) -> None:
        """Merge dotted-key overrides: ``{'model.depth': 50, 'custom_hooks.0.priority': 49}``.

        A dict value is merged into the existing dict (``_delete_=True`` replaces it); any other
        value replaces. With ``allow_list_keys`` an integer part (``'0'``) indexes a list.
        """
        nested: dict = {}
        for full_key, value in options.items():
            parts = full_key.split('.')
            if not all(parts):
                raise KeyError(f'option key {full_key!r} has an empty part')
            node = nested
            for part in parts[:-1]:
                node = node.setdefault(part, {})
                if not isinstance(node, dict):
                    raise KeyError(f'option {full_key!r} conflicts with another option that sets '
                                   f'{part!r} to a non-dict value')
            node[parts[-1]] = value
        merged = _merge_a_into_b(nested, self._cfg_dict, allow_list_keys)
        object.__setattr__(self, '_cfg_dict', ConfigDict(merged))

    def to_dict(self) -> dict:
        """The settings as plain (nested) dicts, lists and tuples."""
        return self._cfg_dict.to_dict()

    def __getattr__(self, name: str) -> Any:
        # Dunder lookups (copy, pickle) and ``_cfg_dict`` itself must not reach the dict: during
        # unpickling ``_cfg_dict`` does not exist yet and the lookup would recurse forever.
        if name.startswith('__') or name == '_cfg_dict':
            raise AttributeError(f"'Config' object has no attribute '{name}'")
        return getattr(self._cfg_dict, name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._cfg_dict[name] = value

    def __getitem__(self, name: str) -> Any:
        return self._cfg_dict[name]

    def __setitem__(self, name: str, value: Any) -> None:
        self._cfg_dict[name] = value

    def __iter__(self):
        return iter(self._cfg_dict)

    def __len__(self) -> int:
        return len(self._cfg_dict)

    def __contains__(self, name: str) -> bool:
        return name in self._cfg_dict

    def __repr__(self) -> str:
        return f'Config (path: {self.filename}): {self._cfg_dict!r}'


# ----------------------------------------------------------------------------- loading
def _load_file(filename: str, chain: tuple, substitutions: dict) -> tuple:
    """Return ``(cfg_dict, texts)`` for one config file with its ``_base_`` files merged in."""
    if not osp.isfile(filename):
        raise FileNotFoundError(f'config file not found: {filename}')
    if not filename.endswith('.py'):
        raise ValueError(f'minimm loads .py config files only, but got {filename}')
    if filename in chain:
        cycle = ' -> '.join(chain + (filename, ))
        raise ValueError(f'_base_ inheritance cycle: {cycle}')
    with open(filename, encoding='utf-8') as f:
        source = f.read()
    text = source
    if substitutions['predefined']:
        text = _substitute_predefined_vars(text, filename)
    if substitutions['environment']:
        text, _ = _substitute_env_variables(text, filename)
    text, base_var_dict = _pre_substitute_base_vars(text)
    tree = parse_config_text(text, base_var_dict, filename)
    base_files = _pop_base_files(tree, filename)

    base_dict: dict = {}
    texts: List[str] = []
    for base in base_files:
        base_path = osp.abspath(osp.join(osp.dirname(filename), osp.expanduser(base)))
        sub_dict, sub_texts = _load_file(base_path, chain + (filename, ), substitutions)
        duplicates = base_dict.keys() & sub_dict.keys()
        if duplicates:
            raise KeyError(f'{filename}: keys {sorted(duplicates)} are set by more than one _base_ '
                           'file; duplicate keys are not allowed among bases')
        base_dict.update(sub_dict)
        texts.extend(sub_texts)
    texts.append(f'{filename}\n{source}')

    # While the file runs, ``_base_`` is the merged base config, and the child is merged into that
    # same object afterwards: an in-place edit (``_base_.model.depth = 50``) counts, as in MMEngine.
    base_cfg = ConfigDict(base_dict)
    namespace = {BASE_KEY: base_cfg}
    exec(compile(tree, filename, 'exec'), namespace)
    child = {key: value for key, value in namespace.items()
             if key != BASE_KEY and not key.startswith('__')
             and not (inspect.ismodule(value) or inspect.isclass(value)
                      or inspect.isroutine(value))}
    child = _substitute_base_vars(child, base_var_dict, base_cfg, source, filename)
    return _merge_a_into_b(child, base_cfg, allow_list_keys=False), texts


def _pop_base_files(tree: ast.Module, filename: str) -> List[str]:
    """Find the top-level ``_base_ = ...`` statement, remove it from ``tree``, return the paths."""
    base_files: List[str] = []
    for node in list(tree.body):
        if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == BASE_KEY for target in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                value = None
            if isinstance(value, str):
                value = [value]
            if not (isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)):
                raise TypeError(f'{filename}:{node.lineno}: _base_ must be a path or a list of '
                                'paths written as string literals')
            base_files = list(value)
            tree.body.remove(node)
    return base_files


def _import_custom_modules(custom_imports: dict) -> None:
    """``custom_imports=dict(imports=[...], allow_failed_imports=False)``: import each module."""
    if not isinstance(custom_imports, dict) or 'imports' not in custom_imports:
        raise TypeError(f'custom_imports must be dict(imports=[...]), but got {custom_imports!r}')
    unknown = set(custom_imports) - {'imports', 'allow_failed_imports'}
    if unknown:
        raise KeyError(f'custom_imports has unknown keys {sorted(unknown)}')
    imports = custom_imports['imports']
    imports = [imports] if isinstance(imports, str) else imports
    if not isinstance(imports, (list, tuple)) or not all(isinstance(name, str) for name in imports):
        raise TypeError(f'custom_imports.imports must be a module name or a list of them, '
                        f'but got {imports!r}')
    for name in imports:
        try:
            importlib.import_module(name)
        except ImportError as e:
            if custom_imports.get('allow_failed_imports', False):
                warnings.warn(f'custom_imports: {name} failed to import and is skipped ({e})')
                continue
            raise ImportError(f'custom_imports: failed to import {name!r} ({e}). Make sure its '
                              'folder is on sys.path (e.g. set PYTHONPATH)') from e


def _merge_a_into_b(a: dict, b: Union[dict, list], allow_list_keys: bool, prefix: str = '') -> Any:
    """Return ``b`` with ``a`` merged in; neither is changed. ``prefix`` names keys in errors.

    A dict in ``a`` merges into the dict at the same key in ``b`` unless it holds
    ``_delete_=True``; anything else replaces. With ``allow_list_keys`` a digit key in ``a``
    indexes a list in ``b``.
    """
    merged = list(b) if isinstance(b, list) else dict(b)
    for key, value in a.items():
        if key == DELETE_KEY:
            continue
        full_key = f'{prefix}{key}'
        if isinstance(merged, list):
            if not (isinstance(key, str) and key.isdigit()):
                raise TypeError(f'{full_key}: {prefix[:-1]} is a list, so the key must be an index')
            index = int(key)
            if index >= len(merged):
                raise KeyError(f'{full_key}: index {index} is out of range for {prefix[:-1]}, '
                               f'a list of length {len(merged)}')
            key = index
        if isinstance(value, dict):
            base = merged[key] if isinstance(merged, list) or key in merged else None
            if base is None or value.get(DELETE_KEY, False):
                merged[key] = _merge_a_into_b(value, {}, allow_list_keys, f'{full_key}.')
                continue
            allowed = (dict, list) if allow_list_keys else dict
            if not isinstance(base, allowed):
                raise TypeError(f'{full_key}: a dict in the child config cannot be merged into '
                                f'the base value of type {type(base).__name__}; set '
                                f'`{DELETE_KEY}=True` in it to replace the base value')
            merged[key] = _merge_a_into_b(value, base, allow_list_keys, f'{full_key}.')
        else:
            merged[key] = value
    return merged
