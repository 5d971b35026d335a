"""Loaded by every Python process started with this folder on PYTHONPATH (the write-audit test):
records which process changed which file under ``MINIMM_AUDIT_DIR``.

An audit hook (``sys.addaudithook``) sees every ``open`` the interpreter does, from ``open()``,
``os.open`` or C code such as ``torch.save``'s, with its mode or flags, and every rename, removal
and new folder. The ones that write under the audited folder are kept in memory and written, as
``<rank>-<pid>.txt`` in ``MINIMM_AUDIT_OUT``, when the process exits.
"""
import atexit
import os
import sys

_ROOT = os.environ.get('MINIMM_AUDIT_DIR')
_OUT = os.environ.get('MINIMM_AUDIT_OUT')
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_seen = []


def _under_root(path) -> bool:
    if isinstance(path, bytes):
        path = path.decode(errors='replace')
    return isinstance(path, str) and os.path.abspath(path).startswith(_ROOT + os.sep)


def _writes(event: str, args: tuple) -> list:
    if event == 'open':
        path, mode, flags = args
        writing = (any(c in mode for c in 'wax+') if isinstance(mode, str)
                   else bool((flags or 0) & _WRITE_FLAGS))
        return [path] if writing else []
    if event in ('os.rename', 'os.remove', 'os.mkdir', 'shutil.copyfile', 'shutil.rmtree'):
        return [a for a in args[:2] if isinstance(a, (str, bytes))]
    return []


def _hook(event: str, args: tuple) -> None:
    for path in _writes(event, args):
        if _under_root(path):
            _seen.append(f'{event} {os.path.relpath(os.path.abspath(path), _ROOT)}')


def _dump() -> None:
    name = os.path.join(_OUT, f"{os.environ.get('RANK', 'none')}-{os.getpid()}.txt")
    with open(name, 'w') as f:
        f.write('\n'.join(_seen))


if _ROOT and _OUT:
    _ROOT = os.path.abspath(_ROOT)
    sys.addaudithook(_hook)
    atexit.register(_dump)
