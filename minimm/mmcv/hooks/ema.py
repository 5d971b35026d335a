"""EMAHook, as MMCV 1.7's: the moving average lives in buffers *on the model* (``a.b`` ->
``ema_a_b``), so every checkpoint holds it. Every ``interval`` iterations ``ema = (1 - m) * ema +
m * param``, ``m = min(momentum ** interval, (1 + iter) / (warm_up + iter))``; parameters and
averages swap around each train epoch, so val, EvalHook and CheckpointHook see the averages.
Compare ``minimm/hooks/ema_hook.py`` (MMEngine: a separate averaged model).

Different from MMCV 1.7: the update runs through minimm's fused ``ops.ema_update_`` (one call for
all tensors; MMCV's formula up to rounding), on tensor lists built once in ``before_run``.
"""
from typing import Optional

import torch

from minimm.ops import ema_update_

from ..parallel import is_module_wrapper
from .hook import HOOKS, Hook


@HOOKS.register_module()
class EMAHook(Hook):
    """Args: ``momentum`` (the new value's weight), ``interval`` (update every ``interval``
    iterations), ``warm_up`` (smaller momenta for the first steps), ``resume_from`` (a checkpoint
    to resume from once the EMA buffers exist)."""

    def __init__(self,
                 momentum: float = 0.0002,
                 interval: int = 1,
                 warm_up: int = 100,
                 resume_from: Optional[str] = None):
        assert isinstance(interval, int) and interval > 0
        self.warm_up = warm_up
        self.interval = interval
        assert momentum > 0 and momentum < 1
        self.momentum = momentum**interval
        self.checkpoint = resume_from

    def before_run(self, runner):
        """Register an EMA buffer per parameter (``named_buffer``: saved and resumed with it)."""
        model = runner.model
        if is_module_wrapper(model):
            model = model.module
        self.param_ema_buffer = {}
        self.model_parameters = dict(model.named_parameters(recurse=True))
        for name, value in self.model_parameters.items():
            # "." is not allowed in module's buffer name
            buffer_name = f"ema_{name.replace('.', '_')}"
            self.param_ema_buffer[name] = buffer_name
            model.register_buffer(buffer_name, value.data.clone())
        self.model_buffers = dict(model.named_buffers(recurse=True))
        # The pairs the fused update walks (built once, not per iteration).
        self._params = [value.detach() for value in self.model_parameters.values()]
        self._ema_buffers = [self.model_buffers[self.param_ema_buffer[name]]
                             for name in self.model_parameters]
        if self.checkpoint is not None:
            runner.resume(self.checkpoint)

    def after_train_iter(self, runner):
        """Update ema parameter every self.interval iterations."""
        curr_step = runner.iter
        # A smaller momentum in the first steps, while the weights move most.
        momentum = min(self.momentum, (1 + curr_step) / (self.warm_up + curr_step))
        if curr_step % self.interval != 0:
            return
        ema_update_(self._ema_buffers, self._params, momentum)

    def after_train_epoch(self, runner):
        """Load the averages into the model before the EvalHook."""
        self._swap_ema_parameters()

    def before_train_epoch(self, runner):
        """Take the model's own parameters back after the last epoch's EvalHook."""
        self._swap_ema_parameters()

    @torch.no_grad()
    def _swap_ema_parameters(self):
        """Swap the parameter of model with parameter in ema_buffer."""
        for name, value in self.model_parameters.items():
            temp = value.data.clone()
            ema_buffer = self.model_buffers[self.param_ema_buffer[name]]
            value.data.copy_(ema_buffer.data)
            ema_buffer.data.copy_(temp)
