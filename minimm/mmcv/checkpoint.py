"""MMCV 1.x checkpoint files: ``save_checkpoint(model, filename, optimizer, meta)`` and
``load_checkpoint(model, filename, ...)``, on minimm's shared checkpoint I/O.

As MMCV 1.7, the saved ``state_dict`` holds **every** buffer, even the non-persistent ones
``module.state_dict()`` skips. Different from MMCV: files are written atomically and read with
``weights_only=True`` (minimm's shared rules); no URLs or file backends.
"""
import time
from collections import OrderedDict
from itertools import chain

import torch

from minimm.checkpoint import (load_checkpoint_file, load_checkpoint_to_model,
                               save_checkpoint as save_checkpoint_file, unwrap_model)

MMCV_VERSION = '1.7.2'  # the version whose file format is written


def get_state_dict(module: torch.nn.Module, prefix: str = '') -> OrderedDict:
    """Parameters then *all* buffers of each module, then its children, detached on the CPU."""
    state = OrderedDict((prefix + name, t.detach().cpu()) for name, t in
                        chain(module._parameters.items(), module._buffers.items()) if t is not None)
    for name, child in module._modules.items():
        if child is not None:
            state.update(get_state_dict(child, f'{prefix}{name}.'))
    return state


def save_checkpoint(model, filename: str, optimizer=None, meta=None) -> None:
    """Write ``model`` (unwrapped), ``optimizer`` and ``meta`` to ``filename``, as MMCV 1.7."""
    if meta is None:
        meta = {}
    elif not isinstance(meta, dict):
        raise TypeError(f'meta must be a dict or None, but got {type(meta)}')
    meta.update(mmcv_version=MMCV_VERSION, time=time.asctime())
    model = unwrap_model(model)
    if getattr(model, 'CLASSES', None) is not None:
        meta['CLASSES'] = model.CLASSES
    checkpoint = {'meta': meta, 'state_dict': get_state_dict(model)}
    if isinstance(optimizer, torch.optim.Optimizer):
        checkpoint['optimizer'] = optimizer.state_dict()
    elif isinstance(optimizer, dict):
        checkpoint['optimizer'] = {name: optim.state_dict() for name, optim in optimizer.items()}
    save_checkpoint_file(checkpoint, filename)


def load_checkpoint(model, filename: str, map_location='cpu', strict: bool = False, logger=None,
                    revise_keys=((r'^module.', ''), )) -> dict:
    """Load ``filename``'s ``state_dict`` into ``model`` (keys revised by ``(pattern,
    replacement)`` pairs); return the whole checkpoint dict."""
    if logger is not None:
        logger.info(f'load checkpoint from local path: {filename}')
    checkpoint = load_checkpoint_file(filename, map_location=map_location)
    return load_checkpoint_to_model(model, checkpoint, strict=strict, revise_keys=revise_keys,
                                    logger=logger)
