"""Checkpoint files: save atomically, load safely, find the latest, load weights into a model.

What a checkpoint holds is decided by ``Runner.save_checkpoint`` (``meta``, ``state_dict``,
``message_hub``, ``optimizer``, ``param_schedulers``, plus whatever hooks add in
``before_save_checkpoint``); this file only moves dicts to and from disk.

Two safety rules, both stricter than MMEngine:

* **No data is lost on a crash.** A checkpoint is written to a temporary file in the same folder,
  flushed to disk, then renamed over the target (a rename within a folder is atomic), so a reader
  sees either the old file or the whole new one, never half a file. ``last_checkpoint`` is written
  the same way, and only after the checkpoint it names exists.
* **Loading runs no code.** Files are read with ``torch.load(weights_only=True)``, so everything
  minimm writes into a checkpoint is plain data: tensors, numbers, strings, lists and dicts.

Left out compared with MMEngine: file backends (``backend_args``), URLs and ``open-mmlab://`` names.
"""
import os
import os.path as osp
import re
import tempfile
from collections import OrderedDict
from typing import List, Optional, Tuple

import torch
import torch.nn as nn


def _atomic_write(path: str, write) -> None:
    """Call ``write(file_object)`` on a temporary file beside ``path``, then rename it to ``path``."""
    folder = osp.dirname(osp.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp_path = tempfile.mkstemp(prefix=f'.{osp.basename(path)}.', suffix='.tmp', dir=folder)
    try:
        with os.fdopen(fd, 'wb') as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        if osp.exists(tmp_path):
            os.remove(tmp_path)
        raise


def save_checkpoint(checkpoint: dict, filename: str) -> None:
    """Write ``checkpoint`` to ``filename`` atomically."""
    _atomic_write(filename, lambda f: torch.save(checkpoint, f))


def write_last_checkpoint(work_dir: str, ckpt_path: str) -> None:
    """Record ``ckpt_path`` in ``work_dir/last_checkpoint`` (what ``resume=True`` reads)."""
    _atomic_write(osp.join(work_dir, 'last_checkpoint'), lambda f: f.write(ckpt_path.encode()))


def find_latest_checkpoint(work_dir: str) -> Optional[str]:
    """The path stored in ``work_dir/last_checkpoint``, or None when there is none."""
    save_file = osp.join(work_dir, 'last_checkpoint')
    if not osp.exists(save_file):
        return None
    with open(save_file) as f:
        path = f.read().strip()
    return path or None


def load_checkpoint_file(filename: str, map_location='cpu') -> dict:
    """Read a checkpoint with ``weights_only=True``; a missing file is a clear error."""
    if not osp.isfile(filename):
        raise FileNotFoundError(f'checkpoint file {filename!r} does not exist')
    checkpoint = torch.load(filename, map_location=map_location, weights_only=True)
    if not isinstance(checkpoint, dict):
        raise RuntimeError(f'no state dict found in checkpoint file {filename}')
    return checkpoint


def weights_to_cpu(state_dict: dict) -> OrderedDict:
    """A copy of ``state_dict`` with every tensor on the CPU (so a GPU run's file loads anywhere)."""
    return OrderedDict((k, v.detach().cpu()) for k, v in state_dict.items())


def unwrap_model(model: nn.Module) -> nn.Module:
    """The model inside a DistributedDataParallel (or any wrapper with ``.module``) wrapper."""
    from torch.nn.parallel import DataParallel, DistributedDataParallel
    return model.module if isinstance(model, (DataParallel, DistributedDataParallel)) else model


def load_state_dict(module: nn.Module, state_dict: dict, strict: bool = False,
                    logger=None) -> Tuple[List[str], List[str]]:
    """Load ``state_dict`` into ``module``; report missing and unexpected keys.

    With ``strict=False`` (the default, as MMEngine) mismatches are logged as a warning; with
    ``strict=True`` they raise. Shape mismatches always raise (torch names the key).
    """
    missing, unexpected = module.load_state_dict(state_dict, strict=strict)
    if missing or unexpected:
        message = (f'missing keys in source state_dict: {", ".join(missing)}\n' if missing else '') \
            + (f'unexpected key in source state_dict: {", ".join(unexpected)}\n' if unexpected else '')
        if logger is not None:
            logger.warning(message.rstrip())
    return missing, unexpected


def load_checkpoint_to_model(model: nn.Module, checkpoint: dict, strict: bool = False,
                             revise_keys=((r'^module\.', ''), ), logger=None) -> dict:
    """Load ``checkpoint['state_dict']`` (or the whole dict if it has none) into ``model``.

    ``revise_keys`` are (pattern, replacement) pairs applied to every key; the default strips the
    ``module.`` prefix that DistributedDataParallel adds.
    """
    state_dict = checkpoint.get('state_dict', checkpoint)
    for pattern, replacement in revise_keys:
        state_dict = OrderedDict((re.sub(pattern, replacement, k), v) for k, v in state_dict.items())
    load_state_dict(unwrap_model(model), state_dict, strict=strict, logger=logger)
    return checkpoint
