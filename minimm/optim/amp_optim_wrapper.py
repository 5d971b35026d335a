"""AmpOptimWrapper: the OptimWrapper for automatic mixed precision (AMP).

This file teaches the two halves of mixed-precision training:

1. ``optim_context`` runs the forward pass under ``torch.autocast``, so matrix multiplies run in
   fp16/bf16 while the parameters stay fp32;
2. with fp16, small gradients underflow, so the loss is multiplied by a *loss scale* before
   backward and the gradients are divided by it before the step (``torch.amp.GradScaler``).
   ``'dynamic'`` lets the scaler grow and shrink the scale (and skip steps whose gradients
   overflowed); a float keeps it fixed; a dict passes GradScaler's own arguments.

Different from MMEngine: MMEngine's AmpOptimWrapper refuses to run without an accelerator. Here it
also runs on CPU, with bf16 autocast (the default CPU autocast dtype) and *no* GradScaler: bf16 has
fp32's exponent range, so nothing underflows and there is nothing to scale. The device is taken
from the optimizer's parameters when the wrapper is built, so build it after moving the model.
On CUDA, ``state_dict()`` holds the scaler's state under ``'loss_scaler'`` as MMEngine's does.
Left out: NPU/MLU/MUSA devices; ``use_fp16_accumulation`` is accepted but unused (in MMEngine
only the NPU path reads it).
"""
from contextlib import contextmanager
from typing import Optional, Union

import torch

from ..registry import OPTIM_WRAPPERS
from .optim_wrapper import OptimWrapper


@OPTIM_WRAPPERS.register_module()
class AmpOptimWrapper(OptimWrapper):
    """OptimWrapper with autocast and, on CUDA, loss scaling.

    Args:
        loss_scale: ``'dynamic'``, a float (static scale) or a dict of GradScaler kwargs.
        dtype: autocast dtype, ``'float16'``/``'bfloat16'``/a ``torch.dtype``/``None`` (autocast's
            default for the device: fp16 on CUDA, bf16 on CPU).
        use_fp16_accumulation: kept for config compatibility with MMEngine.
        **kwargs: OptimWrapper's arguments (``optimizer``, ``accumulative_counts``, ``clip_grad``).
    """

    valid_dtypes = ('float16', 'bfloat16', None)

    def __init__(self, loss_scale: Union[str, float, dict] = 'dynamic',
                 dtype: Union[str, torch.dtype, None] = None,
                 use_fp16_accumulation: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.device_type = self._parameter_device_type()
        self._scale_update_param = None
        if loss_scale == 'dynamic':
            scaler_kwargs = {}
        elif isinstance(loss_scale, float):
            # A static scale: start at it, and pass it to every update() so it never moves.
            self._scale_update_param = loss_scale
            scaler_kwargs = dict(init_scale=loss_scale)
        elif isinstance(loss_scale, dict):
            scaler_kwargs = dict(loss_scale)
        else:
            raise TypeError("loss_scale must be of type float, dict, or 'dynamic', "
                            f'but got {loss_scale!r}')
        self.loss_scaler = (torch.amp.GradScaler('cuda', **scaler_kwargs)
                            if self.device_type == 'cuda' else None)

        if isinstance(dtype, str):
            if dtype not in self.valid_dtypes:
                raise ValueError(f'dtype should be any of {self.valid_dtypes}, got {dtype!r}')
            dtype = getattr(torch, dtype)
        if not (dtype is None or isinstance(dtype, torch.dtype)):
            raise TypeError(f'dtype should be None, a str or a torch.dtype, got {type(dtype)}')
        self.cast_dtype: Optional[torch.dtype] = dtype
        self.use_fp16_accumulation = use_fp16_accumulation

    def _parameter_device_type(self) -> str:
        return next((param.device.type for group in self.optimizer.param_groups
                     for param in group['params']), 'cpu')

    def backward(self, loss: torch.Tensor, **kwargs) -> None:
        if self.loss_scaler is not None:
            loss = self.loss_scaler.scale(loss)
        super().backward(loss, **kwargs)

    def step(self, **kwargs) -> None:
        if self.loss_scaler is None:
            super().step(**kwargs)
            return
        if self.clip_grad_kwargs:
            # Clip the true gradients, not the scaled ones.
            self.loss_scaler.unscale_(self.optimizer)
            self._clip_grad()
        self.loss_scaler.step(self.optimizer, **kwargs)
        self.loss_scaler.update(self._scale_update_param)

    def state_dict(self) -> dict:
        state_dict = super().state_dict()
        if self.loss_scaler is not None:
            state_dict['loss_scaler'] = self.loss_scaler.state_dict()
        return state_dict

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        loss_scaler_state = state_dict.pop('loss_scaler', None)
        if loss_scaler_state is not None and self.loss_scaler is not None:
            self.loss_scaler.load_state_dict(loss_scaler_state)
        super().load_state_dict(state_dict)

    @contextmanager
    def optim_context(self, model: torch.nn.Module):
        """OptimWrapper's context (DDP ``no_sync``) plus autocast on the parameters' device."""
        with super().optim_context(model), \
                torch.autocast(device_type=self.device_type, dtype=self.cast_dtype):
            yield
