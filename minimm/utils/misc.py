"""Type checks for sequences, and ``is_method_overridden``: the ``mmengine.utils.misc`` helpers
that hooks and downstream code import (``is_list_of(param_groups, dict)``...)."""
from collections import abc


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
