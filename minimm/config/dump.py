"""Config dump: write a config back as Python source that loads to the same dict.

This file teaches how ``Config.pretty_text`` and ``Config.dump`` turn settings into a ``.py``
config, one ``name = value`` statement per top-level key. Dicts whose keys are all Python names are
written as ``dict(key=value)`` (as MMEngine does), other dicts as ``{...}``; a container that does
not fit in 100 columns is split one item per line (numbers packed several per line). Non-finite
floats are written as ``float('inf')`` so that the text stays valid Python. A class or function is
written as the shortest dotted path that imports it again (``type=SGD`` becomes
``type='torch.optim.SGD'``, which the registry builds from), as MMEngine 0.10 dumps it.

What cannot be written at all (an object, a lambda, a key that is not a Python name) is, for a
file, left out with a warning naming its key, so that dumping never stops a run; the pretty text
for a log shows its ``repr`` instead (readable, not loadable).

Left out compared with MMEngine: yapf formatting, and the keys are not sorted.
"""
import inspect
import keyword
import math
import unicodedata
import warnings
from typing import Any, List, Optional

from ..utils.misc import import_object

LINE_WIDTH = 100
INDENT = ' ' * 4


def format_config(cfg: dict, for_file: bool) -> str:
    """``name = value`` lines. ``for_file``: leave out, with a warning, what cannot be loaded
    back; otherwise write its ``repr`` (readable in a log, not loadable)."""
    lines = []
    for key, value in cfg.items():
        if for_file and not _is_name(key):
            warnings.warn(f'config key {key!r} is not a Python name; the dumped config '
                          'leaves it out')
            continue
        text = _format_value(value, str(key), 0, for_file)
        if text is not None:
            lines.append(f'{key} = {text}')
    return '\n'.join(lines) + '\n'


def _is_name(key: Any) -> bool:
    # Python reads identifiers in NFKC form ('ª = 1' sets 'a'): only those that stay the same.
    return isinstance(key, str) and key.isidentifier() and not keyword.iskeyword(key) \
        and unicodedata.normalize('NFKC', key) == key


def _format_value(value: Any, key: str, depth: int, for_file: bool) -> Optional[str]:
    """Python source for ``value``: on one line when it fits, else one item per line.

    The text is relative to its own first column; the caller indents continuation lines.
    ``depth`` only serves the line-width estimate. None: left out (see ``_unwritable``).
    """
    text = _scalar_source(value)
    if text is not None:
        return text
    path = _import_path(value) if inspect.isclass(value) or inspect.isroutine(value) else None
    if path is not None:
        return repr(path)  # a class or function, by the path that imports it again
    if isinstance(value, dict):
        keyword_form = all(_is_name(k) for k in value)
        opening, closing = ('dict(', ')') if keyword_form else ('{', '}')
        items = []
        for k, v in value.items():
            label = f'{k}=' if keyword_form else _scalar_source(k)
            if label is None:
                label = _unwritable(k, f'{key} (a key)', for_file)
                if label is None:
                    continue
            items.append((label if keyword_form else f'{label}: ', v, f'{key}.{k}'))
    elif isinstance(value, (list, tuple)):
        opening, closing = ('[', ']') if isinstance(value, list) else ('(', ')')
        items = [('', v, f'{key}.{i}') for i, v in enumerate(value)]
    else:
        return _unwritable(value, key, for_file)
    parts = []
    for label, item, item_key in items:
        text = _format_value(item, item_key, depth + 1, for_file)
        if text is not None:
            parts.append(label + text)
    one_tuple = ',' if opening == '(' and len(parts) == 1 else ''
    flat = f'{opening}{", ".join(parts)}{one_tuple}{closing}'
    if '\n' not in flat and len(INDENT * depth) + len(key) + len(flat) <= LINE_WIDTH:
        return flat
    if not isinstance(value, dict) and all('\n' not in part for part in parts):
        lines = _pack(parts, LINE_WIDTH - len(INDENT * (depth + 1)))  # e.g. a long list of numbers
    else:
        lines = [part + ',' for part in parts]
    body = '\n'.join(INDENT + line.replace('\n', '\n' + INDENT) for line in lines)
    return f'{opening}\n{body}\n{closing}'


def _scalar_source(value: Any) -> Optional[str]:
    """Source for None, bool, int, float or str (a subclass, e.g. an IntEnum, as its base type)."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, float):
        return repr(float(value)) if math.isfinite(value) else f"float('{value}')"
    for base in (int, str):
        if isinstance(value, base):
            return repr(base(value))
    return None


def _import_path(obj: Any) -> Optional[str]:
    """The shortest dotted path that imports ``obj`` back, or None (a lambda, a local class).

    ``torch.optim.SGD`` rather than ``torch.optim.sgd.SGD``, the path a user writes; the
    registry builds from either (see ``import_object``).
    """
    module, name = getattr(obj, '__module__', None), getattr(obj, '__name__', None)
    if not (isinstance(module, str) and isinstance(name, str)):
        return None
    parts = module.split('.')
    for end in range(1, len(parts) + 1):
        path = '.'.join(parts[:end] + [name])
        if import_object(path) is obj:
            return path
    return None


def _unwritable(value: Any, key: str, for_file: bool) -> Optional[str]:
    if not for_file:
        return repr(value)
    warnings.warn(f'{key}: {type(value).__name__} values cannot be written to a .py config; '
                  'the dumped config leaves it out')
    return None


def _pack(parts: List[str], width: int) -> List[str]:
    """Fill lines with ``part,`` items up to ``width`` characters."""
    lines = ['']
    for part in parts:
        item = f'{part},'
        if lines[-1] and len(lines[-1]) + 1 + len(item) > width:
            lines.append('')
        lines[-1] = f'{lines[-1]} {item}' if lines[-1] else item
    return lines
