"""OptimWrapper: one object that does backward, gradient accumulation, clipping and the step.

This file teaches why MMEngine puts a wrapper around ``torch.optim.Optimizer``: a model's
``train_step`` calls ``optim_wrapper.update_params(loss)`` and does not need to know whether
gradients are accumulated over several iterations, clipped, or (in ``AmpOptimWrapper``) scaled for
mixed precision. What MMCV 1.x spread over OptimizerHook, GradientCumulativeOptimizerHook and
Fp16OptimizerHook lives here.

Gradient accumulation (``accumulative_counts=n``): the loss of every iteration is divided by ``n``
and the parameters are stepped every ``n``-th backward, so the gradient is the mean over the group.
When the run's length (``max_counts``) is not a multiple of ``n``, the last, partial group divides
by its own size (the remainder) instead, so it too is a mean and is not lost.

Left out compared with MMEngine: the abstract ``BaseOptimWrapper``, ``OptimWrapperDict`` (several
optimizers), the warnings about BatchNorm and resumed counts that are not multiples of ``n``.
Kept: MMEngine's ``base_param_settings``, the extra "base" parameter group an optimizer with
several groups gets, so schedulers also track the configured learning rate
(``get_lr()['base_lr']``).
"""
from contextlib import contextmanager
from typing import Dict, List, Optional

import torch
from torch.optim import Optimizer

from ..registry import OPTIM_WRAPPERS


@OPTIM_WRAPPERS.register_module()
class OptimWrapper:
    """Wrap ``optimizer`` with accumulation and gradient clipping.

    Args:
        optimizer: a built ``torch.optim.Optimizer``.
        accumulative_counts: step the parameters every this many ``update_params`` calls.
        clip_grad: ``None``, or the keyword arguments of ``torch.nn.utils.clip_grad_norm_``
            (``dict(max_norm=1.0, norm_type=2)``), or ``dict(type='value', clip_value=..)`` for
            ``clip_grad_value_``. The norm is logged as ``train/grad_norm`` in the message hub.
    """

    def __init__(self, optimizer: Optimizer, accumulative_counts: int = 1,
                 clip_grad: Optional[dict] = None):
        if not isinstance(optimizer, Optimizer):
            raise TypeError('optimizer must be a `torch.optim.Optimizer` instance, but got '
                            f'{type(optimizer)}; build it first, or use build_optim_wrapper')
        if not isinstance(accumulative_counts, int) or accumulative_counts < 1:
            raise ValueError('accumulative_counts must be an integer >= 1, but got '
                             f'{accumulative_counts!r}')
        self.optimizer = optimizer
        self._accumulative_counts = accumulative_counts
        self.clip_grad_kwargs = self._parse_clip_grad(clip_grad)

        # Counters of the accumulation: `_inner_count` backward calls so far; `_max_counts` the
        # run's total (-1 until the train loop calls initialize_count_status); `_remainder_counts`
        # the size of the last, partial group.
        self._inner_count = 0
        self._max_counts = -1
        self._remainder_counts = -1

        # With several parameter groups (e.g. a different lr for the backbone), MMEngine appends
        # one fake group holding the optimizer's defaults, so schedulers update it too and the
        # log shows the "base" lr that the config asked for.
        self.base_param_settings = None
        if len(optimizer.param_groups) > 1:
            self.base_param_settings = {'params': torch.tensor([0.0], dtype=torch.float),
                                        **optimizer.defaults}

    def _parse_clip_grad(self, clip_grad: Optional[dict]) -> Optional[dict]:
        """Pick the clip function from ``clip_grad['type']`` and return the remaining kwargs."""
        if clip_grad is None:
            return None
        if not isinstance(clip_grad, dict) or not clip_grad:
            raise TypeError('clip_grad must be None or a non-empty dict of the arguments of '
                            'torch.nn.utils.clip_grad_norm_ (or clip_grad_value_ with '
                            f"type='value'), but got {clip_grad!r}")
        kwargs = dict(clip_grad)  # never mutate the caller's config
        clip_type = kwargs.pop('type', 'norm')
        if clip_type == 'norm':
            self.clip_func = torch.nn.utils.clip_grad_norm_
            self.grad_name = 'grad_norm'
        elif clip_type == 'value':
            self.clip_func = torch.nn.utils.clip_grad_value_
            self.grad_name = 'grad_value'
        else:
            raise ValueError(f'type of clip_grad should be "norm" or "value" but got {clip_type!r}')
        if not kwargs:
            raise ValueError('clip_grad needs arguments besides `type` (e.g. max_norm=1.0 or '
                             f'clip_value=0.5), but got {clip_grad!r}')
        return kwargs

    # The training step: update_params = scale_loss -> backward -> (step -> zero_grad).
    def update_params(self, loss: torch.Tensor, step_kwargs: Optional[Dict] = None,
                      zero_kwargs: Optional[Dict] = None) -> None:
        """Backward ``loss``; step and zero the gradients when an accumulation group is complete."""
        loss = self.scale_loss(loss)
        self.backward(loss)
        if self.should_update():
            self.step(**(step_kwargs or {}))
            self.zero_grad(**(zero_kwargs or {}))

    def backward(self, loss: torch.Tensor, **kwargs) -> None:
        loss.backward(**kwargs)
        self._inner_count += 1

    def step(self, **kwargs) -> None:
        """Clip the gradients if configured, then step the optimizer."""
        if self.clip_grad_kwargs:
            self._clip_grad()
        self.optimizer.step(**kwargs)

    def zero_grad(self, **kwargs) -> None:
        self.optimizer.zero_grad(**kwargs)

    def _clip_grad(self) -> None:
        params = [p for group in self.optimizer.param_groups for p in group['params']
                  if p.requires_grad and p.grad is not None]
        if not params:
            return
        grad = self.clip_func(params, **self.clip_grad_kwargs)
        if grad is not None:  # clip_grad_value_ returns None: there is nothing to log
            # Imported here so that the optim package does not depend on the logging package.
            from ..logging.message_hub import MessageHub
            MessageHub.get_current_instance().update_scalar(f'train/{self.grad_name}',
                                                            float(grad))

    # Accumulation bookkeeping.
    def initialize_count_status(self, model: torch.nn.Module, init_counts: int,
                                max_counts: int) -> None:
        """Tell the wrapper where training starts (``init_counts``, e.g. a resumed iteration)
        and how many iterations it has in total, so the last partial group is scaled right."""
        self._inner_count = init_counts
        self._max_counts = max_counts
        self._remainder_counts = self._max_counts % self._accumulative_counts

    def should_update(self) -> bool:
        """True after the backward that completes a group (or the last backward of the run)."""
        return (self._inner_count % self._accumulative_counts == 0
                or self._inner_count == self._max_counts)

    def should_sync(self) -> bool:
        """True when the *next* backward completes a group, so DDP must all-reduce gradients."""
        return ((self._inner_count + 1) % self._accumulative_counts == 0
                or (self._inner_count + 1) == self._max_counts)

    def scale_loss(self, loss: torch.Tensor) -> torch.Tensor:
        """Divide ``loss`` by the size of the accumulation group the current iteration is in."""
        if self._accumulative_counts == 1:
            loss_factor = 1
        elif self._max_counts == -1:  # run length unknown: every group is a full one
            loss_factor = self._accumulative_counts
        elif self._inner_count < self._max_counts - self._remainder_counts:
            loss_factor = self._accumulative_counts
        else:
            loss_factor = self._remainder_counts
            if loss_factor <= 0:
                raise ValueError(
                    f'loss_factor should be larger than zero, but got {loss_factor}: '
                    'initialize_count_status was called with init_counts '
                    f'{self._inner_count} at or beyond max_counts {self._max_counts}')
        # Dividing by 1 would only add a node to the autograd graph (MMEngine always divides).
        return loss if loss_factor == 1 else loss / loss_factor

    @contextmanager
    def optim_context(self, model: torch.nn.Module):
        """Run the forward pass inside this.

        Inside an accumulation group a DDP model skips its gradient all-reduce (``no_sync``);
        it syncs only on the backward that completes the group.
        """
        if not self.should_sync() and hasattr(model, 'no_sync'):
            with model.no_sync():
                yield
        else:
            yield

    # What schedulers and loggers read.
    @property
    def param_groups(self) -> List[dict]:
        if self.base_param_settings is not None:
            return self.optimizer.param_groups + [self.base_param_settings]
        return self.optimizer.param_groups

    @property
    def defaults(self) -> dict:
        return self.optimizer.defaults

    @property
    def inner_count(self) -> int:
        return self._inner_count

    def get_lr(self) -> Dict[str, List[float]]:
        """``{'lr': [lr of each group]}``, plus ``'base_lr'`` with several groups."""
        res = {}
        if self.base_param_settings is not None:
            res['base_lr'] = [self.base_param_settings['lr']]
        res['lr'] = [group['lr'] for group in self.optimizer.param_groups]
        return res

    def get_momentum(self) -> Dict[str, List[float]]:
        """``{'momentum': [...]}``: SGD's ``momentum``, Adam's ``betas[0]``, else 0."""
        momentum = []
        for group in self.optimizer.param_groups:
            if 'momentum' in group:
                momentum.append(group['momentum'])
            elif 'betas' in group:
                momentum.append(group['betas'][0])
            else:
                momentum.append(0)
        return dict(momentum=momentum)

    def state_dict(self) -> dict:
        """The optimizer's state dict (plus ``base_param_settings`` when there is one)."""
        state_dict = self.optimizer.state_dict()
        if self.base_param_settings is not None:
            state_dict['base_param_settings'] = self.base_param_settings
        return state_dict

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)  # popping must not change the caller's checkpoint
        base_param_settings = state_dict.pop('base_param_settings', None)
        if base_param_settings is not None:
            self.base_param_settings = base_param_settings
        self.optimizer.load_state_dict(state_dict)

    def __repr__(self) -> str:
        return (f'Type: {type(self).__name__}\n'
                f'_accumulative_counts: {self._accumulative_counts}\n'
                f'optimizer: \n{self.optimizer!r}\n')
