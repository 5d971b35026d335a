"""A work dir is the run's own: made once, locked while the run lives, and the only place the run
deletes files in.

**One run per work dir.** Two runs writing into one folder mix their checkpoints and delete each
other's files. So a run takes an exclusive ``fcntl`` lock on a file named after the work dir's
real path, and writes its process id and command line into it; a second process finds the lock
taken and is refused with a message that names the first. The operating system drops the lock
when its process ends, however it ends, so a crashed or killed run never leaves it stuck. The
lock files live in the temporary folder (``minimm-locks-<uid>/``), not in the work dir, whose
files stay those MMEngine writes; so the lock holds between runs of one user on one machine.

Within one process the lock is counted, not exclusive: a script or a test may build several
runners on one work dir one after the other. Both worlds use it (``Runner`` and ``minimm.mmcv``'s
``BaseRunner``), on rank 0 only, as only rank 0 writes checkpoints. Where ``fcntl`` does not exist
(Windows) there is no lock. MMEngine and MMCV have none.

**A fresh run never overwrites another's checkpoints.** A run that starts training without
resuming refuses a work dir that already holds checkpoints (``last_checkpoint``, ``latest.pth``,
``epoch_N``/``iter_N``/``best_*`` files): they are another run's, and the new one would replace
them file by file (MMEngine and MMCV do, without a word). The message names ``--resume`` and a new
work dir. Runs of one process (a script or a test training runner after runner in one folder)
count as one: only files that were there before this process first trained in it are guarded.

**Only its own files.** A checkpoint records the paths of the files a run keeps (the best
checkpoint, the latest one), and a resumed run deletes the previous best when it finds a better
one. After ``cp -r A B``, B's checkpoints still name A's files: MMEngine (and MMCV) then delete
A's. ``own_path`` turns such a recorded path into the file of that name in the run's own folder.
"""
import hashlib
import os
import os.path as osp
import sys
import tempfile
import time
import weakref
from typing import Callable, Dict, List, Optional

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

_held: Dict[str, List] = {}  # lock path -> [open file, how many runners of this process hold it]
_trained_here = set()  # the real paths of the work dirs this process has started training in


class WorkDirBusyError(RuntimeError):
    """The work dir is in use by another running process."""


def make_work_dir(work_dir: str, create: bool = True) -> str:
    """Create ``work_dir`` if need be (unless ``create=False``: only rank 0 creates it, the others
    only check it) and return its absolute path; a file there is an error."""
    work_dir = osp.abspath(work_dir)
    if osp.exists(work_dir) and not osp.isdir(work_dir):
        raise NotADirectoryError(f'work_dir {work_dir} is a file, not a folder: give a folder '
                                 'for checkpoints and logs (--work-dir)')
    if create:
        os.makedirs(work_dir, exist_ok=True)
    return work_dir


def checkpoints_in(work_dir: str) -> List[str]:
    """The names of the files in ``work_dir`` that a run writes as or about its checkpoints."""
    from .checkpoint import NUMBERED
    names = sorted(os.listdir(work_dir)) if osp.isdir(work_dir) else []
    return [name for name in names if name in ('last_checkpoint', 'latest.pth')
            or NUMBERED.fullmatch(name) or (name.startswith('best_') and name.endswith('.pth'))]


def claim_for_training(work_dir: str, found: Optional[List[str]] = None) -> None:
    """Refuse to start a fresh run (not resumed) in a work dir holding another run's checkpoints
    (``found``: ``checkpoints_in(work_dir)``, which rank 0 may pass to every rank)."""
    real = osp.realpath(work_dir)
    found = checkpoints_in(work_dir) if found is None else found
    if real not in _trained_here and found:
        shown = ', '.join(found[:3]) + (', ...' if len(found) > 3 else '')
        raise FileExistsError(f'work_dir {work_dir} holds the checkpoints of another run '
                              f'({shown}), which a fresh run would overwrite: continue that run '
                              'with --resume (resume=True), or give this run a new work_dir '
                              '(--work-dir)')
    _trained_here.add(real)


def first_free(base: str, taken: Callable[[str], bool]) -> str:
    """``base``, or ``base_2``, ``base_3``... the first name that is not ``taken``."""
    number, name = 1, base
    while taken(name):
        number += 1
        name = f'{base}_{number}'
    return name


def free_work_dir(base: str) -> str:
    """``base``, or ``base_2``... the first that holds no checkpoints (``minimm demo``'s
    default, so a second demo keeps the first one's files)."""
    return first_free(base, checkpoints_in)


def own_path(recorded: Optional[str], folder: str) -> Optional[str]:
    """The file named like ``recorded`` in ``folder`` (None stays None): a path recorded in a
    checkpoint written in another folder (a copied work dir) is never touched."""
    return None if recorded is None else osp.join(folder, osp.basename(recorded))


def lock_work_dir(work_dir: str) -> Callable[[], None]:
    """Take ``work_dir``'s lock for this process; return the function that gives it back."""
    if fcntl is None:
        return lambda: None
    folder = osp.join(tempfile.gettempdir(), f'minimm-locks-{os.getuid()}')
    os.makedirs(folder, exist_ok=True)
    name = hashlib.sha1(osp.realpath(work_dir).encode()).hexdigest()[:20]
    path = osp.join(folder, f'{name}.lock')
    if path not in _held:
        lock_file = open(path, 'a+')
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock_file.seek(0)
            holder = lock_file.read().strip() or 'a process that wrote nothing in the lock file'
            lock_file.close()
            raise WorkDirBusyError(
                f'work_dir {work_dir} is in use by another run ({holder}); wait for it to end, or '
                'give this run another work_dir (--work-dir)') from None
        lock_file.seek(0)
        lock_file.truncate()
        started = time.strftime('%Y-%m-%d %H:%M:%S')
        lock_file.write(f'pid {os.getpid()}, started {started}: {" ".join(sys.argv)}\n')
        lock_file.flush()
        _held[path] = [lock_file, 0]
    _held[path][1] += 1
    return lambda: _release(path)


def hold_work_dir(owner, work_dir: str) -> weakref.finalize:
    """Lock ``work_dir`` for as long as ``owner`` (a runner) lives; calling the result gives it
    back sooner."""
    return weakref.finalize(owner, lock_work_dir(work_dir))


def _release(path: str) -> None:
    entry = _held.get(path)
    if entry is None:
        return
    entry[1] -= 1
    if entry[1] == 0:
        del _held[path]
        entry[0].close()  # closing the file drops the lock
