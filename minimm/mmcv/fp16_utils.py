"""Mixed precision the MMCV 1.x way: ``wrap_fp16_model`` switches it on, the decorators apply it.

A model opts in by giving its modules an ``fp16_enabled = False`` attribute and decorating
methods: ``@auto_fp16()`` casts the float32 tensors among the arguments named in ``apply_to``
(all, by default) to float16 and runs the method under CUDA autocast; ``@force_fp32()`` casts
float16 arguments to float32 and runs with autocast off. ``Fp16OptimizerHook`` calls
``wrap_fp16_model`` in ``before_run``, which sets every such flag to True; until then both
decorators call the method unchanged. As MMCV 1.7 on torch >= 1.6, where autocast is CUDA's:
on a CPU the arguments are still cast, nothing else changes.

Left out compared with MMCV 1.7: the deprecated ``fp16_utils.allreduce_grads``; ``model.half()``
with ``patch_norm_fp32`` in ``wrap_fp16_model``, which only torch < 1.6 did (the function is here).
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
    """CUDA autocast, as MMCV's ``torch.cuda.amp.autocast(enabled=...)`` (the current spelling).
    Without CUDA torch turns it off itself, with a warning at each use; here it is off up front."""
    return torch.autocast('cuda', enabled=enabled and torch.cuda.is_available())


def cast_tensor_type(inputs, src_type: torch.dtype, dst_type: torch.dtype):
    """Recursively cast the tensors of ``src_type`` in ``inputs`` to ``dst_type``; tensors of
    other types, modules, strings and arrays stay as they are (as MMCV >= 1.4.4)."""
    if isinstance(inputs, nn.Module):
        return inputs
    elif isinstance(inputs, torch.Tensor):
        return inputs.to(dst_type) if inputs.dtype == src_type else inputs
    elif isinstance(inputs, str):
        return inputs
    elif isinstance(inputs, np.ndarray):
        return inputs
    elif isinstance(inputs, abc.Mapping):
        return type(inputs)({k: cast_tensor_type(v, src_type, dst_type)
                             for k, v in inputs.items()})
    elif isinstance(inputs, abc.Iterable):
        return type(inputs)(cast_tensor_type(item, src_type, dst_type) for item in inputs)
    else:
        return inputs


def _cast_arguments(func: Callable, args: tuple, kwargs: dict, apply_to: Optional[Iterable],
                    src_type: torch.dtype, dst_type: torch.dtype):
    """``args`` and ``kwargs`` of a call of ``func`` with the ``src_type`` tensors of the
    arguments named in ``apply_to`` (None: all) cast to ``dst_type``; default values of the
    arguments not passed are not cast. What both decorators do first, as in MMCV."""
    args_info = getfullargspec(func)
    args_to_cast = args_info.args if apply_to is None else apply_to
    new_args = []
    if args:
        arg_names = args_info.args[:len(args)]
        for i, arg_name in enumerate(arg_names):
            if arg_name in args_to_cast:
                new_args.append(cast_tensor_type(args[i], src_type, dst_type))
            else:
                new_args.append(args[i])
    new_kwargs = {}
    if kwargs:
        for arg_name, arg_value in kwargs.items():
            if arg_name in args_to_cast:
                new_kwargs[arg_name] = cast_tensor_type(arg_value, src_type, dst_type)
            else:
                new_kwargs[arg_name] = arg_value
    return new_args, new_kwargs


def auto_fp16(apply_to: Optional[Iterable] = None, out_fp32: bool = False,
              supported_types: tuple = (nn.Module, )) -> Callable:
    """Decorator: once ``fp16_enabled`` is True, cast the float32 arguments named in ``apply_to``
    (None: all) to float16 and run under autocast; ``out_fp32`` casts float16 outputs back.

    Example::

        class MyModule(nn.Module):
            @auto_fp16(apply_to=('pred', ))
            def do_something(self, pred, others):
                ...
    """

    def auto_fp16_wrapper(old_func: Callable) -> Callable:

        @functools.wraps(old_func)
        def new_func(*args, **kwargs) -> Callable:
            if not isinstance(args[0], supported_types):
                raise TypeError('@auto_fp16 can only be used to decorate the method of those '
                                f'classes {supported_types}')
            if not (hasattr(args[0], 'fp16_enabled') and args[0].fp16_enabled):
                return old_func(*args, **kwargs)

            new_args, new_kwargs = _cast_arguments(old_func, args, kwargs, apply_to,
                                                   torch.float, torch.half)
            with _autocast(enabled=True):
                output = old_func(*new_args, **new_kwargs)
            if out_fp32:
                output = cast_tensor_type(output, torch.half, torch.float)
            return output

        return new_func

    return auto_fp16_wrapper


def force_fp32(apply_to: Optional[Iterable] = None, out_fp16: bool = False) -> Callable:
    """Decorator: once ``fp16_enabled`` is True, cast the float16 arguments named in ``apply_to``
    (None: all) to float32 and run with autocast off (for losses and post-processing that need
    full precision); ``out_fp16`` casts float32 outputs to float16.

    Example::

        class MyModule(nn.Module):
            @force_fp32(apply_to=('pred', ))
            def post_process(self, pred, others):
                ...
    """

    def force_fp32_wrapper(old_func):

        @functools.wraps(old_func)
        def new_func(*args, **kwargs) -> Callable:
            if not isinstance(args[0], torch.nn.Module):
                raise TypeError('@force_fp32 can only be used to decorate the method of '
                                'nn.Module')
            if not (hasattr(args[0], 'fp16_enabled') and args[0].fp16_enabled):
                return old_func(*args, **kwargs)
            new_args, new_kwargs = _cast_arguments(old_func, args, kwargs, apply_to,
                                                   torch.half, torch.float)
            with _autocast(enabled=False):
                output = old_func(*new_args, **new_kwargs)
            if out_fp16:
                output = cast_tensor_type(output, torch.float, torch.half)
            return output

        return new_func

    return force_fp32_wrapper


def wrap_fp16_model(model: nn.Module) -> None:
    """Set ``fp16_enabled = True`` on every submodule that has the attribute (torch >= 1.6: no
    ``.half()``; the decorators and autocast do the casting)."""
    for m in model.modules():
        if hasattr(m, 'fp16_enabled'):
            m.fp16_enabled = True


def patch_norm_fp32(module: nn.Module) -> nn.Module:
    """Recursively turn the normalization layers of a ``.half()`` model back to float32 (their
    statistics need it); GroupNorm also gets its inputs cast to float32 and its output back."""
    if isinstance(module, (nn.modules.batchnorm._BatchNorm, nn.GroupNorm)):
        module.float()
        if isinstance(module, nn.GroupNorm):
            module.forward = patch_forward_method(module.forward, torch.half, torch.float)
    for child in module.children():
        patch_norm_fp32(child)
    return module


def patch_forward_method(func: Callable, src_type: torch.dtype, dst_type: torch.dtype,
                         convert_output: bool = True) -> Callable:
    """``func`` with its ``src_type`` tensor arguments cast to ``dst_type`` (and, with
    ``convert_output``, its ``dst_type`` outputs cast back to ``src_type``)."""

    def new_forward(*args, **kwargs):
        output = func(*cast_tensor_type(args, src_type, dst_type),
                      **cast_tensor_type(kwargs, src_type, dst_type))
        if convert_output:
            output = cast_tensor_type(output, dst_type, src_type)
        return output

    return new_forward


class LossScaler:
    """Loss scaling for fp16 training, dynamic or static (after apex's ``LossScaler``); MMCV's
    Fp16OptimizerHook used it on torch < 1.6, and it is MMCV API.

    Dynamic scaling starts high; an overflowing step (inf/nan gradients) is skipped and divides
    the scale by ``scale_factor`` (not below 1); ``scale_window`` iterations without an overflow
    multiply it by ``scale_factor``.
    """

    def __init__(self, init_scale: float = 2**32, mode: str = 'dynamic',
                 scale_factor: float = 2., scale_window: int = 1000):
        self.cur_scale = init_scale
        self.cur_iter = 0
        assert mode in ('dynamic', 'static'), 'mode can only be dynamic or static'
        self.mode = mode
        self.last_overflow_iter = -1
        self.scale_factor = scale_factor
        self.scale_window = scale_window

    def has_overflow(self, params: List[Parameter]) -> bool:
        """Whether a gradient of ``params`` holds inf or nan (never, in static mode)."""
        if self.mode != 'dynamic':
            return False
        for p in params:
            if p.grad is not None and LossScaler._has_inf_or_nan(p.grad.data):
                return True
        return False

    @staticmethod
    def _has_inf_or_nan(x: torch.Tensor) -> bool:
        try:
            cpu_sum = float(x.float().sum())
        except RuntimeError as instance:
            if 'value cannot be converted' not in instance.args[0]:
                raise
            return True
        else:
            return cpu_sum in (float('inf'), -float('inf')) or cpu_sum != cpu_sum

    def update_scale(self, overflow: bool) -> None:
        """Update the scale after a step that did (or did not) overflow."""
        if self.mode != 'dynamic':
            return
        if overflow:
            self.cur_scale = max(self.cur_scale / self.scale_factor, 1)
            self.last_overflow_iter = self.cur_iter
        else:
            if (self.cur_iter - self.last_overflow_iter) % self.scale_window == 0:
                self.cur_scale *= self.scale_factor
        self.cur_iter += 1

    def state_dict(self) -> dict:
        return dict(cur_scale=self.cur_scale, cur_iter=self.cur_iter, mode=self.mode,
                    last_overflow_iter=self.last_overflow_iter, scale_factor=self.scale_factor,
                    scale_window=self.scale_window)

    def load_state_dict(self, state_dict: dict) -> None:
        self.cur_scale = state_dict['cur_scale']
        self.cur_iter = state_dict['cur_iter']
        self.mode = state_dict['mode']
        self.last_overflow_iter = state_dict['last_overflow_iter']
        self.scale_factor = state_dict['scale_factor']
        self.scale_window = state_dict['scale_window']

    @property
    def loss_scale(self) -> float:
        return self.cur_scale
