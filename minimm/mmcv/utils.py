"""Small helpers around MMCV 1.x's runners.

``get_host_info``, ``get_time_str``, ``obj_from_dict`` and ``set_random_seed`` are the names
``mmcv.runner`` exports. Three more live here because the runners and hooks need them, though MMCV
keeps them elsewhere: ``is_method_overridden`` and ``symlink`` (``mmcv.utils``) and
``json_set_default`` (the JSON fallback of ``mmcv.dump``). ``is_method_overridden`` is the one of
``minimm.utils`` (one implementation for both worlds, under the name each exports).
"""
import os
import random
import sys
import warnings
from datetime import datetime
from getpass import getuser
from socket import gethostname

import numpy as np
import torch

# The runners log their long startup lines (the hook table) with it (minimm/console_details.py).
from ..console_details import DETAIL  # noqa: F401
from ..utils.misc import is_method_overridden  # noqa: F401  (mmcv.utils exports it)
from .dist_utils import get_dist_info


def get_host_info() -> str:
    """``'user@host'``, for the runner's first log line. Some containers have no user entry, so
    ``getuser`` can fail: then a warning and ``''``."""
    try:
        return f'{getuser()}@{gethostname()}'
    except Exception as error:
        warnings.warn(f'Host or user not found: {error}')
        return ''


def get_time_str() -> str:
    """Local time as ``20240131_235959``: the runner's ``timestamp``, which names its log files."""
    return datetime.now().strftime('%Y%m%d_%H%M%S')


def obj_from_dict(info: dict, parent=None, default_args=None):
    """The older way to build from a config: ``info['type']`` is a class, or the name of an
    attribute of ``parent`` (``obj_from_dict(dict(type='SGD', lr=0.1), torch.optim, ...)``);
    the other keys of ``info``, then ``default_args``, are its arguments."""
    assert isinstance(info, dict) and 'type' in info
    assert default_args is None or isinstance(default_args, dict)
    kwargs = {key: value for key, value in info.items() if key != 'type'}
    for key, value in (default_args or {}).items():
        kwargs.setdefault(key, value)  # what ``info`` says wins
    cls = info['type']
    if isinstance(cls, str):
        cls = sys.modules[cls] if parent is None else getattr(parent, cls)
    elif not isinstance(cls, type):
        raise TypeError(f'type must be a str or valid type, but got {type(cls)}')
    return cls(**kwargs)


def set_random_seed(seed: int, deterministic: bool = False, use_rank_shift: bool = False) -> None:
    """Seed every generator a training run draws from: Python's, NumPy's, torch's (CPU and
    every GPU) and the string hashing of child processes. ``use_rank_shift`` adds the rank, so
    that each process of a distributed run draws different numbers (augmentations, say);
    ``deterministic`` also makes cuDNN pick reproducible kernels (slower)."""
    if use_rank_shift:
        seed = seed + get_dist_info()[0]
    for seed_generator in (random.seed, np.random.seed, torch.manual_seed,
                           torch.cuda.manual_seed_all):
        seed_generator(seed)
    os.environ['PYTHONHASHSEED'] = str(seed)
    if deterministic:
        cudnn = torch.backends.cudnn
        cudnn.deterministic, cudnn.benchmark = True, False


def symlink(src: str, dst: str) -> None:
    """Make ``dst`` a link to ``src``, replacing whatever ``dst`` was (``latest.pth``)."""
    if os.path.lexists(dst):
        os.remove(dst)
    os.symlink(src, dst)


def json_set_default(obj):
    """Turn what ``json.dump`` cannot write into something it can, as ``mmcv.dump`` does: numpy
    arrays and scalars (``LogBuffer`` averages are ``np.float64``), sets and ranges."""
    if isinstance(obj, (np.ndarray, np.generic)):
        return obj.tolist()
    if isinstance(obj, (set, range)):
        return list(obj)
    raise TypeError(f'{type(obj)} is unsupported for json dump')
