"""EMAHook, MMCV 1.7's: an exponential moving average of the weights, kept *inside the model* as
buffers (parameter ``a.b`` -> buffer ``ema_a_b``), so every checkpoint carries it.

Every ``interval`` iterations: ``ema = (1 - m) * ema + m * param`` with
``m = min(momentum ** interval, (1 + iter) / (warm_up + iter))``. Around each train epoch the
parameters and their averages swap places, so validation, EvalHook and CheckpointHook after this
hook see the averaged weights; the next epoch swaps them back. Compare the MMEngine side's
``minimm/hooks/ema_hook.py``, which keeps a separate averaged copy of the model.

Resuming: the ``ema_*`` buffers exist only from ``before_run`` on, so a ``runner.resume`` made
before ``run`` (MMDetection 2.x's ``train_detector``, a config's ``resume_from``) finds no buffer
to load them into and drops them; in an epoch-based run the parameters it loads are the averages
(saved while swapped in), and training goes on from them. MMCV's way out is this hook's own
``resume_from``: it resumes again once the buffers exist. ``minimm train`` sets it for you;
elsewhere this hook warns, naming it.

Different from MMCV: one call of minimm's fused ``ops.ema_update_`` updates every average (MMCV's
formula, up to rounding), over tensor lists made once in ``before_run``; ``resume_from`` maps the
checkpoint to the CPU where there is no GPU (MMCV's ``IterBasedRunner.resume`` would fail).
"""
from typing import Optional

import torch

from minimm.ops import ema_update_

from ..parallel import is_module_wrapper
from .hook import HOOKS, Hook


@HOOKS.register_module()
class EMAHook(Hook):
    """``momentum`` is the weight of the new value; ``warm_up`` makes the first updates take
    more of it; ``resume_from`` resumes a checkpoint once the EMA buffers exist to load into."""

    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {
        'before_run': 'model -> ema',
        'after_train_iter': 'model.params -> ema',  # after OptimizerHook's step
        'after_train_epoch before_train_epoch':
            'model.params ema.params -> model.params ema.params',  # the swap
    }

    def __init__(self, momentum: float = 0.0002, interval: int = 1,
                 warm_up: int = 100, resume_from: Optional[str] = None):
        assert isinstance(interval, int) and interval > 0
        if not 0 < momentum < 1:  # MMCV asserts it, with no message
            raise ValueError(f'momentum={momentum!r} must be between 0 and 1 (the weight '
                             'of the new value at each update, e.g. 0.0002)')
        self.interval = interval
        # As MMCV: one update every ``interval`` iterations stands for that many updates.
        self.momentum = momentum ** interval
        self.warm_up = warm_up
        self.checkpoint = resume_from

    def before_run(self, runner):
        model = runner.model.module if is_module_wrapper(runner.model) else runner.model
        self._warn_if_averages_lost(runner, model)
        self.model_parameters = dict(model.named_parameters())
        self.param_ema_buffer = {}
        for name, param in self.model_parameters.items():
            # A buffer's name may not contain dots.
            self.param_ema_buffer[name] = 'ema_' + name.replace('.', '_')
            model.register_buffer(self.param_ema_buffer[name], param.data.clone())
        self.model_buffers = dict(model.named_buffers())
        # The pairs the fused update walks, in the same order.
        self._params = [param.detach() for param in self.model_parameters.values()]
        self._ema_buffers = [self.model_buffers[buffer_name]
                             for buffer_name in self.param_ema_buffer.values()]
        if self.checkpoint is not None:
            on_gpu = torch.cuda.is_available()
            runner.resume(self.checkpoint, **({} if on_gpu else dict(map_location='cpu')))

    def _warn_if_averages_lost(self, runner, model):
        """A runner that has trained (``iter > 0``) on a model without this hook's buffers was
        resumed (or loaded) before they existed: the checkpoint's averages were not loaded."""
        first = next(iter(model.named_parameters()), None)
        if self.checkpoint is not None or runner.iter == 0 or first is None or \
                hasattr(model, 'ema_' + first[0].replace('.', '_')):
            return
        runner.logger.warning(
            f'EMAHook: the runner is at iter {runner.iter} but the model has no ema_* buffers '
            'yet: a checkpoint resumed before run() could not load them (it dropped them as '
            'unexpected keys), so the averages restart from the loaded weights, and an '
            'epoch-based run trains on from the averaged ones. To restore them, give the '
            'checkpoint to this hook too: EMAHook(resume_from=CKPT) (in a config, '
            "custom_hooks=[dict(type='EMAHook', resume_from=CKPT, ...)]), as in MMCV 1.7.2")

    def after_train_iter(self, runner):
        step = runner.iter
        if step % self.interval:
            return
        # Early on (warm_up) the average follows the weights more closely.
        ema_update_(self._ema_buffers, self._params,
                    min(self.momentum, (1 + step) / (self.warm_up + step)))

    def after_train_epoch(self, runner):
        self._swap_ema_parameters()  # the averages into the model, for val and checkpoints

    def before_train_epoch(self, runner):
        self._swap_ema_parameters()  # the trained weights back (a no-op before the first epoch)

    @torch.no_grad()
    def _swap_ema_parameters(self):
        for param, average in zip(self._params, self._ema_buffers):
            trained = param.clone()
            param.copy_(average)
            average.copy_(trained)
