"""MMCV 1.x checkpoint functions, as ``mmcv/runner/checkpoint.py`` names them, on minimm's shared
checkpoint file I/O.

``save_checkpoint(model, filename, optimizer, meta)`` writes ``meta`` (with ``mmcv_version`` and
``time``), the unwrapped model's ``state_dict`` (which holds **every** buffer, even the
non-persistent ones ``module.state_dict()`` skips, as MMCV's) and the optimizer(s).
``load_checkpoint(model, filename, ...)`` loads a checkpoint (or a bare state dict) into a model and
returns the whole dict. Different from MMCV: files are written atomically and read with
``weights_only=True`` (minimm's shared rules, ``minimm/checkpoint.py``). Left out: ``CheckpointLoader`` and its URL,
model-zoo, Pavi and S3 schemes, and ``file_client_args`` (local files only).
"""
import logging
import re
import time
from collections import OrderedDict
from typing import Callable, List, Optional, Union

import torch
import torch.nn as nn
from torch.optim import Optimizer

from minimm.checkpoint import load_checkpoint_file
from minimm.checkpoint import save_checkpoint as save_checkpoint_file

from .dist_utils import get_dist_info
from .parallel import is_module_wrapper

MMCV_VERSION = '1.7.2'  # the version whose file format is written


def load_state_dict(module: nn.Module, state_dict: Union[dict, OrderedDict], strict: bool = False,
                    logger: Optional[logging.Logger] = None) -> None:
    """Load ``state_dict`` into ``module`` (and any wrapper inside it), module by module.

    Missing ``num_batches_tracked`` buffers are not reported. Other unexpected, missing or
    mismatched keys are one message: a RuntimeError with ``strict``, else a warning on ``logger``
    (printed without one), on rank 0.
    """
    unexpected_keys: List[str] = []
    all_missing_keys: List[str] = []
    err_msg: List[str] = []

    metadata = getattr(state_dict, '_metadata', None)
    state_dict = state_dict.copy()
    if metadata is not None:
        state_dict._metadata = metadata

    # _load_from_state_dict, as torch's load_state_dict does, so each module's version hooks run.
    def load(module, prefix=''):
        if is_module_wrapper(module):
            module = module.module
        local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
        module._load_from_state_dict(state_dict, prefix, local_metadata, True, all_missing_keys,
                                     unexpected_keys, err_msg)
        for name, child in module._modules.items():
            if child is not None:
                load(child, prefix + name + '.')

    load(module)

    missing_keys = [key for key in all_missing_keys if 'num_batches_tracked' not in key]
    if unexpected_keys:
        err_msg.append(f'unexpected key in source state_dict: {", ".join(unexpected_keys)}\n')
    if missing_keys:
        err_msg.append(f'missing keys in source state_dict: {", ".join(missing_keys)}\n')

    rank, _ = get_dist_info()
    if len(err_msg) > 0 and rank == 0:
        err_msg.insert(0, 'The model and loaded state dict do not match exactly\n')
        message = '\n'.join(err_msg)
        if strict:
            raise RuntimeError(message)
        elif logger is not None:
            logger.warning(message)
        else:
            print(message)


def _load_checkpoint(filename: str, map_location: Union[str, Callable, None] = None,
                     logger: Optional[logging.Logger] = None) -> Union[dict, OrderedDict]:
    """Read a checkpoint file (a local path) into a dict."""
    if logger is not None:
        logger.info(f'load checkpoint from local path: {filename}')
    return load_checkpoint_file(filename, map_location=map_location)


def _load_checkpoint_with_prefix(prefix: str, filename: str,
                                 map_location: Union[str, Callable, None] = None
                                 ) -> Union[dict, OrderedDict]:
    """The part of a checkpoint's state dict under ``prefix`` (``'backbone.'``), prefix removed."""
    checkpoint = _load_checkpoint(filename, map_location=map_location)
    if 'state_dict' in checkpoint:
        state_dict = checkpoint['state_dict']
    else:
        state_dict = checkpoint
    if not prefix.endswith('.'):
        prefix += '.'
    prefix_len = len(prefix)
    state_dict = {k[prefix_len:]: v for k, v in state_dict.items() if k.startswith(prefix)}
    assert state_dict, f'{prefix} is not in the pretrained model'
    return state_dict


def load_checkpoint(model: torch.nn.Module, filename: str,
                    map_location: Union[str, Callable, None] = None, strict: bool = False,
                    logger: Optional[logging.Logger] = None,
                    revise_keys: list = [(r'^module\.', '')]) -> Union[dict, OrderedDict]:
    """Load ``filename``'s ``state_dict`` (or the file itself, a bare state dict) into ``model``,
    every key revised by the ``(pattern, replacement)`` pairs of ``revise_keys``; return the whole
    checkpoint."""
    checkpoint = _load_checkpoint(filename, map_location, logger)
    if not isinstance(checkpoint, dict):
        raise RuntimeError(f'No state_dict found in checkpoint file {filename}')
    if 'state_dict' in checkpoint:
        state_dict = checkpoint['state_dict']
    else:
        state_dict = checkpoint

    metadata = getattr(state_dict, '_metadata', OrderedDict())
    for p, r in revise_keys:
        state_dict = OrderedDict({re.sub(p, r, k): v for k, v in state_dict.items()})
    state_dict._metadata = metadata

    load_state_dict(model, state_dict, strict, logger)
    return checkpoint


def weights_to_cpu(state_dict: OrderedDict) -> OrderedDict:
    """A copy of ``state_dict`` with every tensor on the CPU (a GPU run's file loads anywhere)."""
    state_dict_cpu = OrderedDict()
    for key, val in state_dict.items():
        state_dict_cpu[key] = val.cpu()
    state_dict_cpu._metadata = getattr(state_dict, '_metadata', OrderedDict())
    return state_dict_cpu


def _save_to_state_dict(module: torch.nn.Module, destination: dict, prefix: str,
                        keep_vars: bool) -> None:
    """One module's own parameters and buffers, *non-persistent buffers included* (where
    ``nn.Module._save_to_state_dict`` skips them)."""
    for name, param in module._parameters.items():
        if param is not None:
            destination[prefix + name] = param if keep_vars else param.detach()
    for name, buf in module._buffers.items():
        if buf is not None:
            destination[prefix + name] = buf if keep_vars else buf.detach()


def get_state_dict(module: torch.nn.Module, destination: Optional[OrderedDict] = None,
                   prefix: str = '', keep_vars: bool = False) -> OrderedDict:
    """``module.state_dict()`` with every buffer, and any wrapper inside the model unwrapped."""
    if is_module_wrapper(module):
        module = module.module

    # Below is what torch.nn.Module.state_dict() does.
    if destination is None:
        destination = OrderedDict()
        destination._metadata = OrderedDict()
    destination._metadata[prefix[:-1]] = local_metadata = dict(version=module._version)
    _save_to_state_dict(module, destination, prefix, keep_vars)
    for name, child in module._modules.items():
        if child is not None:
            get_state_dict(child, destination, prefix + name + '.', keep_vars=keep_vars)
    for hook in module._state_dict_hooks.values():
        hook_result = hook(module, destination, prefix, local_metadata)
        if hook_result is not None:
            destination = hook_result
    return destination


def save_checkpoint(model: torch.nn.Module, filename: str, optimizer: Optional[Optimizer] = None,
                    meta: Optional[dict] = None, file_client_args: Optional[dict] = None) -> None:
    """Write ``meta``, the model's weights and the optimizer(s) (one, a dict of them, or None)."""
    if meta is None:
        meta = {}
    elif not isinstance(meta, dict):
        raise TypeError(f'meta must be a dict or None, but got {type(meta)}')
    if file_client_args is not None:
        raise ValueError('file_client_args is not supported: minimm saves to local disk')
    meta.update(mmcv_version=MMCV_VERSION, time=time.asctime())

    if is_module_wrapper(model):
        model = model.module

    if hasattr(model, 'CLASSES') and model.CLASSES is not None:
        meta.update(CLASSES=model.CLASSES)

    checkpoint = {'meta': meta, 'state_dict': weights_to_cpu(get_state_dict(model))}
    if isinstance(optimizer, Optimizer):
        checkpoint['optimizer'] = optimizer.state_dict()
    elif isinstance(optimizer, dict):
        checkpoint['optimizer'] = {}
        for name, optim in optimizer.items():
            checkpoint['optimizer'][name] = optim.state_dict()
    save_checkpoint_file(checkpoint, filename)
