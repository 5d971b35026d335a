"""Text substitutions in a config file, made before the file runs, as MMEngine 0.10 makes them.

MMEngine rewrites the *text* of a config file before executing it, in this order:

1. ``_substitute_predefined_vars``: ``{{fileDirname}}``, ``{{fileBasename}}``,
   ``{{fileBasenameNoExtension}}`` and ``{{fileExtname}}`` become the file's own path parts,
   anywhere in the text (usually inside a string: ``work_dir = './work_dirs/{{fileBasenameNoExtension}}'``).
2. ``_substitute_env_variables``: ``{{$NAME:default}}`` becomes the environment variable ``NAME``
   (or ``default`` when it is unset), also as raw text: ``lr = {{$LR:0.01}}``.
3. ``_pre_substitute_base_vars``: ``{{_base_.a.b}}`` becomes a quoted placeholder string
   (``"_a.b_1f3c2e"``), so that the file parses; after it ran, ``_substitute_base_vars`` replaces
   every value that *is* a placeholder (at any depth of dicts, lists and tuples) by the base
   config's ``a.b`` itself — any object, which is why the value cannot be written into the text.

MMEngine's versions are static methods of ``Config`` that read the file and write a temporary
copy; minimm's take the text and return the new text, and keep MMEngine's names. What MMEngine
does not substitute is an error here naming the file, the line and the construct, where MMEngine
goes on with a broken value: a placeholder inside a longer string (``'x{{_base_.a}}'``), a key the
bases do not have, and any other ``{{ ... }}`` left in the code (``{{_base_.a[0]}}``), which
Python would otherwise run as a set inside a set (``TypeError: unhashable type``).
"""
import ast
import os
import os.path as osp
import re
import uuid
from typing import Any, Dict, Tuple

BASE_KEY = '_base_'
SUPPORTED = ('{{_base_.key.subkey}}, {{fileDirname}}, {{fileBasename}}, '
             '{{fileBasenameNoExtension}}, {{fileExtname}}, {{$ENV_NAME:default}}')


def line_of(text: str, position: int) -> int:
    return text.count('\n', 0, position) + 1


def _substitute_predefined_vars(text: str, filename: str) -> str:
    """Replace ``{{fileDirname}}`` and the three other path parts of ``filename`` in ``text``."""
    file_basename = osp.basename(filename)
    support_templates = dict(fileDirname=osp.dirname(filename), fileBasename=file_basename,
                             fileBasenameNoExtension=osp.splitext(file_basename)[0],
                             fileExtname=osp.splitext(filename)[1])
    for key, value in support_templates.items():
        # A function as replacement, so a backslash in a Windows path is not a regex escape.
        value = value.replace('\\', '/')
        text = re.sub(r'\{\{\s*' + key + r'\s*\}\}', lambda _: value, text)
    return text


def _substitute_env_variables(text: str, filename: str) -> Tuple[str, Dict[str, str]]:
    """Replace ``{{$NAME:default}}`` by the variable's value, else the default; return the text
    and the variables that were read from the environment."""
    env_variables = {}

    def replace(match: re.Match) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            env_variables[name] = os.environ[name]
            return os.environ[name]
        if not default:
            raise KeyError(f'{filename}:{line_of(text, match.start())}: `{name}` is not set in '
                           f'the environment and {match.group(0)} gives no default')
        return default

    text = re.sub(r'\{\{[\'\"]?\s*\$(\w+)\s*\:\s*(\S*?)\s*[\'\"]?\}\}', replace, text)
    return text, env_variables


def _pre_substitute_base_vars(text: str) -> Tuple[str, Dict[str, str]]:
    """Replace each ``{{_base_.a.b}}`` by a quoted placeholder; return the text and a dict that
    maps each placeholder to its dotted key (``'a.b'``)."""
    base_var_dict = {}
    regexp = r'\{\{\s*' + BASE_KEY + r'\.([\w\.]+)\s*\}\}'
    for base_var in sorted(set(re.findall(regexp, text))):
        randstr = f'_{base_var}_{uuid.uuid4().hex.lower()[:6]}'
        base_var_dict[randstr] = base_var
        text = re.sub(r'\{\{\s*' + BASE_KEY + r'\.' + re.escape(base_var) + r'\s*\}\}',
                      f'"{randstr}"', text)
    return text, base_var_dict


def _substitute_base_vars(cfg: Any, base_var_dict: dict, base_cfg: dict,
                          source: str = '', filename: str = '') -> Any:
    """``cfg`` with every placeholder value replaced by the base config's value at its key.

    ``source`` and ``filename`` (the file's original text and path) only name the line in errors.
    """
    if isinstance(cfg, dict):
        return type(cfg)({key: _substitute_base_vars(value, base_var_dict, base_cfg, source,
                                                     filename)
                          for key, value in cfg.items()})
    if type(cfg) in (list, tuple):
        return type(cfg)(_substitute_base_vars(item, base_var_dict, base_cfg, source, filename)
                         for item in cfg)
    if isinstance(cfg, str):
        if cfg in base_var_dict:
            return _base_value(base_var_dict[cfg], base_cfg, source, filename)
        for randstr, base_var in base_var_dict.items():
            if randstr in cfg:
                raise ValueError(
                    f'{_where(source, base_var, filename)}: {{{{_base_.{base_var}}}}} is part of '
                    'a longer string; it can only stand for a whole value. Build the string from '
                    f'`_base_.{base_var}` instead')
    return cfg


def _base_value(base_var: str, base_cfg: dict, source: str, filename: str) -> Any:
    value = base_cfg
    for depth, key in enumerate(base_var.split('.')):
        if not isinstance(value, dict) or key not in value:
            known = '.'.join(base_var.split('.')[:depth]) or 'the merged _base_ config'
            raise KeyError(f'{_where(source, base_var, filename)}: {{{{_base_.{base_var}}}}}: '
                           f'{known} has no key {key!r}')
        value = value[key]
    return value


def _where(source: str, base_var: str, filename: str) -> str:
    match = re.search(r'\{\{\s*' + BASE_KEY + r'\.' + re.escape(base_var) + r'\s*\}\}', source)
    return f'{filename}:{line_of(source, match.start()) if match else "?"}'


def parse_config_text(text: str, base_var_dict: dict, filename: str) -> ast.Module:
    """Parse the substituted text; refuse what minimm cannot load, naming the file, the line and
    the construct: ``{{_base_.x}}`` inside a double-quoted string (its quoted placeholder ends the
    string), a ``{{ }}`` left after the substitutions, and the lazy-import style
    (``with read_base():``)."""
    try:
        tree = ast.parse(text, filename=filename)
    except SyntaxError as e:
        line = text.splitlines()[e.lineno - 1] if e.lineno else ''
        for randstr, base_var in base_var_dict.items():
            if randstr in line:
                raise SyntaxError(f'{filename}:{e.lineno}: {{{{_base_.{base_var}}}}} inside a '
                                  'string literal is not substituted (MMEngine fails here too); '
                                  f'write the value as `_base_.{base_var}`') from e
        raise
    for node in ast.walk(tree):
        if isinstance(node, ast.Set) and any(isinstance(e, (ast.Set, ast.Dict))
                                             for e in node.elts):
            written = ast.get_source_segment(text, node) or '{{...}}'
            raise SyntaxError(f'{filename}:{node.lineno}: {written} is not a substitution minimm '
                              f'(or MMEngine) knows; the supported ones are {SUPPORTED}')
        if isinstance(node, ast.With) and any(
                isinstance(item.context_expr, ast.Call)
                and getattr(item.context_expr.func, 'id', None) == 'read_base'
                for item in node.items):
            raise SyntaxError(f'{filename}:{node.lineno}: the lazy-import config style '
                              '(`with read_base():`) is not supported by minimm; inherit with '
                              '`_base_ = [...]` instead')
    return tree
