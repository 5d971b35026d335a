"""EMAHook, MMCV 1.x's: the moving average lives in buffers *on the model* (``a.b`` -> ``ema_a_b``),
so every checkpoint holds it. Every ``interval`` iterations ``ema += m·(param - ema)``, ``m =
min(momentum ** interval, (1 + iter) / (warm_up + iter))``, through minimm's fused
``ops.ema_update_`` (MMCV's formula up to rounding); parameters and averages swap around each train
epoch, so val, EvalHook and CheckpointHook see the averages. Compare ``minimm/hooks/ema_hook.py``
(MMEngine: a separate averaged model). Left out: nothing."""
import torch

from minimm.ops import ema_update_
from minimm.checkpoint import unwrap_model

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
