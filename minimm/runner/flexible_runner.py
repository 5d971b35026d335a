"""FlexibleRunner: the Runner with a *strategy* that says how the model is spread over the
processes (MMEngine 0.10's ``FlexibleRunner``, ``runner_type='FlexibleRunner'``).

MMEngine's FlexibleRunner hands the whole distributed setup to a strategy object
(``strategy=dict(type='FSDPStrategy', model_wrapper=..., state_dict_cfg=...,
activation_checkpointing=...)`` or ``dict(type='DDPStrategy')``, from ``STRATEGIES``). Here it is
the Runner with two steps changed: ``wrap_model`` lets the strategy prepare the model and name the
wrapper (minimm/runner/strategies.py), and ``init_weights`` is skipped when the strategy says
``skip_init_weights``. Everything else (building, the loops, hooks, checkpoints) is the Runner's;
the strategy stays reachable as ``runner.strategy`` (the checkpoint code reads
``runner.strategy.state_dict_cfg``).

On one process that is not distributed neither strategy wraps the model, as the Runner does for
DDP: the same config trains there unsharded.

Different from MMEngine: the arguments are the Runner's (so ``launcher`` is given as to the
Runner, and the strategy does not build the environment or the optimizer); a config's
``strategy`` key is read when the argument is not given (``from_cfg``); giving
``model_wrapper_cfg`` too is refused (the strategy's ``model_wrapper`` says it). Left out:
``compile`` (as for the Runner).
"""
from typing import Optional, Union

from torch import nn

from ..registry import RUNNERS, STRATEGIES
from .runner import Runner
from .strategies import DDPStrategy


@RUNNERS.register_module()
class FlexibleRunner(Runner):
    """A Runner whose model is prepared and wrapped by ``strategy``.

    Args:
        model: as for the Runner.
        strategy: a strategy object or its config (``type`` from ``STRATEGIES``); default
            ``DDPStrategy``.
        **kwargs: the Runner's arguments (``work_dir`` defaults to ``'work_dirs'``).
    """

    def __init__(self, model: Union[nn.Module, dict], *, strategy=None, **kwargs):
        cfg = kwargs.get('cfg') or {}
        if strategy is None:  # from_cfg passes the whole config, strategy included
            strategy = cfg.get('strategy')
        self.strategy = _build_strategy(strategy)
        if cfg.get('model_wrapper_cfg') is not None:
            raise ValueError('FlexibleRunner: give the wrapper as strategy=dict(type=..., '
                             'model_wrapper=...), not model_wrapper_cfg='
                             f"{cfg.get('model_wrapper_cfg')!r}")
        kwargs.setdefault('work_dir', 'work_dirs')
        super().__init__(model, **kwargs)

    def wrap_model(self, model_wrapper_cfg: Optional[dict], model: nn.Module) -> nn.Module:
        """The strategy prepares the model (SyncBatchNorm, activation checkpointing) and names
        the wrapper; the Runner builds it (or, on one process, leaves the model unwrapped)."""
        model = self.strategy.prepare(model, self.distributed)
        return super().wrap_model(self.strategy.model_wrapper, model)

    def _init_model_weights(self) -> None:
        if not self.strategy.skip_init_weights:
            super()._init_model_weights()


def _build_strategy(strategy):
    if strategy is None:
        return DDPStrategy()
    if isinstance(strategy, dict):
        return STRATEGIES.build(strategy)
    if not hasattr(strategy, 'prepare') or not hasattr(strategy, 'model_wrapper'):
        raise TypeError(f'FlexibleRunner: strategy={strategy!r} must be a strategy or its '
                        "config, e.g. dict(type='FSDPStrategy')")
    return strategy
