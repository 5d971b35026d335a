"""Reading a trusted checkpoint written by MMEngine (or MMCV) without either installed.

MMEngine pickles some of its own objects into a checkpoint: the MessageHub's ``HistoryBuffer``s,
sometimes a ``ConfigDict``. Plain ``pickle`` imports the class a file names, so such a file would
only load where mmengine is installed. Here, while reading, every class from ``mmengine`` or
``mmcv`` is replaced by a stand-in that just records what the pickle gives it (constructor
arguments, attribute state, dict or list items); afterwards :func:`adopt` turns the stand-ins into
minimm's objects: a ``HistoryBuffer`` into minimm's ``HistoryBuffer``, a ``ConfigDict`` (or any
dict-like object) into minimm's ``ConfigDict``. Anything else stays a stand-in, whose ``repr``
names the class it stands for.

The classes are replaced even when mmengine is installed, so a file reads the same everywhere.
Only ever used for files marked trusted: unpickling other classes (numpy's, torch's) still runs
their code, as any pickle does.
"""
import pickle
from typing import Any, Dict, Tuple

import numpy as np

FOREIGN_PACKAGES = ('mmengine', 'mmcv')


class _StandInType(type):
    """Stand-in classes answer for any attribute: a real MMEngine file reaches ``HistoryBuffer``'s
    statistics methods through ``getattr(HistoryBuffer, 'min')`` (they are in its state)."""

    def __getattr__(cls, name: str):
        if name.startswith('__'):  # pickle's own protocol lookups: the usual answer
            raise AttributeError(name)
        return f'<{cls.source}.{name} (not imported)>'


class StandIn(metaclass=_StandInType):
    """An object of a class that was not imported. ``source`` is ``'module.Class'``."""

    source = ''

    def __init__(self, *args, **kwargs):  # called when the pickle constructs with arguments
        self.args, self.kwargs = args, kwargs

    def __setstate__(self, state) -> None:
        self.state = state

    # A pickled dict or list subclass hands over its items through these.
    def __setitem__(self, key, value) -> None:
        self.__dict__.setdefault('dict_items', {})[key] = value

    def append(self, value) -> None:
        self.__dict__.setdefault('list_items', []).append(value)

    def extend(self, values) -> None:
        for value in values:
            self.append(value)

    def __repr__(self) -> str:
        return f'<{self.source} stand-in (the class was not imported)>'


_stand_ins: Dict[Tuple[str, str], type] = {}


def stand_in_class(module: str, name: str) -> type:
    """One StandIn subclass per foreign class, so objects of the same class share a type."""
    if (module, name) not in _stand_ins:
        _stand_ins[module, name] = type(name, (StandIn, ), dict(source=f'{module}.{name}'))
    return _stand_ins[module, name]


class Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if module.split('.')[0] in FOREIGN_PACKAGES:
            return stand_in_class(module, name)
        return super().find_class(module, name)


load = pickle.load  # torch.load reads a legacy file's header with the module's own ``load``


def _replacement(obj: StandIn) -> Any:
    from .config import ConfigDict
    from .logging.history_buffer import HistoryBuffer
    state = getattr(obj, 'state', None)
    name = type(obj).__name__
    if name == 'HistoryBuffer' and isinstance(state, dict):
        # MMEngine keeps the values and counts as numpy arrays; minimm keeps Python numbers.
        return HistoryBuffer(np.asarray(state['_log_history']).tolist(),
                             np.asarray(state['_count_history']).tolist(),
                             max_length=int(state.get('max_length', 1000000)))
    items = getattr(obj, 'dict_items', None)
    if items is None and name.endswith('Dict') and isinstance(state, dict):
        items = state  # a dict class that pickles its items as its state
    if items is not None:
        return ConfigDict(adopt(items))
    if hasattr(obj, 'list_items'):
        return adopt(obj.list_items)
    return obj


def adopt(value: Any) -> Any:
    """``value`` with the stand-ins inside it replaced by minimm objects, where minimm has one.
    Dicts and lists are changed in place (a ``state_dict`` keeps its ``_metadata`` attribute)."""
    if isinstance(value, StandIn):
        return _replacement(value)
    if isinstance(value, dict):
        for key, item in value.items():
            value[key] = adopt(item)
    elif isinstance(value, list):
        value[:] = [adopt(item) for item in value]
    elif type(value) is tuple:
        return tuple(adopt(item) for item in value)
    return value
