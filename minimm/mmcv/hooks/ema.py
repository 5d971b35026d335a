"""EMAHook, MMCV 1.x's: an exponential moving average kept as buffers *on the model itself*.

Parameter ``a.b`` gets a persistent buffer ``ema_a_b``, so the averages are in every checkpoint.
Every ``interval`` iterations ``ema = (1 - m)·ema + m·param`` with ``m = min(momentum ** interval,
(1 + iter) / (warm_up + iter))``; parameters and averages swap after each train epoch (so val,
EvalHook and CheckpointHook see the EMA weights) and back before the next. Compare with
``minimm/hooks/ema_hook.py`` (MMEngine: a separate averaged model). The update is minimm's fused
``ops.ema_update_``: ``ema + m·(param - ema)``, MMCV's formula up to rounding.
"""
import torch

from minimm.ops import ema_update_
from minimm.runner.checkpoint import unwrap_model

from .hook import HOOKS, Hook


@HOOKS.register_module()
class EMAHook(Hook):
    """``resume_from``: a checkpoint to resume from once the EMA buffers exist."""

    def __init__(self, momentum: float = 0.0002, interval: int = 1, warm_up: int = 100,
                 resume_from=None):
        assert isinstance(interval, int) and interval > 0
        assert 0 < momentum < 1
        self.momentum = momentum ** interval
        self.interval, self.warm_up, self.checkpoint = interval, warm_up, resume_from

    def before_run(self, runner) -> None:
        model = unwrap_model(runner.model)
        self.params, self.ema_buffers = [], []
        for name, param in model.named_parameters():
            buffer_name = f"ema_{name.replace('.', '_')}"
            model.register_buffer(buffer_name, param.data.clone())
            self.params.append(param.detach())
            self.ema_buffers.append(getattr(model, buffer_name))
        if self.checkpoint is not None:
            runner.resume(self.checkpoint)  # loads into the buffers above, in place

    def after_train_iter(self, runner) -> None:
        step = runner.iter
        momentum = min(self.momentum, (1 + step) / (self.warm_up + step))
        if step % self.interval != 0:
            return
        ema_update_(self.ema_buffers, self.params, momentum)

    @torch.no_grad()
    def after_train_epoch(self, runner) -> None:
        """Swap parameters and averages (and back again before the next train epoch)."""
        for param, ema in zip(self.params, self.ema_buffers):
            saved = param.clone()
            param.copy_(ema)
            ema.copy_(saved)

    before_train_epoch = after_train_epoch
