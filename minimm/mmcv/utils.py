"""Small helpers the runners use, as MMCV 1.7's ``mmcv/runner/utils.py`` (plus
``is_method_overridden`` and ``symlink``, which MMCV keeps in ``mmcv/utils``, and the JSON
``set_default`` of ``mmcv.fileio``). Left out: nothing.
"""
import os
import random
import sys
import time
import warnings
from getpass import getuser
from socket import gethostname
from types import ModuleType
from typing import Optional

import numpy as np
import torch

from .dist_utils import get_dist_info


def get_host_info() -> str:
    """``user@host``, or '' where either cannot be found (``getuser`` fails in some containers)."""
    host = ''
    try:
        host = f'{getuser()}@{gethostname()}'
    except Exception as e:
        warnings.warn(f'Host or user not found: {str(e)}')
    return host


def get_time_str() -> str:
    return time.strftime('%Y%m%d_%H%M%S', time.localtime())


def obj_from_dict(info: dict, parent: Optional[ModuleType] = None,
                  default_args: Optional[dict] = None):
    """Build ``info['type']`` (a type, or its name looked up in ``parent``, else in
    ``sys.modules``) with the other keys of ``info`` and ``default_args`` as arguments."""
    assert isinstance(info, dict) and 'type' in info
    assert isinstance(default_args, dict) or default_args is None
    args = info.copy()
    obj_type = args.pop('type')
    if isinstance(obj_type, str):
        if parent is not None:
            obj_type = getattr(parent, obj_type)
        else:
            obj_type = sys.modules[obj_type]
    elif not isinstance(obj_type, type):
        raise TypeError(f'type must be a str or valid type, but got {type(obj_type)}')
    if default_args is not None:
        for name, value in default_args.items():
            args.setdefault(name, value)
    return obj_type(**args)


def set_random_seed(seed: int, deterministic: bool = False,
                    use_rank_shift: bool = False) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA); ``use_rank_shift`` adds the rank, so that each
    process draws differently; ``deterministic`` makes cuDNN deterministic."""
    if use_rank_shift:
        rank, _ = get_dist_info()
        seed += rank
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    os.environ['PYTHONHASHSEED'] = str(seed)
    if deterministic:
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False


def symlink(src: str, dst: str) -> None:
    """``dst`` -> ``src``, replacing any ``dst`` (``mmcv.symlink(src, dst, overwrite=True)``)."""
    if os.path.lexists(dst):
        os.remove(dst)
    os.symlink(src, dst)


def is_method_overridden(method: str, base_class: type, derived_class) -> bool:
    """Whether ``derived_class`` (a class or an instance of one) overrides ``base_class.method``."""
    assert isinstance(base_class, type), "base_class doesn't accept instance, Please pass class"
    if not isinstance(derived_class, type):
        derived_class = derived_class.__class__
    base_method = getattr(base_class, method)
    derived_method = getattr(derived_class, method)
    return derived_method != base_method


def json_set_default(obj):
    """What ``mmcv.dump`` turns into JSON beyond the built-in types (MMCV keeps it as ``set_default``
    in ``mmcv/fileio/handlers/json_handler.py``; the logger hooks are its only users here)."""
    if isinstance(obj, (set, range)):
        return list(obj)
    elif isinstance(obj, np.ndarray):
        return obj.tolist()
    elif isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f'{type(obj)} is unsupported for json dump')
