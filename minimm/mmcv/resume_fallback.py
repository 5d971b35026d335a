"""Which checkpoint ``minimm train --resume`` resumes an MMCV 1.x run from.

MMCV resumes from ``work_dir/latest.pth`` (a link to the newest ``epoch_N.pth`` or ``iter_N.pth``)
and fails when that file cannot be read: a process killed while writing it, a full disk. minimm's
addition, the same as ``resume=True`` on the MMEngine side: fall back to the newest checkpoint
that can be read, with a warning naming the file that could not be and why.
"""
import os
import os.path as osp
import re
import warnings
from typing import List

from minimm.checkpoint import CheckpointError, load_checkpoint_file

NUMBERED = re.compile(r'(?:epoch|iter)_(\d+)\.pth')


def _candidates(latest: str) -> List[str]:
    """``latest``, then the numbered checkpoints beside it, highest number first (each file once:
    ``latest.pth`` usually links to the first of them)."""
    folder = osp.dirname(latest)
    numbered = [(int(match.group(1)), osp.join(folder, name)) for name in os.listdir(folder)
                for match in [NUMBERED.fullmatch(name)] if match]
    paths, seen = [], set()
    for path in [latest] + [path for _, path in sorted(numbered, reverse=True)]:
        if osp.realpath(path) not in seen:
            seen.add(osp.realpath(path))
            paths.append(path)
    return paths


def newest_readable_checkpoint(latest: str) -> str:
    """``latest`` if it can be read, else the newest numbered checkpoint beside it that can."""
    errors = []
    for path in _candidates(latest):
        try:
            load_checkpoint_file(path)
        except CheckpointError as error:
            errors.append(str(error))
            continue
        if errors:
            warnings.warn('\n'.join(errors) + f'\nResuming from {path} instead, the newest '
                          'checkpoint that can be read.', stacklevel=2)
        return path
    raise CheckpointError('no readable checkpoint to resume from; tried, newest first:\n'
                          + '\n'.join(errors))
