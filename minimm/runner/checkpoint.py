"""MMEngine's checkpoint API (``mmengine.runner.checkpoint``): load a checkpoint into a model,
read one from a path or URL, save one.

The everyday calls::

    from minimm.runner import load_checkpoint
    load_checkpoint(model, 'epoch_12.pth', map_location='cpu')              # weights only
    load_checkpoint(model, 'resnet.pth', revise_keys=[(r'^', 'backbone.')])  # into a part

``load_checkpoint`` = ``_load_checkpoint`` (read the file) + ``_load_checkpoint_to_model``
(rename keys with ``revise_keys``, then ``load_state_dict``). Reading goes through
``CheckpointLoader``, which picks a loader by the filename's prefix, the longest matching prefix
first: local paths and ``http(s)://`` (torch's hub download) load; MMEngine's other schemes
(``pavi://``, ``s3://``, ``open-mmlab://`` and the model zoos) have a loader that says they are
not supported. ``register_scheme`` adds your own. The file I/O itself, with its safety rules
(atomic writes, ``weights_only=True`` reads), is on the lowest floor, ``minimm/checkpoint.py``;
the Runner's ``load_from`` and ``resume`` use the functions here.

Different from MMEngine: files are read with ``weights_only=True``; ``trusted=True`` (minimm's
keyword on ``load_checkpoint``, ``_load_checkpoint`` and the two working loaders) allows a file
that needs arbitrary unpickling. Left out: file backends (``backend_args`` may only name the
local disk).
"""
import logging
import os.path as osp
import re
from collections import OrderedDict
from typing import Callable, Dict, List, Optional, Union

import torch.nn as nn

from ..checkpoint import (CheckpointError, CheckpointNotFoundError, find_latest_checkpoint,
                          load_what_fits, resume_candidates, unwrap_model,
                          weights_to_cpu, write_last_checkpoint)
from ..checkpoint import save_checkpoint as _write_checkpoint
from ..logging import print_log
from ..sharded_checkpoint import read_checkpoint

__all__ = ['CheckpointLoader', 'load_checkpoint', 'load_state_dict', 'get_state_dict',
           'weights_to_cpu', 'save_checkpoint', 'load_from_local', 'load_from_http',
           'find_latest_checkpoint', 'CheckpointError', 'CheckpointNotFoundError',
           'resume_candidates', 'write_last_checkpoint']

DEFAULT_REVISE_KEYS = [(r'^module\.', '')]  # the prefix DistributedDataParallel adds


def load_state_dict(module: nn.Module, state_dict: dict, strict: bool = False,
                    logger=None) -> None:
    """Load ``state_dict`` into ``module``, module by module, skipping tensors of another shape.

    Unexpected, missing and mismatched keys are one report: a RuntimeError with ``strict=True``,
    else a warning through ``print_log`` (printed when ``logger`` is None). A module's load
    post-hooks may remove keys from the report before it is made.
    """
    message = load_what_fits(module, state_dict)
    if message is None:
        return
    if strict:
        raise RuntimeError(message)
    print_log(message, logger=logger, level=logging.WARNING)


def get_state_dict(module: nn.Module, destination: Optional[OrderedDict] = None,
                   prefix: str = '', keep_vars: bool = False) -> OrderedDict:
    """``module.state_dict()``, looking through every wrapper inside the model (a
    ``DataParallel`` around a sub-module adds no ``module.`` to its keys)."""
    module = unwrap_model(module)
    if destination is None:
        destination = OrderedDict()
        destination._metadata = OrderedDict()
    destination._metadata[prefix[:-1]] = local_metadata = dict(version=module._version)
    module._save_to_state_dict(destination, prefix, keep_vars)
    for name, child in module._modules.items():
        if child is not None:
            get_state_dict(child, destination, f'{prefix}{name}.', keep_vars)
    for hook in module._state_dict_hooks.values():
        result = hook(module, destination, prefix, local_metadata)
        if result is not None:
            destination = result
    return destination


def save_checkpoint(checkpoint: dict, filename: str, file_client_args: Optional[dict] = None,
                    backend_args: Optional[dict] = None) -> None:
    """Write ``checkpoint`` to the local file ``filename`` (atomically, as plain data)."""
    for name, args in (('file_client_args', file_client_args), ('backend_args', backend_args)):
        if args is not None and args.get('backend') not in ('local', 'disk'):
            raise ValueError(f"{name}={args!r}: minimm saves to the local disk only, so its "
                             "backend may only be 'local' or 'disk'")
    scheme = re.match(r'(\S+?)://', filename)
    if scheme is not None:
        raise ValueError(f'cannot save to {filename!r}: the {scheme.group(1)}:// scheme needs '
                         'a file backend, which minimm leaves out; save to a local path')
    _write_checkpoint(checkpoint, filename)


class CheckpointLoader:
    """Loaders by filename prefix; the longest matching prefix (a regular expression, matched
    at the start) wins, and ``''`` (a local path) matches everything."""

    _schemes: Dict[str, Callable] = {}

    @classmethod
    def register_scheme(cls, prefixes: Union[str, List[str]], loader: Optional[Callable] = None,
                        force: bool = False):
        """Register ``loader(filename, map_location)`` for each prefix; as a decorator when
        ``loader`` is None. A prefix that has a loader raises KeyError unless ``force``."""
        def register(fn: Callable) -> Callable:
            for prefix in [prefixes] if isinstance(prefixes, str) else prefixes:
                if prefix in cls._schemes and not force:
                    raise KeyError(f'{prefix} is already registered as a loader backend, add '
                                   '"force=True" if you want to override it')
                cls._schemes[prefix] = fn
            # Longest first, so that 'a/b/c' is tried before 'a/b' (and '' last).
            cls._schemes = dict(sorted(cls._schemes.items(), key=lambda kv: -len(kv[0])))
            return fn

        return register if loader is None else register(loader)

    @classmethod
    def _get_checkpoint_loader(cls, path: str) -> Callable:
        return next(fn for prefix, fn in cls._schemes.items() if re.match(prefix, path))

    @classmethod
    def load_checkpoint(cls, filename: str, map_location=None, logger='current',
                        trusted: bool = False) -> dict:
        """Read ``filename`` with the loader its prefix selects."""
        loader = cls._get_checkpoint_loader(filename)
        print_log(f'Loads checkpoint by {loader.__name__[len("load_from_"):]} backend from '
                  f'path: {filename}', logger=logger)
        return loader(filename, map_location, **({'trusted': True} if trusted else {}))


@CheckpointLoader.register_scheme(prefixes='')
def load_from_local(filename: str, map_location=None, trusted: bool = False) -> dict:
    """Read a local file (``~`` is expanded), or a sharded checkpoint folder, whole."""
    return read_checkpoint(osp.expanduser(filename), map_location=map_location, trusted=trusted)


@CheckpointLoader.register_scheme(prefixes=['http://', 'https://'])
def load_from_http(filename: str, map_location=None, model_dir: Optional[str] = None,
                   trusted: bool = False) -> dict:
    """Download once into torch's hub cache (or ``model_dir``), then read the copy."""
    import torch.hub
    return torch.hub.load_state_dict_from_url(filename, model_dir=model_dir,
                                              map_location=map_location,
                                              weights_only=not trusted)


def _not_supported(name: str, prefixes: List[str], what: str) -> Callable:
    """A loader named as MMEngine's, registered for its ``prefixes``, that says why not."""
    def loader(filename: str, map_location=None):
        raise NotImplementedError(
            f'cannot load {filename!r}: minimm has no loader for {what} (MMEngine\'s {name}); '
            'download the file and pass its local path, or register one with '
            'CheckpointLoader.register_scheme')

    loader.__name__ = loader.__qualname__ = name
    return CheckpointLoader.register_scheme(prefixes, loader)


load_from_torchvision = _not_supported('load_from_torchvision', ['modelzoo://', 'torchvision://'],
                                       "torchvision's model zoo")
load_from_openmmlab = _not_supported('load_from_openmmlab', ['open-mmlab://', 'openmmlab://'],
                                     "OpenMMLab's model zoo")
load_from_mmcls = _not_supported('load_from_mmcls', ['mmcls://'], "MMClassification's model zoo")
load_from_pavi = _not_supported('load_from_pavi', ['pavi://'], 'pavi:// (a private service)')
load_from_ceph = _not_supported('load_from_ceph', [r'(\S+\:)?s3://', r'(\S+\:)?petrel://'],
                                's3:// and petrel:// (file backends)')


def _load_checkpoint(filename: str, map_location=None, logger=None,
                     trusted: bool = False) -> dict:
    """Read a checkpoint from a path or URL into a dict."""
    return CheckpointLoader.load_checkpoint(filename, map_location, logger, trusted=trusted)


def _load_checkpoint_with_prefix(prefix: str, filename: str, map_location=None) -> dict:
    """The part of a checkpoint's weights under ``prefix`` (``'backbone'``), prefix removed."""
    checkpoint = _load_checkpoint(filename, map_location=map_location)
    state_dict = checkpoint.get('state_dict', checkpoint)
    prefix = prefix if prefix.endswith('.') else prefix + '.'
    part = {key[len(prefix):]: value for key, value in state_dict.items()
            if key.startswith(prefix)}
    if not part:
        raise AssertionError(f'{prefix} is not in the pretrained model')
    return part


def _load_checkpoint_to_model(model: nn.Module, checkpoint: dict, strict: bool = False,
                              logger=None, revise_keys: list = DEFAULT_REVISE_KEYS) -> dict:
    """Load ``checkpoint['state_dict']`` (or the whole dict, a bare state dict) into ``model``
    after renaming each key by the ``(pattern, replacement)`` pairs of ``revise_keys``."""
    state_dict = checkpoint.get('state_dict', checkpoint)
    metadata = getattr(state_dict, '_metadata', OrderedDict())
    for pattern, replacement in revise_keys:
        state_dict = OrderedDict((re.sub(pattern, replacement, key), value)
                                 for key, value in state_dict.items())
    state_dict._metadata = metadata  # module versions survive the renaming
    load_state_dict(model, state_dict, strict, logger)
    return checkpoint


def load_checkpoint(model: nn.Module, filename: str, map_location=None, strict: bool = False,
                    logger=None, revise_keys: list = DEFAULT_REVISE_KEYS,
                    trusted: bool = False) -> dict:
    """Read ``filename`` (a path or URL) and load its weights into ``model``; return the whole
    checkpoint dict, as read."""
    checkpoint = _load_checkpoint(filename, map_location, logger, trusted=trusted)
    if not isinstance(checkpoint, dict):
        raise RuntimeError(f'No state_dict found in checkpoint file {filename}')
    return _load_checkpoint_to_model(model, checkpoint, strict, logger, revise_keys)
