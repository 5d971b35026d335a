"""Options checked against what they may be, before anything is built.

A config value of the wrong kind often works by accident in Python and fails much later, or
never: ``by_epoch='no'`` is true, so a scheduler compared with ``by_epoch == True`` is never
stepped; ``shuffle='False'`` shuffles; ``lr='0.1'`` fails at the first comparison inside the
optimizer; ``milestones=1`` at the first scheduler step. ``check_arguments`` reads what each
option of a class may be from its constructor (the annotation, else the type of the default:
``by_epoch: bool = True``, ``interval: int = -1``, ``lr=1e-3``) and raises, naming where the option
is, its value and what is allowed. Only kinds whose meaning is clear are checked: booleans,
numbers and sequences; other options (strings, dicts, callables) go to the class as given.

Where MMEngine or MMCV accept a value, so does this: ``0``/``1`` as booleans, an integer where a
float is expected, ``None`` where the annotation says ``Optional``. The config checks of both
worlds call it on the entries they build (``minimm/runner/checks.py``,
``minimm/mmcv/config_checks.py``).

One mistake, one message: a class that checks some of its options in its own constructor (as
MMEngine's ``LoggerHook`` checks ``interval``, in words its tests match) names them in
``checked_in_init``, and ``check_arguments`` runs those checks first, on a throwaway instance
built from those options alone, instead of writing them again. So ``LoggerHook(interval=0)``
and ``default_hooks.logger.interval=0`` say the same thing, the second with where it is.
"""
import inspect
import numbers
import types
import typing
from typing import Optional

import torch

_NUMBER_TYPES = (int, float, torch.Tensor)
_UNIONS = (typing.Union, getattr(types, 'UnionType', typing.Union))  # X | Y: Python >= 3.10
_SEQUENCE_TYPES = (list, tuple, typing.Sequence, typing.List, typing.Tuple)


# torch writes some annotations as text (DataLoader's ``shuffle: 'bool | None'``); those made of
# these names are read here, the others are left unchecked (never evaluated: text is not code).
_BUILTIN_NAMES = {'int': int, 'float': float, 'bool': bool, 'None': type(None), 'list': list,
                  'tuple': tuple}


def _from_text(annotation):
    """An annotation written as text, such as ``'int | None'``, as the types it names; the text
    itself when a part of it is not one of ``_BUILTIN_NAMES``."""
    if not isinstance(annotation, str):
        return annotation
    parts = [part.strip() for part in annotation.split('|')]
    if not all(part in _BUILTIN_NAMES for part in parts):
        return annotation
    return typing.Union[tuple(_BUILTIN_NAMES[part] for part in parts)]


def _kind(parameter: inspect.Parameter) -> Optional[tuple]:
    """``(kind, None allowed)`` for a constructor parameter, kind being 'bool', 'number' or
    'sequence'; None when its annotation and default say nothing this module checks."""
    annotation, default = parameter.annotation, parameter.default
    if annotation is inspect.Parameter.empty:
        if isinstance(default, bool):
            return 'bool', False
        if isinstance(default, (int, float)):
            return 'number', False
        return None
    if isinstance(annotation, str):  # not resolved
        return None
    args = typing.get_args(annotation) if typing.get_origin(annotation) in _UNIONS else (
        annotation, )
    allows_none = type(None) in args or default is None
    args = tuple(arg for arg in args if arg is not type(None))
    if args == (bool, ):
        return 'bool', allows_none
    if args and all(arg in _NUMBER_TYPES for arg in args):
        return 'number', allows_none
    if len(args) == 1 and (args[0] in _SEQUENCE_TYPES or
                           typing.get_origin(args[0]) in (list, tuple, typing.Sequence)):
        return 'sequence', allows_none
    return None


def _number_text(value) -> str:
    """What to write instead of a number given as a string, or ''."""
    try:
        float(value)
    except ValueError:
        return ''
    return f' (it is a string: write {value} without quotes)'


def problem(kind: str, value) -> Optional[str]:
    """What is wrong with ``value`` as a ``kind`` option ('bool', 'number', 'sequence'), or
    None when nothing is."""
    if kind == 'bool':
        if isinstance(value, bool) or (isinstance(value, numbers.Integral) and value in (0, 1)):
            return None
        text = ' (a non-empty string is true in Python)' if isinstance(value, str) else ''
        return f'must be True or False{text}'
    if kind == 'number':
        if isinstance(value, (numbers.Real, torch.Tensor)) and not isinstance(value, bool):
            return None
        return 'must be a number' + (_number_text(value) if isinstance(value, str) else '')
    if isinstance(value, (list, tuple)):
        return None
    return 'must be a list or a tuple'


def check_arguments(cls: type, kwargs: dict, where: str) -> None:
    """Raise for an entry of ``kwargs`` that ``cls``'s constructor (or a base's, for options it
    passes on) cannot take as it is meant: the class's own words for the options it checks
    itself (``checked_in_init``), ``where.key=value: must be ... (an option of cls)`` for the
    kinds of the others."""
    own = {key: kwargs[key] for key in getattr(cls, 'checked_in_init', ()) if key in kwargs}
    if own:
        try:
            cls(**own)
        except (TypeError, ValueError) as error:
            raise type(error)(f'{where}: {error}') from error
    parameters = {}
    for klass in reversed(inspect.getmro(cls)):
        init = klass.__dict__.get('__init__')
        if init is not None and inspect.isfunction(init):
            for name, parameter in inspect.signature(init).parameters.items():
                parameters[name] = parameter.replace(annotation=_from_text(parameter.annotation))
    for key, value in kwargs.items():
        kind = _kind(parameters[key]) if key in parameters else None
        if kind is None or (value is None and kind[1]):
            continue
        wrong = problem(kind[0], value)
        if wrong is not None:
            raise ValueError(f'{where}.{key}={value!r}: {wrong} (an option of {cls.__name__})')


def is_whole(value) -> bool:
    """An int, or a float with nothing after the point; never a bool (True is no count)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, numbers.Integral) or (isinstance(value, float) and value.is_integer())


def whole_number(name: str, value, minimum: Optional[int] = None) -> int:
    """``value`` as an int; a ValueError naming ``name`` and ``value`` unless it is a whole number
    (>= ``minimum`` when given). The config checks of both worlds check their counters with it,
    and the train loops theirs: a loop may be built without the Runner."""
    if is_whole(value) and (minimum is None or value >= minimum):
        return int(value)
    allowed = 'an integer' if minimum is None else f'an integer >= {minimum}'
    # A number in quotes is told so: problem() adds the hint to its 'must be a number'.
    wrong = (None if is_whole(value) else problem('number', value)) or 'must be a number'
    raise ValueError(f'{name}={value!r}: {wrong.replace("a number", allowed)}')
