"""Folder and file helpers from ``mmengine.utils.path``: checking a file is there, making a
folder, listing the files below one."""
import os
import os.path as osp
from pathlib import Path


def is_filepath(x) -> bool:
    """Whether ``x`` can name a file: a ``str`` or a ``pathlib.Path``."""
    return isinstance(x, (str, Path))


def check_file_exist(filename, msg_tmpl: str = 'file "{}" does not exist') -> None:
    """Fail early, with a ``FileNotFoundError`` naming the file, if there is no such file."""
    if not osp.isfile(filename):
        raise FileNotFoundError(msg_tmpl.format(filename))


def mkdir_or_exist(dir_name, mode: int = 0o777) -> None:
    """Make the folder ``dir_name`` (``~`` expanded), with its parents, unless it is there. The
    empty name, which a bare file name's ``dirname`` gives, means the current folder: nothing to
    do."""
    if dir_name:
        os.makedirs(osp.expanduser(dir_name), mode=mode, exist_ok=True)


def scandir(dir_path, suffix=None, recursive=False, case_sensitive=True):
    """The files below ``dir_path``, as paths relative to it, lazily: those whose path ends with
    ``suffix`` (a string, or a tuple of strings for any of them; None for every file). Hidden
    files (``.name``) are skipped; sub-folders are searched only if ``recursive``."""
    if not is_filepath(dir_path):
        raise TypeError('"dir_path" must be a string or Path object')
    if suffix is not None and not isinstance(suffix, (str, tuple)):
        raise TypeError('"suffix" must be a string or tuple of strings')

    def folded(text):
        return text if case_sensitive else text.lower()

    if isinstance(suffix, tuple):
        suffix = tuple(folded(one) for one in suffix)
    elif suffix is not None:
        suffix = folded(suffix)
    top = str(dir_path)

    def walk(folder):
        for entry in os.scandir(folder):
            if entry.is_file() and not entry.name.startswith('.'):
                relative = osp.relpath(entry.path, top)
                if suffix is None or folded(relative).endswith(suffix):
                    yield relative
            elif recursive and entry.is_dir():
                yield from walk(entry.path)

    return walk(top)
