"""Strategies: how a FlexibleRunner spreads a model over the processes (MMEngine 0.10's
``DDPStrategy`` and ``FSDPStrategy``, in ``STRATEGIES``).

MMEngine 0.10 offers two ways to ask for sharded training. The Runner's
``model_wrapper_cfg=dict(type='MMFullyShardedDataParallel', ...)`` names the wrapper alone; a
``FlexibleRunner`` takes ``strategy=dict(type='FSDPStrategy', ...)``, an object that gathers
everything about the distribution: the wrapper (``model_wrapper``), what is done to the model
before wrapping (``sync_bn``, ``activation_checkpointing``), whether ``init_weights`` runs
(``skip_init_weights``) and how checkpoints hold the weights (``state_dict_cfg``).

Here a strategy is that gathering and nothing more: it says which wrapper to build and prepares
the model; the Runner builds, trains and saves as usual (minimm/runner/flexible_runner.py).

* ``state_dict_cfg`` (FSDPStrategy): ``'local'`` (each rank saves its shards, the default) or
  ``'full'`` (rank 0 saves whole tensors), or MMEngine's dict with ``state_dict_type``; it is
  checked here and kept as ``strategy.state_dict_cfg`` for the checkpoint code to read.
* ``activation_checkpointing=dict(check_fn=...)``: every submodule for which ``check_fn(module)``
  is True recomputes its activations in backward instead of keeping them (torch's composable
  ``checkpoint``, applied before sharding, which keeps the parameters' names). ``check_fn`` is a
  callable, a function name in ``FUNCTIONS`` (or a dotted path), or a dict with ``type`` and its
  arguments, which builds the check (MMEngine's ways).

Left out compared with MMEngine: the strategies' own building of the environment, logger and
optimizer (the Runner does those), ``DeepSpeedStrategy``, ``ColossalAIStrategy`` and
``SingleDeviceStrategy`` (a run of one process is not wrapped by either strategy).
"""
from typing import Optional, Union

from torch import nn

from ..model import convert_sync_batchnorm
from ..registry import FUNCTIONS, STRATEGIES

STATE_DICT_CFGS = ('local', 'full')
STATE_DICT_TYPES = ('LOCAL_STATE_DICT', 'SHARDED_STATE_DICT', 'FULL_STATE_DICT')


@STRATEGIES.register_module()
class DDPStrategy:
    """Data parallel: a whole model on every rank (``MMDistributedDataParallel``).

    Args:
        model_wrapper: the wrapper's config, merged over the default
            ``dict(type='MMDistributedDataParallel', broadcast_buffers=False,
            find_unused_parameters=False)``.
        sync_bn: turn BatchNorm layers into SyncBatchNorm (``'torch'``) on several processes.
    """
    default_wrapper = dict(type='MMDistributedDataParallel', broadcast_buffers=False,
                           find_unused_parameters=False)

    def __init__(self, *, model_wrapper: Optional[dict] = None, sync_bn: Optional[str] = None):
        if model_wrapper is not None and not isinstance(model_wrapper, dict):
            raise TypeError(f'{type(self).__name__}: model_wrapper={model_wrapper!r} must be a '
                            'dict such as dict(type=...) or None')
        self.model_wrapper = {**self.default_wrapper, **(model_wrapper or {})}
        self.sync_bn = sync_bn
        self.skip_init_weights = False

    def prepare(self, model: nn.Module, distributed: bool) -> nn.Module:
        """What is done to the model before it is wrapped."""
        if distributed and self.sync_bn is not None:
            model = convert_sync_batchnorm(model, self.sync_bn)
        return model


@STRATEGIES.register_module()
class FSDPStrategy(DDPStrategy):
    """Fully sharded data parallel: each rank holds its shards (``MMFullyShardedDataParallel``).

    Args:
        model_wrapper: merged over ``dict(type='MMFullyShardedDataParallel',
            use_orig_params=True)``.
        skip_init_weights: do not call the model's ``init_weights`` (its weights come from a
            checkpoint).
        state_dict_cfg: ``'local'``, ``'full'`` or a dict with ``state_dict_type`` (see the
            module docstring).
        activation_checkpointing: ``dict(check_fn=...)``, see the module docstring.
        sync_bn: as :class:`DDPStrategy`.
    """
    default_wrapper = dict(type='MMFullyShardedDataParallel', use_orig_params=True)

    def __init__(self, *, model_wrapper: Optional[dict] = None, skip_init_weights: bool = False,
                 state_dict_cfg: Union[str, dict] = 'local',
                 activation_checkpointing: Optional[dict] = None,
                 sync_bn: Optional[str] = None):
        super().__init__(model_wrapper=model_wrapper, sync_bn=sync_bn)
        self.skip_init_weights = bool(skip_init_weights)
        self.state_dict_cfg = _check_state_dict_cfg(state_dict_cfg)
        self.check_fn = _check_fn(activation_checkpointing)

    def prepare(self, model: nn.Module, distributed: bool) -> nn.Module:
        model = super().prepare(model, distributed)
        if self.check_fn is not None:
            from torch.distributed._composable import checkpoint
            for module in [m for m in model.modules() if self.check_fn(m)]:
                checkpoint(module)
        return model


def _check_state_dict_cfg(state_dict_cfg):
    if isinstance(state_dict_cfg, str) and state_dict_cfg in STATE_DICT_CFGS:
        return state_dict_cfg
    if isinstance(state_dict_cfg, dict) and \
            state_dict_cfg.get('state_dict_type') in STATE_DICT_TYPES:
        return dict(state_dict_cfg)
    raise ValueError(f'FSDPStrategy: state_dict_cfg={state_dict_cfg!r} must be one of '
                     f'{list(STATE_DICT_CFGS)} or a dict with state_dict_type in '
                     f'{list(STATE_DICT_TYPES)}')


def _check_fn(activation_checkpointing: Optional[dict]):
    """The function that picks the modules to checkpoint, from ``dict(check_fn=...)``."""
    if activation_checkpointing is None:
        return None
    if not isinstance(activation_checkpointing, dict) or \
            set(activation_checkpointing) != {'check_fn'}:
        raise ValueError(f'FSDPStrategy: activation_checkpointing={activation_checkpointing!r} '
                         'must be dict(check_fn=...): a function name, a dict with `type`, or '
                         'a callable that says whether a module is checkpointed')
    check_fn = activation_checkpointing['check_fn']
    if isinstance(check_fn, str):
        check_fn = FUNCTIONS.get(check_fn)
    elif isinstance(check_fn, dict):
        check_fn = FUNCTIONS.build(check_fn)
    if not callable(check_fn):
        raise ValueError(f"FSDPStrategy: activation_checkpointing check_fn="
                         f"{activation_checkpointing['check_fn']!r} is not a registered "
                         'function, dotted path or callable')
    return check_fn
