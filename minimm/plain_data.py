"""Plain data: what ``torch.load(weights_only=True)`` can read back, and converting to it.

minimm loads every checkpoint with ``weights_only=True``, which unpickles only tensors and plain
Python data and so runs no code from the file. Everything minimm writes must therefore be plain
data, and ``to_plain_data`` makes it so when a checkpoint is saved (not when it is loaded, when it
would be too late): numpy arrays and ranges (``gpu_ids=range(1)`` in MMCV 1.x configs) become
lists and numpy scalars Python numbers, mapping types
become ``dict`` (an ``OrderedDict`` stays one), tuples stay tuples. A value that has no plain form
(any other object) is an error that names where it is.

MMEngine saves such values as they are, so its checkpoints may need ``weights_only=False``.
"""
from collections import OrderedDict
from typing import Any

import numpy as np
import torch

# Leaf types the weights_only unpickler accepts (exact types: a subclass such as an IntEnum or a
# namedtuple would be pickled under its own class name, which that unpickler refuses).
_LEAF_TYPES = (type(None), bool, int, float, complex, str, bytes, torch.Size, torch.dtype,
               torch.device)


def to_plain_data(value: Any, where: str = 'value') -> Any:
    """``value`` rebuilt from plain data; a TypeError naming ``where[...]`` if it cannot be."""
    if isinstance(value, torch.Tensor) or type(value) in _LEAF_TYPES:
        return value
    if isinstance(value, np.ndarray):
        return value.tolist()
    if type(value) is range:
        return list(value)
    if isinstance(value, np.generic):
        return value.item()
    if type(value) in (list, tuple, set):
        return type(value)(to_plain_data(item, f'{where}[{i}]') for i, item in enumerate(value))
    if isinstance(value, dict):
        items = ((to_plain_data(k, f'{where} key {k!r}'), to_plain_data(v, f'{where}[{k!r}]'))
                 for k, v in value.items())
        return OrderedDict(items) if isinstance(value, OrderedDict) else dict(items)
    raise TypeError(f'{where} is a {type(value).__module__}.{type(value).__qualname__}, which '
                    'torch.load(weights_only=True) cannot read back; store it as plain data '
                    '(numbers, strings, lists, tuples, dicts, tensors)')
