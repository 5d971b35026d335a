"""MMCV 1.x's checkpoint functions, on minimm's shared checkpoint file I/O.

A checkpoint file is a dict: ``meta`` (``epoch``, ``iter``, ``mmcv_version``, ``time``, what the
hooks noted...), ``state_dict`` (the model's weights) and, if saved, ``optimizer``.
``save_checkpoint`` writes one, ``load_checkpoint`` puts one (or a bare state dict) into a model
and returns the whole dict. Two details, as in MMCV: the saved state dict holds *every* buffer,
even the non-persistent ones ``module.state_dict()`` leaves out, and loading walks the model
module by module, so a wrapper found anywhere inside it (``MMDataParallel``) is looked through.

Different from MMCV: files are written atomically and read with ``weights_only=True`` (minimm's
shared rules, ``minimm/checkpoint.py``). Left out: ``CheckpointLoader`` with its URL, model-zoo,
Pavi and S3 schemes, and ``file_client_args`` (local files only).
"""
import re
import time
from collections import OrderedDict

from torch.optim import Optimizer

from minimm.checkpoint import load_checkpoint_file
from minimm.checkpoint import save_checkpoint as save_checkpoint_file

from .dist_utils import get_dist_info
from .parallel import is_module_wrapper

MMCV_VERSION = '1.7.2'  # written into every checkpoint's meta, as the format's version


def _unwrap(module):
    return module.module if is_module_wrapper(module) else module


def _children(module):
    return [(name, child) for name, child in module._modules.items() if child is not None]


def _submodules(module, prefix=''):
    """``(key prefix, module)`` for ``module`` and everything inside it, parents first, looking
    through wrappers (their ``module.`` does not appear in the keys)."""
    module = _unwrap(module)
    yield prefix, module
    for name, child in _children(module):
        yield from _submodules(child, f'{prefix}{name}.')


def load_state_dict(module, state_dict, strict=False, logger=None):
    """Copy the tensors of ``state_dict`` into ``module``; shapes must match.

    Each submodule takes its own keys (``_load_from_state_dict``, what ``nn.Module`` uses too, so
    version upgrades of old checkpoints still run). Whatever did not fit (keys the model lacks,
    keys it expected but did not get, shape mismatches) is reported in one message: raised
    as a RuntimeError with ``strict``, else logged as a warning (printed without a logger), on
    rank 0 only. A missing ``num_batches_tracked`` is not worth a word.
    """
    metadata = getattr(state_dict, '_metadata', None)
    source = OrderedDict(state_dict)  # loading may take keys out: work on a copy
    missing, unexpected, problems = [], [], []
    for prefix, submodule in _submodules(module):
        versions = {} if metadata is None else metadata.get(prefix[:-1], {})
        submodule._load_from_state_dict(source, prefix, versions, True, missing, unexpected,
                                        problems)

    missing = [key for key in missing if 'num_batches_tracked' not in key]
    if unexpected:
        problems.append(f'unexpected key in source state_dict: {", ".join(unexpected)}\n')
    if missing:
        problems.append(f'missing keys in source state_dict: {", ".join(missing)}\n')
    if not problems or get_dist_info()[0] != 0:
        return
    message = '\n'.join(['The model and loaded state dict do not match exactly\n'] + problems)
    if strict:
        raise RuntimeError(message)
    if logger is None:
        print(message)
    else:
        logger.warning(message)


def _load_checkpoint(filename, map_location=None, logger=None):
    """The dict a local checkpoint file holds."""
    if logger is not None:
        logger.info(f'load checkpoint from local path: {filename}')
    return load_checkpoint_file(filename, map_location=map_location)


def _weights_of(checkpoint):
    """A checkpoint's state dict: its ``state_dict`` entry, or the file itself when it is a bare
    state dict (as ``torch.save(model.state_dict())`` writes)."""
    return checkpoint['state_dict'] if 'state_dict' in checkpoint else checkpoint


def _load_checkpoint_with_prefix(prefix, filename, map_location=None):
    """The weights under one part of a model (``'backbone'``), with that prefix taken off the keys:
    what loading a pretrained backbone into a new detector needs."""
    prefix = prefix if prefix.endswith('.') else prefix + '.'  # 'backbone' means 'backbone.'
    weights = _weights_of(_load_checkpoint(filename, map_location=map_location))
    part = {key[len(prefix):]: value for key, value in weights.items() if key.startswith(prefix)}
    assert part, f'{prefix} is not in the pretrained model'
    return part


def load_checkpoint(model, filename, map_location=None, strict=False, logger=None,
                    revise_keys=[(r'^module\.', '')]):
    """Load the weights of a checkpoint file into ``model`` and return the whole checkpoint.

    ``revise_keys``: ``(pattern, replacement)`` pairs applied to every key first; the default
    takes off the ``module.`` that saving a DataParallel-wrapped model adds.
    """
    checkpoint = _load_checkpoint(filename, map_location, logger)
    if not isinstance(checkpoint, dict):
        raise RuntimeError(f'No state_dict found in checkpoint file {filename}')
    weights = _weights_of(checkpoint)
    metadata = getattr(weights, '_metadata', OrderedDict())
    for pattern, replacement in revise_keys:
        weights = OrderedDict((re.sub(pattern, replacement, key), value)
                              for key, value in weights.items())
    weights._metadata = metadata
    load_state_dict(model, weights, strict, logger)
    return checkpoint


def weights_to_cpu(state_dict):
    """A copy of ``state_dict`` with every tensor moved to the CPU (a GPU run's file then loads
    on any machine); the module versions in ``_metadata`` come along."""
    on_cpu = OrderedDict((key, tensor.cpu()) for key, tensor in state_dict.items())
    on_cpu._metadata = getattr(state_dict, '_metadata', OrderedDict())
    return on_cpu


def get_state_dict(module, destination=None, prefix='', keep_vars=False):
    """``module.state_dict()``, but with non-persistent buffers too and wrappers looked through.

    Built as PyTorch builds it: per module, its parameters, then its buffers, then its children
    (recursively), then the module's state-dict hooks; ``_metadata`` records each module's
    version.
    """
    module = _unwrap(module)
    if destination is None:
        destination = OrderedDict()
        destination._metadata = OrderedDict()
    versions = destination._metadata[prefix[:-1]] = {'version': module._version}
    for tensors in (module._parameters, module._buffers):
        for name, tensor in tensors.items():
            if tensor is not None:
                destination[prefix + name] = tensor if keep_vars else tensor.detach()
    for name, child in _children(module):
        get_state_dict(child, destination, f'{prefix}{name}.', keep_vars=keep_vars)
    for state_dict_hook in module._state_dict_hooks.values():
        changed = state_dict_hook(module, destination, prefix, versions)
        if changed is not None:
            destination = changed
    return destination


def save_checkpoint(model, filename, optimizer=None, meta=None, file_client_args=None):
    """Write ``meta`` (plus ``mmcv_version``, ``time`` and the model's ``CLASSES`` if it has
    them), the model's weights on the CPU and the state of ``optimizer`` (one, or a dict of
    them) to ``filename``."""
    if meta is None:
        meta = {}
    elif not isinstance(meta, dict):
        raise TypeError(f'meta must be a dict or None, but got {type(meta)}')
    if file_client_args is not None:
        raise ValueError('file_client_args is not supported: minimm saves to local disk')
    model = _unwrap(model)
    meta.update(mmcv_version=MMCV_VERSION, time=time.asctime())
    if getattr(model, 'CLASSES', None) is not None:  # a detector's class names travel along
        meta['CLASSES'] = model.CLASSES
    checkpoint = {'meta': meta, 'state_dict': weights_to_cpu(get_state_dict(model))}
    if isinstance(optimizer, Optimizer):
        checkpoint['optimizer'] = optimizer.state_dict()
    elif isinstance(optimizer, dict):
        checkpoint['optimizer'] = {name: optim.state_dict() for name, optim in optimizer.items()}
    save_checkpoint_file(checkpoint, filename)
