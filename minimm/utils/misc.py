"""Type checks for sequences, as in MMEngine 0.10's ``mmengine/utils/misc.py``."""
from collections import abc
from typing import Any, Optional, Type


def is_str(x: Any) -> bool:
    """Whether ``x`` is a ``str``."""
    return isinstance(x, str)


def is_seq_of(seq: Any, expected_type: Type, seq_type: Optional[Type] = None) -> bool:
    """Whether ``seq`` is a sequence (of ``seq_type``, if given) whose items are all
    ``expected_type`` (a type or a tuple of types). An empty sequence passes."""
    if seq_type is None:
        exp_seq_type = abc.Sequence
    else:
        if not isinstance(seq_type, type):
            raise TypeError(f'seq_type must be a type, but got {seq_type!r}')
        exp_seq_type = seq_type
    if not isinstance(seq, exp_seq_type):
        return False
    for item in seq:
        if not isinstance(item, expected_type):
            return False
    return True


def is_list_of(seq: Any, expected_type: Type) -> bool:
    """Whether ``seq`` is a list whose items are all ``expected_type``."""
    return is_seq_of(seq, expected_type, seq_type=list)


def is_tuple_of(seq: Any, expected_type: Type) -> bool:
    """Whether ``seq`` is a tuple whose items are all ``expected_type``."""
    return is_seq_of(seq, expected_type, seq_type=tuple)


def is_method_overridden(method: str, base_class: type, derived_class: Any) -> bool:
    """Whether ``derived_class`` (a class or an instance) defines ``method`` other than
    ``base_class`` does."""
    if not isinstance(base_class, type):
        raise TypeError(f'base_class must be a class, but got {base_class!r}')
    if not isinstance(derived_class, type):
        derived_class = derived_class.__class__
    base_method = getattr(base_class, method)
    derived_method = getattr(derived_class, method)
    return derived_method != base_method
