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
from contextlib import nullcontext
from typing import Dict, List, Optional

import torch
from torch.optim import Optimizer

from ..registry import OPTIM_WRAPPERS

# clip_grad's ``type`` -> the torch function and the name its result is logged under.
_CLIPPERS = {
    'norm': (torch.nn.utils.clip_grad_norm_, 'grad_norm'),
    'value': (torch.nn.utils.clip_grad_value_, 'grad_value'),
}


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

    def __init__(self, optimizer: Optimizer,
                 accumulative_counts: int = 1, clip_grad: Optional[dict] = None):
        if not isinstance(optimizer, Optimizer):
            raise TypeError('optimizer must be a `torch.optim.Optimizer` instance, but got '
                            f'{type(optimizer)}; build it first, or use build_optim_wrapper')
        if not isinstance(accumulative_counts, int) or accumulative_counts < 1:
            raise ValueError('accumulative_counts must be an integer >= 1, but got '
                             f'{accumulative_counts!r}')
        self.optimizer = optimizer
        self._accumulative_counts = accumulative_counts
        self.clip_grad_kwargs = None if clip_grad is None else self._parse_clip_grad(clip_grad)

        # The accumulation counters. ``_inner_count``: backward passes so far. ``_max_counts``:
        # how many the run has (-1 until the train loop calls initialize_count_status).
        # ``_remainder_counts``: the size of the last, short group.
        self._inner_count = 0
        self._max_counts = -1
        self._remainder_counts = -1

        # With several parameter groups (say, a smaller lr for the backbone) MMEngine adds one
        # pretend group holding the optimizer's defaults: schedulers move it like the others,
        # and the log shows the "base" lr the config asked for.
        self.base_param_settings = None
        if len(optimizer.param_groups) >= 2:
            self.base_param_settings = dict(optimizer.defaults, params=torch.tensor([0.0]))

    def _parse_clip_grad(self, clip_grad: dict) -> dict:
        """Choose ``clip_func`` and ``grad_name``; return the arguments for ``clip_func``."""
        if not isinstance(clip_grad, dict) or not clip_grad:
            raise TypeError('clip_grad must be None or a non-empty dict of the arguments of '
                            'torch.nn.utils.clip_grad_norm_ (or clip_grad_value_ with '
                            f"type='value'), but got {clip_grad!r}")
        kwargs = {key: value for key, value in clip_grad.items() if key != 'type'}
        clip_type = clip_grad.get('type', 'norm')
        if clip_type not in _CLIPPERS:
            raise ValueError(f'type of clip_grad should be "norm" or "value" but got {clip_type!r}')
        if not kwargs:
            raise ValueError('clip_grad needs arguments besides `type` (e.g. max_norm=1.0 or '
                             f'clip_value=0.5), but got {clip_grad!r}')
        self.clip_func, self.grad_name = _CLIPPERS[clip_type]
        return kwargs

    # --- one training step: scale_loss -> backward -> (step -> zero_grad) ---

    def update_params(self, loss: torch.Tensor, step_kwargs: Optional[dict] = None,
                      zero_kwargs: Optional[dict] = None) -> None:
        """Backward ``loss``; when this completes an accumulation group, step and zero."""
        self.backward(self.scale_loss(loss))
        if not self.should_update():
            return
        self.step(**(step_kwargs or {}))
        self.zero_grad(**(zero_kwargs or {}))

    def backward(self, loss: torch.Tensor, **kwargs) -> None:
        loss.backward(**kwargs)
        self._inner_count += 1  # counted here, so should_update sees this backward

    def step(self, **kwargs) -> None:
        if self.clip_grad_kwargs:
            self._clip_grad()
        self.optimizer.step(**kwargs)

    def zero_grad(self, **kwargs) -> None:
        self.optimizer.zero_grad(**kwargs)

    def _clip_grad(self) -> None:
        with_grad = [param for group in self.optimizer.param_groups for param in group['params']
                     if param.requires_grad and param.grad is not None]
        if not with_grad:
            return
        measured = self.clip_func(with_grad, **self.clip_grad_kwargs)
        if measured is None:  # clip_grad_value_ measures nothing
            return
        # Imported here: the optim package does not otherwise depend on logging.
        from ..logging.message_hub import MessageHub

        # The tensor itself (MMEngine logs float(norm), which waits for the device): the
        # message hub reads it when a log line asks, giving the same float.
        MessageHub.get_current_instance().update_scalar(f'train/{self.grad_name}', measured)

    # --- accumulation bookkeeping ---

    def initialize_count_status(self, model: torch.nn.Module,
                                init_counts: int, max_counts: int) -> None:
        """Where training starts (``init_counts``: a resumed run's iteration) and how long it
        is, so that the last, short group is averaged over its own size."""
        self._inner_count = init_counts
        self._max_counts = max_counts
        self._remainder_counts = max_counts % self._accumulative_counts

    def _ends_group(self, count: int) -> bool:
        """Whether the ``count``-th backward completes a group (or is the run's last)."""
        return count % self._accumulative_counts == 0 or count == self._max_counts

    def should_update(self) -> bool:
        """True right after the backward that completes a group: time to step."""
        return self._ends_group(self._inner_count)

    def should_sync(self) -> bool:
        """True when the *next* backward completes a group: DDP must all-reduce in it."""
        return self._ends_group(self._inner_count + 1)

    def scale_loss(self, loss: torch.Tensor) -> torch.Tensor:
        """``loss`` divided by the size of the group this iteration belongs to, so that the
        accumulated gradient is the group's mean."""
        size = self._accumulative_counts
        if size == 1:  # no accumulation: dividing by 1 would only add a node to the graph
            return loss
        last_full = self._max_counts - self._remainder_counts
        if self._max_counts != -1 and self._inner_count >= last_full:
            size = self._remainder_counts
            if size <= 0:
                raise ValueError(
                    f'loss_factor should be larger than zero, but got {size}: '
                    'initialize_count_status was called with init_counts '
                    f'{self._inner_count} at or beyond max_counts {self._max_counts}')
        return loss if size == 1 else loss / size

    def optim_context(self, model: torch.nn.Module):
        """Run the forward pass inside this. Within a group a DDP model skips its gradient
        all-reduce (``no_sync``): only the backward that completes the group syncs.

        It returns the context to enter (nothing to do, or ``model.no_sync()``) rather than being
        a generator-based one: entered at every iteration, that costs half as much."""
        if self.should_sync() or not hasattr(model, 'no_sync'):
            return nullcontext()
        return model.no_sync()

    # --- what schedulers, hooks and checkpoints read ---

    @property
    def param_groups(self) -> List[dict]:
        groups = self.optimizer.param_groups
        return groups if self.base_param_settings is None else groups + [self.base_param_settings]

    @property
    def defaults(self) -> dict:
        return self.optimizer.defaults

    @property
    def inner_count(self) -> int:
        return self._inner_count

    def get_lr(self) -> Dict[str, List[float]]:
        """``{'lr': [one per group]}``; with several groups ``'base_lr'`` comes first."""
        lrs = {'lr': [group['lr'] for group in self.optimizer.param_groups]}
        if self.base_param_settings is None:
            return lrs
        return {'base_lr': [self.base_param_settings['lr']], **lrs}

    def get_momentum(self) -> Dict[str, List[float]]:
        """``{'momentum': [...]}``: SGD's ``momentum``, Adam's first beta, else 0."""

        def momentum_of(group):
            if 'momentum' in group:
                return group['momentum']
            return group['betas'][0] if 'betas' in group else 0

        return {'momentum': [momentum_of(group) for group in self.optimizer.param_groups]}

    def state_dict(self) -> dict:
        """The optimizer's state dict, plus ``base_param_settings`` when there is one."""
        state = self.optimizer.state_dict()
        if self.base_param_settings is not None:
            state['base_param_settings'] = self.base_param_settings
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state = dict(state_dict)  # a copy: the caller's checkpoint keeps its entries
        saved_base = state.pop('base_param_settings', None)
        if saved_base is not None:
            self.base_param_settings = saved_base
        self.optimizer.load_state_dict(state)

    def __repr__(self) -> str:
        return (f'Type: {type(self).__name__}\n'
                f'_accumulative_counts: {self._accumulative_counts}\n'
                f'optimizer: \n{self.optimizer!r}\n')
