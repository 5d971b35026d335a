"""Command-line overrides: parse ``--cfg-options key=value ...`` into a dict of dotted keys.

This file teaches how ``minimm train CONFIG --cfg-options model.num_classes=5 seed=0`` reaches
:meth:`Config.merge_from_dict`: each value is read as a Python literal with ``ast.literal_eval``
(numbers, ``None``, quoted strings, lists, tuples, nested), a bare word is a string (``SGD``),
``true``/``false`` in any case a bool, and a bare ``a,b`` a list, as MMEngine's ``DictAction``.

Differences on purpose from MMEngine: quotes and spaces are kept (MMEngine strips them all, so
``'a b'`` becomes ``'ab'``), ``(1)`` is the number 1 (MMEngine reads ``(1,)``), and an unbalanced
bracket is an error instead of a silently wrong value.
"""
import argparse
import ast
from typing import Any, Dict, Iterable, Optional, Sequence, Union

__all__ = ['DictAction', 'parse_cfg_options']


def parse_cfg_options(options: Iterable[str]) -> Dict[str, Any]:
    """Parse ``['a.b=1', 'c=[1,2]', 'd=x,y']`` into ``{'a.b': 1, 'c': [1, 2], 'd': ['x', 'y']}``.

    A value is a Python literal (numbers, ``None``, quoted strings, lists, tuples, nested) read by
    ``ast.literal_eval``, where a bare word is a string (``SGD``), ``true``/``false`` in any case
    a bool and ``inf``/``nan`` a float; a bare ``a,b`` is a list. Anything else that is not a
    literal (``a b``, ``work_dirs/x``, ``torch.optim.SGD``) is kept as the string it is.
    """
    parsed = {}
    for option in options:
        key, sep, value = option.partition('=')
        if not sep or not key:
            raise ValueError(f'config option {option!r} must look like key=value')
        parsed[key.strip()] = _parse_value(value.strip())
    return parsed


class _BareWords(ast.NodeTransformer):
    """Turn each bare word of a parsed value into the constant it stands for."""

    def visit_Name(self, node: ast.Name) -> ast.Constant:
        word = node.id
        if word.lower() in ('true', 'false'):
            value = word.lower() == 'true'
        else:
            try:
                value = float(word)  # inf, nan, infinity
            except ValueError:
                value = word
        return ast.copy_location(ast.Constant(value), node)


def _parse_value(text: str) -> Any:
    try:
        tree = ast.parse(text, mode='eval')
    except (SyntaxError, ValueError):
        if text.startswith(('(', '[')):
            raise ValueError(f'config option value {text!r} is not a list or tuple: unbalanced '
                             'brackets? Quote items that hold spaces') from None
        if ',' in text and not any(char in text for char in '()[]\'"'):
            return [_parse_value(item.strip()) for item in text.split(',')]  # v1.0,v2.0
        return text
    value = _node_value(_BareWords().visit(tree.body), text)
    return list(value) if type(value) is tuple and not text.startswith('(') else value


def _node_value(node: ast.expr, text: str) -> Any:
    """``ast.literal_eval(node)``, where an item that is not a literal (``a-b``, ``runs/x``)
    stands for its own text, inside lists and tuples too."""
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_node_value(item, text) for item in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError):
        return ast.get_source_segment(text, node)


class DictAction(argparse.Action):
    """argparse action for ``--cfg-options key=value ...`` (use with ``nargs='+'``).

    Collects the pairs into one dict (see :func:`parse_cfg_options`), ready for
    :meth:`Config.merge_from_dict`; repeated flags extend the same dict.
    """

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Union[str, Sequence[str], None], option_string: Optional[str] = None):
        options = dict(getattr(namespace, self.dest, None) or {})
        if values is not None:
            try:
                options.update(parse_cfg_options([values] if isinstance(values, str) else values))
            except ValueError as e:
                parser.error(str(e))
        setattr(namespace, self.dest, options)
