"""The optimizer hooks: in MMCV 1.x the backward pass and the optimizer step are a hook.

``OptimizerHook``: ``zero_grad``, ``backward``, optional clipping (logging ``grad_norm``), ``step``.
``GradientCumulativeOptimizerHook`` steps every ``cumulative_iters`` iterations; the two Fp16 hooks
scale the loss with ``torch.cuda.amp``'s ``GradScaler`` and keep its state in
``runner.meta['fp16']``, so it survives resume. As MMCV 1.7 on torch >= 1.6. Left out: the
fp16 path of torch < 1.6 (an fp32 master copy of the weights with ``LossScaler``; the class is in
``fp16_utils``); ``coalesce``, ``bucket_size_mb`` and ``distributed`` are accepted and unused, as
in MMCV on torch >= 1.6 (DDP averages the gradients).
"""
import logging
from typing import Optional, Union

import torch.nn as nn
from torch import Tensor
from torch.amp import GradScaler
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.utils import clip_grad

from ..fp16_utils import wrap_fp16_model
from .hook import HOOKS, Hook


@HOOKS.register_module()
class OptimizerHook(Hook):
    """Backward and step after each train iteration.

    Args:
        grad_clip: the arguments of ``clip_grad_norm_`` (``max_norm``, ``norm_type``), or None.
        detect_anomalous_params: log every trainable parameter outside the loss's graph (the
            usual cause of DDP's "parameters that were not used" error); slow, debug only.
    """

    def __init__(self, grad_clip: Optional[dict] = None, detect_anomalous_params: bool = False):
        self.grad_clip = grad_clip
        self.detect_anomalous_params = detect_anomalous_params

    def clip_grads(self, params):
        params = list(filter(lambda p: p.requires_grad and p.grad is not None, params))
        if len(params) > 0:
            return clip_grad.clip_grad_norm_(params, **self.grad_clip)

    def after_train_iter(self, runner):
        runner.optimizer.zero_grad()
        if self.detect_anomalous_params:
            self.detect_anomalous_parameters(runner.outputs['loss'], runner)
        runner.outputs['loss'].backward()

        if self.grad_clip is not None:
            grad_norm = self.clip_grads(runner.model.parameters())
            if grad_norm is not None:
                runner.log_buffer.update({'grad_norm': float(grad_norm)},
                                         runner.outputs['num_samples'])
        runner.optimizer.step()

    def detect_anomalous_parameters(self, loss: Tensor, runner) -> None:
        logger = runner.logger
        parameters_in_graph = set()
        visited = set()

        def traverse(grad_fn):
            # autograd's leaf nodes (AccumulateGrad) hold their parameter as ``variable``
            if grad_fn is None:
                return
            if grad_fn not in visited:
                visited.add(grad_fn)
                if hasattr(grad_fn, 'variable'):
                    parameters_in_graph.add(grad_fn.variable)
                parents = grad_fn.next_functions
                if parents is not None:
                    for parent in parents:
                        grad_fn = parent[0]
                        traverse(grad_fn)

        traverse(loss.grad_fn)
        for n, p in runner.model.named_parameters():
            if p not in parameters_in_graph and p.requires_grad:
                logger.log(level=logging.ERROR,
                           msg=f'{n} with shape {p.size()} is not in the computational graph \n')


@HOOKS.register_module()
class GradientCumulativeOptimizerHook(OptimizerHook):
    """Accumulate the gradients of ``cumulative_iters`` iterations, then step: almost a batch
    ``cumulative_iters`` times bigger. Each loss is divided by ``cumulative_iters``; the last
    iterations, too few for a whole group, by their own number. Groups cross epoch ends.
    """

    def __init__(self, cumulative_iters: int = 1, **kwargs):
        super().__init__(**kwargs)

        assert isinstance(cumulative_iters, int) and cumulative_iters > 0, \
            f'cumulative_iters only accepts positive int, but got {type(cumulative_iters)} ' \
            'instead.'

        self.cumulative_iters = cumulative_iters
        self.divisible_iters = 0
        self.remainder_iters = 0
        self.initialized = False

    def has_batch_norm(self, module: nn.Module) -> bool:
        if isinstance(module, _BatchNorm):
            return True
        for m in module.children():
            if self.has_batch_norm(m):
                return True
        return False

    def _init(self, runner):
        if runner.iter % self.cumulative_iters != 0:
            runner.logger.warning(
                'Resume iter number is not divisible by cumulative_iters in '
                'GradientCumulativeOptimizerHook, which means the gradient of some iters is lost '
                'and the result may be influenced slightly.')

        if self.has_batch_norm(runner.model) and self.cumulative_iters > 1:
            runner.logger.warning('GradientCumulativeOptimizerHook may slightly decrease '
                                  'performance if the model has BatchNorm layers.')

        self.divisible_iters = runner.max_iters // self.cumulative_iters * self.cumulative_iters
        self.remainder_iters = runner.max_iters - self.divisible_iters

        self.initialized = True

    def _get_loss_factor(self, runner):
        """What this iteration's loss is divided by."""
        if runner.iter < runner.max_iters - self.remainder_iters:
            loss_factor = self.cumulative_iters
        else:
            loss_factor = self.remainder_iters
            runner.logger.warning(
                f'Loss will be divided by {loss_factor} in the last {self.remainder_iters} '
                f'iterations because they are not enough for {self.cumulative_iters} '
                'cumulative_iters.')
            assert loss_factor > 0

        return loss_factor

    def after_train_iter(self, runner):
        if not self.initialized:
            self._init(runner)

        loss = runner.outputs['loss'] / self._get_loss_factor(runner)
        loss.backward()

        if (self.every_n_iters(runner, self.cumulative_iters) or self.is_last_iter(runner)):

            if self.grad_clip is not None:
                grad_norm = self.clip_grads(runner.model.parameters())
                if grad_norm is not None:
                    runner.log_buffer.update({'grad_norm': float(grad_norm)},
                                             runner.outputs['num_samples'])
            runner.optimizer.step()
            runner.optimizer.zero_grad()


@HOOKS.register_module()
class Fp16OptimizerHook(OptimizerHook):
    """Mixed-precision steps with PyTorch's ``GradScaler``: scale the loss, backward, unscale,
    clip, step, update the scale, keep the scaler's state in ``runner.meta['fp16']``.

    ``loss_scale``: ``'dynamic'``, a float (a static scale: the scaler is reset to it after each
    step) or a dict of ``GradScaler`` arguments. ``GradScaler`` is the CUDA one
    (``torch.amp.GradScaler('cuda')``, the current spelling of ``torch.cuda.amp.GradScaler``):
    without CUDA it disables itself and the steps are plain ones.
    """

    def __init__(self, grad_clip: Optional[dict] = None, coalesce: bool = True,
                 bucket_size_mb: int = -1, loss_scale: Union[float, str, dict] = 512.,
                 distributed: bool = True):
        self.grad_clip = grad_clip
        self.coalesce = coalesce
        self.bucket_size_mb = bucket_size_mb
        self.distributed = distributed
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
        """Switch the model's ``fp16_enabled`` flags on; resume the scaler's state."""
        wrap_fp16_model(runner.model)
        if 'fp16' in runner.meta and 'loss_scaler' in runner.meta['fp16']:
            scaler_state_dict = runner.meta['fp16']['loss_scaler']
            self.loss_scaler.load_state_dict(scaler_state_dict)

    def copy_grads_to_fp32(self, fp16_net: nn.Module, fp32_weights: Tensor) -> None:
        """Copy the gradients of the fp16 model to the fp32 copy of the weights."""
        for fp32_param, fp16_param in zip(fp32_weights, fp16_net.parameters()):
            if fp16_param.grad is not None:
                if fp32_param.grad is None:
                    fp32_param.grad = fp32_param.data.new(fp32_param.size())
                fp32_param.grad.copy_(fp16_param.grad)

    def copy_params_to_fp16(self, fp16_net: nn.Module, fp32_weights: Tensor) -> None:
        """Copy the updated fp32 weights back into the fp16 model."""
        for fp16_param, fp32_param in zip(fp16_net.parameters(), fp32_weights):
            fp16_param.data.copy_(fp32_param.data)

    def after_train_iter(self, runner) -> None:
        # clear the gradients of the last iteration
        runner.model.zero_grad()
        runner.optimizer.zero_grad()

        self.loss_scaler.scale(runner.outputs['loss']).backward()
        self.loss_scaler.unscale_(runner.optimizer)
        if self.grad_clip is not None:
            grad_norm = self.clip_grads(runner.model.parameters())
            if grad_norm is not None:
                runner.log_buffer.update({'grad_norm': float(grad_norm)},
                                         runner.outputs['num_samples'])
        # step (skipped when the gradients overflowed) and update the scale
        self.loss_scaler.step(runner.optimizer)
        self.loss_scaler.update(self._scale_update_param)

        # the scaler's state, for resuming
        runner.meta.setdefault('fp16', {})['loss_scaler'] = self.loss_scaler.state_dict()


@HOOKS.register_module()
class GradientCumulativeFp16OptimizerHook(GradientCumulativeOptimizerHook, Fp16OptimizerHook):
    """Gradient accumulation with PyTorch's loss scaling: the cumulative hook's
    ``__init__(cumulative_iters, **kwargs)`` passes the rest on to ``Fp16OptimizerHook``'s."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)

    def after_train_iter(self, runner) -> None:
        if not self.initialized:
            self._init(runner)

        loss = runner.outputs['loss'] / self._get_loss_factor(runner)
        self.loss_scaler.scale(loss).backward()

        if (self.every_n_iters(runner, self.cumulative_iters) or self.is_last_iter(runner)):

            self.loss_scaler.unscale_(runner.optimizer)

            if self.grad_clip is not None:
                grad_norm = self.clip_grads(runner.model.parameters())
                if grad_norm is not None:
                    runner.log_buffer.update({'grad_norm': float(grad_norm)},
                                             runner.outputs['num_samples'])

            self.loss_scaler.step(runner.optimizer)
            self.loss_scaler.update(self._scale_update_param)

            runner.meta.setdefault('fp16', {})['loss_scaler'] = self.loss_scaler.state_dict()

            runner.model.zero_grad()
            runner.optimizer.zero_grad()
