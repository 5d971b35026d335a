"""Mixed precision the MMCV 1.x way: a model opts in, a hook switches it on.

A module opts in with an ``fp16_enabled = False`` attribute and decorated methods:

- ``@auto_fp16()`` casts the float32 tensors among the chosen arguments to float16 and runs the
  method under CUDA autocast (the network's forward);
- ``@force_fp32()`` casts float16 arguments to float32 and runs with autocast off (losses and
  post-processing, which need full precision).

Until ``wrap_fp16_model`` (called by ``Fp16OptimizerHook.before_run``) sets the flags to True,
both decorators call the method unchanged. This is MMCV's torch >= 1.6 path, where autocast is
CUDA's: on a CPU the arguments are still cast and nothing else changes. ``patch_norm_fp32`` and
``LossScaler`` belong to the older path (a ``.half()`` model) and are kept as API.
Left out: the deprecated ``allreduce_grads``.
"""
import functools
from collections import abc
from inspect import getfullargspec
from typing import Callable, Iterable, List, Optional

import numpy as np
import torch
import torch.nn as nn
from torch.nn.parameter import Parameter


def _autocast(enabled: bool):
    # CUDA autocast; torch would turn it off itself without CUDA, warning at every use.
    return torch.autocast('cuda', enabled=enabled and torch.cuda.is_available())


def cast_tensor_type(inputs, src_type: torch.dtype, dst_type: torch.dtype):
    """``inputs`` with every ``src_type`` tensor inside it (through mappings and iterables) cast
    to ``dst_type``. Tensors of other dtypes and anything else are returned as they are."""
    if isinstance(inputs, torch.Tensor):
        return inputs.to(dst_type) if inputs.dtype == src_type else inputs
    # Iterable, but not containers to open up.
    if isinstance(inputs, (nn.Module, str, np.ndarray)):
        return inputs
    if isinstance(inputs, abc.Mapping):
        return type(inputs)(
            {key: cast_tensor_type(value, src_type, dst_type) for key, value in inputs.items()})
    if isinstance(inputs, abc.Iterable):
        return type(inputs)(cast_tensor_type(item, src_type, dst_type) for item in inputs)
    return inputs


def _precision_decorator(check_owner: Callable, apply_to: Optional[Iterable],
                         src_type: torch.dtype, dst_type: torch.dtype, autocast: bool,
                         cast_back: bool) -> Callable:
    """What both decorators are, told apart by their arguments.

    Once the method's module has ``fp16_enabled`` on, the arguments named in ``apply_to`` (None:
    every named parameter) have their ``src_type`` tensors cast to ``dst_type`` (positional
    arguments are named by their position; defaults are left alone), the method runs with CUDA
    autocast on or off, and with ``cast_back`` the output's ``dst_type`` tensors return to
    ``src_type``.
    """

    def decorate(method: Callable) -> Callable:
        names = getfullargspec(method).args

        @functools.wraps(method)
        def run(*args, **kwargs):
            check_owner(args[0])
            if not getattr(args[0], 'fp16_enabled', False):
                return method(*args, **kwargs)
            chosen = names if apply_to is None else apply_to

            def maybe_cast(name, value):
                return cast_tensor_type(value, src_type, dst_type) if name in chosen else value

            new_args = [maybe_cast(name, value) for name, value in zip(names, args)]
            # Extra positional arguments (a ``*args``) have no name to be chosen by: as given.
            new_args += args[len(new_args):]
            new_kwargs = {name: maybe_cast(name, value) for name, value in kwargs.items()}
            with _autocast(enabled=autocast):
                output = method(*new_args, **new_kwargs)
            return cast_tensor_type(output, dst_type, src_type) if cast_back else output

        return run

    return decorate


def auto_fp16(apply_to: Optional[Iterable] = None, out_fp32: bool = False,
              supported_types: tuple = (nn.Module, )) -> Callable:
    """Decorate a method to run in float16, under autocast, once its module's ``fp16_enabled``
    is True: the float32 tensors among the arguments named in ``apply_to`` (None: all) become
    float16; ``out_fp32`` turns float16 results back to float32.

    Example::

        class Head(nn.Module):
            fp16_enabled = False

            @auto_fp16(apply_to=('feats', ))
            def forward(self, feats, img_metas):
                ...
    """

    def check_owner(owner):
        if not isinstance(owner, supported_types):
            raise TypeError('@auto_fp16 can only be used to decorate the method of those '
                            f'classes {supported_types}')

    return _precision_decorator(check_owner, apply_to, torch.float, torch.half, autocast=True,
                                cast_back=out_fp32)


def force_fp32(apply_to: Optional[Iterable] = None, out_fp16: bool = False) -> Callable:
    """Decorate a method to run in float32, autocast off, once ``fp16_enabled`` is True: the
    float16 tensors among the arguments named in ``apply_to`` (None: all) become float32;
    ``out_fp16`` turns float32 results to float16."""

    def check_owner(owner):
        if not isinstance(owner, nn.Module):
            raise TypeError('@force_fp32 can only be used to decorate the method of nn.Module')

    return _precision_decorator(check_owner, apply_to, torch.half, torch.float, autocast=False,
                                cast_back=out_fp16)


def wrap_fp16_model(model: nn.Module) -> None:
    """Switch on every ``fp16_enabled`` flag in ``model``. Nothing is cast here: on torch >= 1.6
    the decorators and autocast do that when the methods run."""
    for module in model.modules():
        if hasattr(module, 'fp16_enabled'):
            module.fp16_enabled = True


def patch_norm_fp32(module: nn.Module) -> nn.Module:
    """In a ``.half()`` model, put the normalization layers back to float32 (their running
    statistics lose too much in float16). A GroupNorm also gets float32 inputs and gives its
    output back in float16."""
    for layer in module.modules():
        if isinstance(layer, (nn.modules.batchnorm._BatchNorm, nn.GroupNorm)):
            layer.float()
            if isinstance(layer, nn.GroupNorm):
                layer.forward = patch_forward_method(layer.forward, torch.half, torch.float)
    return module


def patch_forward_method(func: Callable, src_type: torch.dtype,
                         dst_type: torch.dtype, convert_output: bool = True) -> Callable:
    """Wrap ``func`` to cast its ``src_type`` tensor arguments to ``dst_type`` (and, with
    ``convert_output``, its ``dst_type`` results back to ``src_type``)."""

    def forward(*args, **kwargs):
        result = func(*cast_tensor_type(args, src_type, dst_type),
                      **cast_tensor_type(kwargs, src_type, dst_type))
        return cast_tensor_type(result, dst_type, src_type) if convert_output else result

    return forward


class LossScaler:
    """Loss scaling for float16 training without ``GradScaler`` (MMCV's torch < 1.6 path).

    ``'static'``: the scale never changes. ``'dynamic'``: an iteration whose gradients hold
    inf or nan divides the scale by ``scale_factor`` (never below 1); ``scale_window``
    iterations in a row without one multiply it by ``scale_factor``.
    """

    # What state_dict() saves.
    _STATE = ('cur_scale', 'cur_iter', 'mode', 'last_overflow_iter', 'scale_factor',
              'scale_window')

    def __init__(self, init_scale: float = 2**32, mode: str = 'dynamic',
                 scale_factor: float = 2., scale_window: int = 1000):
        assert mode in ('dynamic', 'static'), 'mode can only be dynamic or static'
        self.mode = mode
        self.cur_scale = init_scale
        self.scale_factor = scale_factor
        self.scale_window = scale_window
        self.cur_iter = 0
        self.last_overflow_iter = -1

    @staticmethod
    def _has_inf_or_nan(x: torch.Tensor) -> bool:
        return not bool(torch.isfinite(x).all())

    def has_overflow(self, params: List[Parameter]) -> bool:
        """Whether some gradient of ``params`` is inf or nan (always False when static)."""
        if self.mode != 'dynamic':
            return False
        return any(p.grad is not None and self._has_inf_or_nan(p.grad.data) for p in params)

    def update_scale(self, overflow: bool) -> None:
        if self.mode != 'dynamic':
            return
        if overflow:
            self.cur_scale = max(self.cur_scale / self.scale_factor, 1)
            self.last_overflow_iter = self.cur_iter
        elif (self.cur_iter - self.last_overflow_iter) % self.scale_window == 0:
            # a whole window without overflow: try a larger scale
            self.cur_scale *= self.scale_factor
        self.cur_iter += 1

    def state_dict(self) -> dict:
        return {name: getattr(self, name) for name in self._STATE}

    def load_state_dict(self, state_dict: dict) -> None:
        for name in self._STATE:
            setattr(self, name, state_dict[name])

    @property
    def loss_scale(self) -> float:
        return self.cur_scale
