"""Type checks for sequences, ``is_method_overridden`` and ``import_object``: the
``mmengine.utils.misc`` helpers that hooks and downstream code import
(``is_list_of(param_groups, dict)``...)."""
import importlib
import inspect
from collections import abc
from typing import Any


def is_str(x) -> bool:
    """Whether ``x`` is text (a ``str``; ``bytes`` is not)."""
    return isinstance(x, str)


def is_seq_of(seq, expected_type, seq_type=None) -> bool:
    """Whether ``seq`` is a sequence, of class ``seq_type`` if one is given, whose items are all
    ``expected_type`` (a type, or a tuple of types for "any of these"). An empty sequence passes:
    none of its items has the wrong type."""
    if seq_type is not None and not isinstance(seq_type, type):
        raise TypeError(f'seq_type must be a type, but got {seq_type!r}')
    if not isinstance(seq, seq_type or abc.Sequence):
        return False
    return all(isinstance(item, expected_type) for item in seq)


def is_list_of(seq, expected_type) -> bool:
    """``is_seq_of`` for lists only (a tuple of the right items is not one)."""
    return is_seq_of(seq, expected_type, list)


def is_tuple_of(seq, expected_type) -> bool:
    """``is_seq_of`` for tuples only."""
    return is_seq_of(seq, expected_type, tuple)


def is_method_overridden(method: str, base_class: type, derived_class) -> bool:
    """Whether the class of ``derived_class`` (itself, if it is a class) defines ``method``
    differently from ``base_class`` (say, whether a hook implements a stage)."""
    if not isinstance(base_class, type):
        raise TypeError(f'base_class must be a class, but got {base_class!r}')
    cls = derived_class if isinstance(derived_class, type) else type(derived_class)
    return getattr(cls, method) != getattr(base_class, method)


def import_object(path: str) -> Any:
    """The class, function or module that ``import module; module.Name`` gives for
    ``'module.Name'``, or ``None``.

    MMEngine 0.10's ``get_object_from_string`` in small: how a config names a class nobody
    registered, and how ``Config.dump`` writes a class found in a config.
    """
    module_name, _, name = path.rpartition('.')
    if not all(part.isidentifier() for part in path.split('.')) or not module_name:
        return None
    try:
        obj = getattr(importlib.import_module(module_name), name, None)
    except ImportError:
        return None
    found = inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj)
    return obj if found else None
