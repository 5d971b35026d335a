"""Folder and file helpers, as in MMEngine 0.10's ``mmengine/utils/path.py``."""
import os
import os.path as osp
from pathlib import Path
from typing import Iterator, Optional, Tuple, Union


def is_filepath(x) -> bool:
    """Whether ``x`` is a ``str`` or a ``pathlib.Path``."""
    return isinstance(x, (str, Path))


def check_file_exist(filename, msg_tmpl: str = 'file "{}" does not exist') -> None:
    """Raise ``FileNotFoundError`` (with ``msg_tmpl`` filled in) if ``filename`` is no file."""
    if not osp.isfile(filename):
        raise FileNotFoundError(msg_tmpl.format(filename))


def mkdir_or_exist(dir_name, mode: int = 0o777) -> None:
    """Create ``dir_name`` and its parents unless it exists; ``''`` does nothing."""
    if dir_name == '':
        return
    dir_name = osp.expanduser(dir_name)
    os.makedirs(dir_name, mode=mode, exist_ok=True)


def scandir(dir_path: Union[str, Path], suffix: Union[str, Tuple[str, ...], None] = None,
            recursive: bool = False, case_sensitive: bool = True) -> Iterator[str]:
    """Yield the paths of the files under ``dir_path``, relative to it, that end with
    ``suffix`` (a string or a tuple of them; None: every file), also in sub-folders if
    ``recursive``."""
    if not is_filepath(dir_path):
        raise TypeError('"dir_path" must be a string or Path object')
    if suffix is not None and not isinstance(suffix, (str, tuple)):
        raise TypeError('"suffix" must be a string or tuple of strings')
    if suffix is not None and not case_sensitive:
        suffix = suffix.lower() if isinstance(suffix, str) else tuple(s.lower() for s in suffix)
    root = str(dir_path)

    def _scandir(path: str, suffix: Optional[Union[str, tuple]]) -> Iterator[str]:
        for entry in os.scandir(path):
            if not entry.name.startswith('.') and entry.is_file():
                rel_path = osp.relpath(entry.path, root)
                compared = rel_path if case_sensitive else rel_path.lower()
                if suffix is None or compared.endswith(suffix):
                    yield rel_path
            elif recursive and os.path.isdir(entry.path):
                yield from _scandir(entry.path, suffix)

    return _scandir(root, suffix)
