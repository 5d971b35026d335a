"""Plain data: what ``torch.load(weights_only=True)`` and JSON can read back, and converting to it.

minimm loads every checkpoint with ``weights_only=True``, which unpickles only tensors and plain
Python data and so runs no code from the file. Everything minimm writes must therefore be plain
data, and ``to_plain_data`` makes it so when a checkpoint is saved (not when it is loaded, when it
would be too late): numpy arrays and ranges (``gpu_ids=range(1)`` in MMCV 1.x configs) become
lists and numpy scalars Python numbers, mapping types
become ``dict`` (an ``OrderedDict`` stays one), tuples stay tuples. A value that has no plain form
(any other object) is an error that names where it is.

The same function serves the JSON files (``for_json=True``: the visualizer's ``scalars.json``
lines, the test metrics LoggerHook writes), where tensors become lists too and tuples and sets
lists, so there is one converter for everything minimm writes.

MMEngine saves such values as they are, so its checkpoints may need ``weights_only=False``.
"""
from collections import OrderedDict
from typing import Any, Union

import numpy as np
import torch

# Leaf types the weights_only unpickler accepts (exact types: a subclass such as an IntEnum or a
# namedtuple would be pickled under its own class name, which that unpickler refuses).
_LEAF_TYPES = (type(None), bool, int, float, complex, str, bytes, torch.Size, torch.dtype,
               torch.device)
_JSON_LEAF_TYPES = (type(None), bool, int, float, str)


def _path(where: Union[str, tuple]) -> str:
    """``where`` as text: a name, or ``(parent, suffix_template, key)`` for a value inside the
    parent. Only an error message needs the text, so it is only built then (formatting it for
    every value, with a ``repr`` of every key, would cost more than the conversion itself)."""
    if isinstance(where, str):
        return where
    parent, template, key = where
    return _path(parent) + template.format(key)


def to_plain_data(value: Any, where: Union[str, tuple] = 'value', for_json: bool = False) -> Any:
    """``value`` rebuilt from plain data; a TypeError naming ``where[...]`` if it cannot be.

    ``for_json=True``: plain data for ``json.dump`` (tensors become lists as numpy arrays do,
    tuples and sets become lists)."""
    if type(value) in (_JSON_LEAF_TYPES if for_json else _LEAF_TYPES):
        return value
    if isinstance(value, torch.Tensor):
        return value.tolist() if for_json else value
    if isinstance(value, np.ndarray):
        return value.tolist()
    if type(value) is range:
        return list(value)
    if isinstance(value, np.generic):
        return value.item()
    if type(value) in (list, tuple, set):
        items = (to_plain_data(item, (where, '[{!r}]', i), for_json)
                 for i, item in enumerate(value))
        return list(items) if for_json else type(value)(items)
    if isinstance(value, dict):
        items = ((to_plain_data(k, (where, ' key {!r}', k), for_json),
                  to_plain_data(v, (where, '[{!r}]', k), for_json)) for k, v in value.items())
        if not isinstance(value, OrderedDict):
            return dict(items)
        plain = OrderedDict(items)
        if hasattr(value, '_metadata') and not for_json:
            # A state dict's module versions, which _load_from_state_dict reads to convert
            # the keys of an older version of a module.
            plain._metadata = to_plain_data(value._metadata, (where, '._metadata', None))
        return plain
    reader = 'JSON' if for_json else 'torch.load(weights_only=True)'
    kind = f'{type(value).__module__}.{type(value).__qualname__}'
    raise TypeError(f'{_path(where)} is a {kind}, which {reader} cannot read back; store it as '
                    'plain data (numbers, strings, lists, tuples, dicts, tensors)')
