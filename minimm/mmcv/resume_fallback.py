"""Which checkpoint ``minimm train --resume`` resumes an MMCV 1.x run from.

MMCV resumes from ``work_dir/latest.pth`` (a link to the newest ``epoch_N.pth`` or ``iter_N.pth``)
and fails when that file cannot be read: a process killed while writing it, a full disk. minimm's
addition, the same as ``resume=True`` on the MMEngine side: fall back to the newest checkpoint
that can be read, with a warning naming the file that could not be and why; and when
``latest.pth`` is gone, from the newest numbered checkpoint. A file that cannot be read is renamed
``<name>.unreadable`` (``set_aside``), so that the resumed run, writing that name again, does not
overwrite it.
"""
import os.path as osp
import warnings
from typing import List, Optional

from minimm.checkpoint import (CheckpointError, UntrustedCheckpointError, load_checkpoint_file,
                               numbered_checkpoints, set_aside)


def _candidates(latest: str) -> List[str]:
    """``latest`` (when it exists), then the numbered checkpoints beside it, highest number first
    (each file once: ``latest.pth`` usually links to the first of them)."""
    paths, seen = [], set()
    first = [latest] if osp.lexists(latest) else []
    for path in first + numbered_checkpoints(osp.dirname(latest)):
        if osp.realpath(path) not in seen:
            seen.add(osp.realpath(path))
            paths.append(path)
    return paths


def newest_readable_checkpoint(latest: str) -> Optional[str]:
    """``latest`` if it can be read, else the newest numbered checkpoint beside it that can;
    None when there is no checkpoint at all (nothing to resume)."""
    errors = []
    for path in _candidates(latest):
        try:
            load_checkpoint_file(path)
        except UntrustedCheckpointError:
            raise  # readable with --trust-checkpoint: no reason to go back to an older one
        except CheckpointError as error:
            errors.append(str(error) + set_aside(path))
            continue
        if errors or path != latest:
            why = '\n'.join(errors) or f'{latest} does not exist'
            warnings.warn(f'{why}\nResuming from {path} instead, the newest checkpoint that can '
                          'be read.', stacklevel=2)
        return path
    if not errors:
        return None
    raise CheckpointError('no readable checkpoint to resume from; tried, newest first:\n'
                          + '\n'.join(errors))
