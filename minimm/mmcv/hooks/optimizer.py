"""The optimizer hooks: in MMCV 1.x the backward pass and the optimizer step are a hook.

``OptimizerHook``: ``zero_grad``, ``backward``, optional clipping (logging ``grad_norm``), ``step``;
the other three change one of those steps (Fp16's scaler state travels in ``runner.meta``, so it
survives resume). As MMCV 1.7 on torch >= 1.6. Left out: Fp16's ``coalesce``, ``bucket_size_mb``
and ``distributed`` are accepted but unused, as there (DDP averages the gradients).
"""
import logging

from torch.amp import GradScaler
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.utils import clip_grad_norm_

from ..fp16_utils import wrap_fp16_model
from .hook import HOOKS, Hook


@HOOKS.register_module()
class OptimizerHook(Hook):
    """``detect_anomalous_params`` logs every trainable parameter outside the loss's graph (the
    usual cause of DDP's "parameters that were not used" error); slow, debug only."""

    def __init__(self, grad_clip=None, detect_anomalous_params: bool = False):
        self.grad_clip = grad_clip
        self.detect_anomalous_params = detect_anomalous_params

    def clip_grads(self, params):
        params = [p for p in params if p.requires_grad and p.grad is not None]
        return clip_grad_norm_(params, **self.grad_clip) if params else None

    def after_train_iter(self, runner) -> None:
        runner.optimizer.zero_grad()
        if self.detect_anomalous_params:
            self.detect_anomalous_parameters(runner.outputs['loss'], runner)
        self._backward(runner, runner.outputs['loss'])
        self._step(runner)

    def _backward(self, runner, loss) -> None:
        loss.backward()

    def _clip_and_log(self, runner) -> None:
        if self.grad_clip is not None:
            grad_norm = self.clip_grads(runner.model.parameters())
            if grad_norm is not None:
                runner.log_buffer.update({'grad_norm': float(grad_norm)},
                                         runner.outputs['num_samples'])

    def _step(self, runner) -> None:
        self._clip_and_log(runner)
        runner.optimizer.step()

    def detect_anomalous_parameters(self, loss, runner) -> None:
        in_graph, seen, todo = set(), set(), [loss.grad_fn]
        while todo:  # walk the autograd graph; leaf nodes hold their parameter as ``variable``
            node = todo.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            if hasattr(node, 'variable'):
                in_graph.add(id(node.variable))
            todo.extend(parent for parent, _ in node.next_functions)
        for name, param in runner.model.named_parameters():
            if param.requires_grad and id(param) not in in_graph:
                runner.logger.log(level=logging.ERROR,
                                  msg=f'{name} with shape {param.size()} is not in the '
                                      'computational graph \n')


@HOOKS.register_module()
class GradientCumulativeOptimizerHook(OptimizerHook):
    """Accumulate gradients over ``cumulative_iters`` iterations, then step (as MMCV 1.7); a
    last incomplete group divides the loss by its own length. Groups cross epoch boundaries."""

    def __init__(self, cumulative_iters: int = 1, **kwargs):
        super().__init__(**kwargs)
        assert isinstance(cumulative_iters, int) and cumulative_iters > 0, \
            f'cumulative_iters only accepts positive int, but got {type(cumulative_iters)} instead.'
        self.cumulative_iters = cumulative_iters
        self.divisible_iters = self.remainder_iters = 0
        self.initialized = False

    def _init(self, runner) -> None:
        if runner.iter % self.cumulative_iters != 0:
            runner.logger.warning(
                'Resume iter number is not divisible by cumulative_iters in '
                'GradientCumulativeOptimizerHook, which means the gradient of some iters is lost '
                'and the result may be influenced slightly.')
        has_bn = any(isinstance(m, _BatchNorm) for m in runner.model.modules())
        if self.cumulative_iters > 1 and has_bn:
            runner.logger.warning('GradientCumulativeOptimizerHook may slightly decrease '
                                  'performance if the model has BatchNorm layers.')
        self.divisible_iters = runner.max_iters // self.cumulative_iters * self.cumulative_iters
        self.remainder_iters = runner.max_iters - self.divisible_iters
        self.initialized = True

    def _loss_factor(self, runner) -> int:
        if runner.iter < runner.max_iters - self.remainder_iters:
            return self.cumulative_iters
        runner.logger.warning(
            f'Loss will be divided by {self.remainder_iters} in the last {self.remainder_iters} '
            f'iterations because they are not enough for {self.cumulative_iters} cumulative_iters.')
        return self.remainder_iters

    def after_train_iter(self, runner) -> None:
        if not self.initialized:
            self._init(runner)
        self._backward(runner, runner.outputs['loss'] / self._loss_factor(runner))
        if self.every_n_iters(runner, self.cumulative_iters) or self.is_last_iter(runner):
            self._step(runner)
            runner.model.zero_grad()
            runner.optimizer.zero_grad()


@HOOKS.register_module()
class Fp16OptimizerHook(OptimizerHook):
    """Loss scaling with ``torch.amp.GradScaler``, as MMCV 1.7: ``loss_scale`` is ``'dynamic'``,
    a fixed float or a dict of GradScaler arguments. Without CUDA the scaler disables itself."""

    def __init__(self, grad_clip=None, coalesce: bool = True, bucket_size_mb: int = -1,
                 loss_scale=512., distributed: bool = True):
        self.grad_clip, self.coalesce = grad_clip, coalesce
        self.bucket_size_mb, self.distributed = bucket_size_mb, distributed
        self._scale_update_param = None
        if loss_scale == 'dynamic':
            self.loss_scaler = GradScaler('cuda')
        elif isinstance(loss_scale, float):
            self._scale_update_param = loss_scale
            self.loss_scaler = GradScaler('cuda', init_scale=loss_scale)
        elif isinstance(loss_scale, dict):
            self.loss_scaler = GradScaler('cuda', **loss_scale)
        else:
            raise ValueError('loss_scale must be of type float, dict, or "dynamic", got '
                             f'{loss_scale}')

    def before_run(self, runner) -> None:
        wrap_fp16_model(runner.model)
        if 'fp16' in runner.meta and 'loss_scaler' in runner.meta['fp16']:
            self.loss_scaler.load_state_dict(runner.meta['fp16']['loss_scaler'])

    def after_train_iter(self, runner) -> None:
        runner.model.zero_grad()
        runner.optimizer.zero_grad()
        self._backward(runner, runner.outputs['loss'])
        self._step(runner)

    def _backward(self, runner, loss) -> None:
        self.loss_scaler.scale(loss).backward()

    def _step(self, runner) -> None:
        self.loss_scaler.unscale_(runner.optimizer)
        self._clip_and_log(runner)
        self.loss_scaler.step(runner.optimizer)
        self.loss_scaler.update(self._scale_update_param)
        runner.meta.setdefault('fp16', {})['loss_scaler'] = self.loss_scaler.state_dict()


@HOOKS.register_module()
class GradientCumulativeFp16OptimizerHook(GradientCumulativeOptimizerHook, Fp16OptimizerHook):
    """Accumulation with loss scaling: the loop is GradientCumulativeOptimizerHook's, its backward
    and step resolve to Fp16OptimizerHook's through the method resolution order."""
