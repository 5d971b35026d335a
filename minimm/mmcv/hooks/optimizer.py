"""MMCV 1.x's optimizer hooks: in ``mmcv.runner`` the backward pass and the optimizer step live in a
hook that runs after each train iteration, not in the training loop.

Four hooks, each a small change of the one before it. An iteration is three steps, written as
three small methods: ``_zero_grad``, ``_backward``, ``_step`` (clip, then step).

- ``OptimizerHook``: zero the gradients, backward, step.
- ``GradientCumulativeOptimizerHook``: backward every iteration, step (and zero) only every
  ``cumulative_iters``: a different ``after_train_iter``, the same three steps.
- ``Fp16OptimizerHook``: the same ``after_train_iter``, its three steps done through a
  ``GradScaler`` that scales the loss (mixed precision).
- ``GradientCumulativeFp16OptimizerHook``: the cumulative ``after_train_iter`` with the fp16
  steps; by the MRO it needs no code of its own.

The scaler's state is kept in ``runner.meta['fp16']``, so a resumed run goes on with the same scale.
Only MMCV's torch >= 1.6 path is here: ``coalesce``, ``bucket_size_mb`` and ``distributed`` are
accepted and unused (DDP already averages the gradients).
"""
import logging
from typing import Optional, Union

import torch.nn as nn
from torch import Tensor
from torch.amp import GradScaler
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.utils import clip_grad_norm_

from ..fp16_utils import wrap_fp16_model
from .hook import HOOKS, Hook


@HOOKS.register_module()
class OptimizerHook(Hook):
    """Backward and optimizer step after every train iteration.

    Args:
        grad_clip: keyword arguments of ``clip_grad_norm_`` (``max_norm``, ``norm_type``), or None.
        detect_anomalous_params: log every trainable parameter the loss does not depend on (what
            makes DDP complain about unused parameters). Slow: for debugging.
    """

    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {'after_train_iter': 'lr -> model.params optimizer'}  # the step is a hook here

    def __init__(self, grad_clip: Optional[dict] = None, detect_anomalous_params: bool = False):
        self.grad_clip = grad_clip
        self.detect_anomalous_params = detect_anomalous_params

    def clip_grads(self, params):
        # Frozen parameters, and parameters that got no gradient, have nothing to clip.
        with_grad = [p for p in params if p.requires_grad and p.grad is not None]
        if with_grad:
            return clip_grad_norm_(with_grad, **self.grad_clip)
        return None

    def _clip_and_log(self, runner) -> None:
        """Clip when ``grad_clip`` is set and log the norm measured before clipping."""
        if self.grad_clip is None:
            return
        norm = self.clip_grads(runner.model.parameters())
        if norm is not None:
            runner.log_buffer.update({'grad_norm': float(norm)}, runner.outputs['num_samples'])

    # The three steps of an iteration; the fp16 hook does each through its scaler.
    def _zero_grad(self, runner) -> None:
        runner.optimizer.zero_grad()

    def _backward(self, runner, loss: Tensor) -> None:
        loss.backward()

    def _step(self, runner) -> None:
        self._clip_and_log(runner)
        runner.optimizer.step()

    def after_train_iter(self, runner):
        loss = runner.outputs['loss']
        self._zero_grad(runner)
        if self.detect_anomalous_params:
            self.detect_anomalous_parameters(loss, runner)
        self._backward(runner, loss)
        self._step(runner)

    def detect_anomalous_parameters(self, loss: Tensor, runner) -> None:
        # Walk the autograd graph back from the loss, without recursion. Its leaves
        # (AccumulateGrad nodes) hold the parameter they write into as ``.variable``.
        reached, seen, todo = set(), set(), [loss.grad_fn]
        while todo:
            node = todo.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            if hasattr(node, 'variable'):
                reached.add(node.variable)
            todo.extend(parent for parent, _ in (node.next_functions or ()))
        for name, param in runner.model.named_parameters():
            if param.requires_grad and param not in reached:
                runner.logger.log(level=logging.ERROR, msg=f'{name} with shape {param.size()} '
                                  'is not in the computational graph \n')


@HOOKS.register_module()
class GradientCumulativeOptimizerHook(OptimizerHook):
    """Step once every ``cumulative_iters`` iterations with the gradients summed over all of them:
    nearly a batch that many times larger (BatchNorm still sees the small batches).

    Each loss is divided by ``cumulative_iters``, so the sum is a mean; the iterations at the end
    that are too few for a whole group divide by their own number instead. Groups count the
    runner's global ``iter``, so they run across epoch ends.
    """

    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {'before_run': '', 'after_train_iter': 'lr -> model.params optimizer'}

    def __init__(self, cumulative_iters: int = 1, **kwargs):
        super().__init__(**kwargs)
        assert isinstance(cumulative_iters, int) and cumulative_iters > 0, (
            f'cumulative_iters only accepts positive int, but got {type(cumulative_iters)} '
            'instead.')
        self.cumulative_iters = cumulative_iters
        # Set on the first iteration, once the runner knows max_iters.
        self.divisible_iters = 0
        self.remainder_iters = 0
        self.initialized = False

    def has_batch_norm(self, module: nn.Module) -> bool:
        return any(isinstance(m, _BatchNorm) for m in module.modules())

    def _init(self, runner):
        if runner.iter % self.cumulative_iters:
            runner.logger.warning(
                'Resume iter number is not divisible by cumulative_iters in '
                'GradientCumulativeOptimizerHook, which means the gradient of some iters is lost '
                'and the result may be influenced slightly.')
        if self.cumulative_iters > 1 and self.has_batch_norm(runner.model):
            runner.logger.warning('GradientCumulativeOptimizerHook may slightly decrease '
                                  'performance if the model has BatchNorm layers.')
        self.remainder_iters = runner.max_iters % self.cumulative_iters
        self.divisible_iters = runner.max_iters - self.remainder_iters
        self.initialized = True

    def _get_loss_factor(self, runner):
        """What this iteration's loss is divided by: the size of the group it belongs to."""
        if runner.iter < self.divisible_iters:
            return self.cumulative_iters
        short = self.remainder_iters
        runner.logger.warning(
            f'Loss will be divided by {short} in the last {short} iterations because they are '
            f'not enough for {self.cumulative_iters} cumulative_iters.')
        assert short > 0
        return short

    def _group_ends(self, runner) -> bool:
        return self.every_n_iters(runner, self.cumulative_iters) or self.is_last_iter(runner)

    def after_train_iter(self, runner):
        if not self.initialized:
            self._init(runner)
        # No zero_grad before the backward: the gradients of a group add up until its step.
        self._backward(runner, runner.outputs['loss'] / self._get_loss_factor(runner))
        if self._group_ends(runner):
            self._step(runner)
            self._zero_grad(runner)


@HOOKS.register_module()
class Fp16OptimizerHook(OptimizerHook):
    """Mixed-precision steps with PyTorch's ``GradScaler``.

    ``loss_scale`` is ``'dynamic'`` (the scaler adapts the scale), a float (a fixed scale: the
    scaler is set back to it after every step) or a dict of ``GradScaler`` arguments. The scaler is
    CUDA's: without a GPU it switches itself off and the steps are plain ones.
    """

    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {'before_run': 'meta -> model',  # fp16_enabled flags; the scaler's saved state
                'after_train_iter': 'lr -> model.params optimizer'}

    def __init__(self, grad_clip: Optional[dict] = None, coalesce: bool = True,
                 bucket_size_mb: int = -1,
                 loss_scale: Union[float, str, dict] = 512., distributed: bool = True):
        # As in MMCV, OptimizerHook.__init__ is not called: the attributes are set here.
        self.grad_clip = grad_clip
        self.detect_anomalous_params = False  # not offered with fp16
        self.coalesce = coalesce
        self.bucket_size_mb = bucket_size_mb
        self.distributed = distributed
        self._scale_update_param = None
        if isinstance(loss_scale, dict):
            scaler_args = loss_scale
        elif isinstance(loss_scale, float):
            self._scale_update_param = loss_scale
            scaler_args = {'init_scale': loss_scale}
        elif loss_scale == 'dynamic':
            scaler_args = {}
        else:
            raise ValueError('loss_scale must be of type float, dict, or "dynamic", got '
                             f'{loss_scale}')
        self.loss_scaler = GradScaler('cuda', **scaler_args)

    def before_run(self, runner) -> None:
        """Turn the model's ``fp16_enabled`` flags on and restore a saved scaler state.
        ``runner.meta`` must be a dict (None fails, as in MMCV)."""
        wrap_fp16_model(runner.model)
        saved = runner.meta['fp16'] if 'fp16' in runner.meta else {}
        if 'loss_scaler' in saved:
            self.loss_scaler.load_state_dict(saved['loss_scaler'])

    def copy_grads_to_fp32(self, fp16_net: nn.Module, fp32_weights: Tensor) -> None:
        """Give each fp32 master weight the gradient of its fp16 twin."""
        for master, half in zip(fp32_weights, fp16_net.parameters()):
            if half.grad is not None:
                # The first time, a converted copy that the master owns; then copied in place.
                if master.grad is None:
                    master.grad = half.grad.to(master.dtype, copy=True)
                else:
                    master.grad.copy_(half.grad)

    def copy_params_to_fp16(self, fp16_net: nn.Module, fp32_weights: Tensor) -> None:
        """Write the updated fp32 master weights back into the fp16 model."""
        for half, master in zip(fp16_net.parameters(), fp32_weights):
            half.data.copy_(master.data)

    # OptimizerHook.after_train_iter runs these three in its order.
    def _zero_grad(self, runner) -> None:
        runner.model.zero_grad()
        runner.optimizer.zero_grad()

    def _backward(self, runner, loss: Tensor) -> None:
        self.loss_scaler.scale(loss).backward()

    def _step(self, runner) -> None:
        """Unscale (so clipping sees the true gradients), clip, step (the scaler skips it when
        a gradient is inf/nan), adjust the scale, and keep the scaler's state for a resume."""
        scaler = self.loss_scaler
        scaler.unscale_(runner.optimizer)
        self._clip_and_log(runner)
        scaler.step(runner.optimizer)
        scaler.update(self._scale_update_param)
        runner.meta.setdefault('fp16', {})['loss_scaler'] = scaler.state_dict()


@HOOKS.register_module()
class GradientCumulativeFp16OptimizerHook(GradientCumulativeOptimizerHook, Fp16OptimizerHook):
    """Accumulation and loss scaling together, with no code of its own: by the MRO,
    ``__init__`` and ``after_train_iter`` are the cumulative hook's (``cumulative_iters`` is
    taken there, the other arguments reach ``Fp16OptimizerHook.__init__``), and the three steps
    they call are the fp16 hook's."""
