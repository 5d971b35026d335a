"""MMEngine's FSDP arguments in the words of torch's FSDP2.

MMEngine 0.10's ``MMFullyShardedDataParallel`` subclasses torch's first FSDP
(``FullyShardedDataParallel``, "FSDP1"), which flattens each wrapped unit's parameters into one
flat buffer and shards that. minimm builds on FSDP2 (``torch.distributed.fsdp.fully_shard``):
every parameter stays itself, as a DTensor holding this rank's rows (``Shard(0)``) on a
DeviceMesh. The config keys users write are FSDP1's, so each one is read here and either said
in FSDP2's words or refused in one line that names the key, the value and the FSDP2 way:

* ``sharding_strategy``: ``'FULL_SHARD'`` -> ``reshard_after_forward=True`` (free the gathered
  weights after forward, gather again for backward); ``'SHARD_GRAD_OP'`` -> ``False`` (keep them
  until backward); ``None`` -> FSDP2's default (True, except the root module). ``'NO_SHARD'`` is
  DDP and the hybrid strategies need a 2-D mesh: refused.
* ``mixed_precision``: ``dict(param_dtype=..., reduce_dtype=...)`` (dtypes or their names) ->
  ``MixedPrecisionPolicy``: the sharded parameters stay in their own dtype (fp32), the gathered
  ones used by forward and backward are ``param_dtype``, gradients are reduced in
  ``reduce_dtype``. As FSDP1, BatchNorm layers (``_module_classes_to_ignore``) keep their own
  dtype: each gets its own ``fully_shard`` without ``param_dtype`` (its running statistics are
  fp32, and BatchNorm takes a bf16 input with fp32 weights).
* ``cpu_offload``: ``True`` or ``dict(offload_params=True)`` -> ``CPUOffloadPolicy()``.
* ``auto_wrap_policy``: FSDP1's policy, ``policy(module, recurse, nonwrapped_numel) -> bool``
  (a callable, a registered or dotted name, or a dict with ``type`` and its arguments); the
  modules it picks, innermost first, get their own ``fully_shard`` (their own gather), as FSDP1
  wraps them in their own unit.
* ``backward_prefetch``: ``'BACKWARD_PRE'`` is what FSDP2 always does; ``use_orig_params=True``
  is what FSDP2 always is; ``limit_all_gathers`` is not needed (FSDP2 frees by stream order).
* ``ignored_modules`` -> ``ignored_params`` (their parameters); ``sync_module_states=True``
  broadcasts rank 0's weights before sharding; ``device_id`` picks the device to shard on.
"""
import dataclasses
import enum
import functools
from typing import Callable, Optional, Tuple

import torch
from torch import nn

from ..registry import FUNCTIONS

SHARDING_STRATEGIES = {'FULL_SHARD': True, 'SHARD_GRAD_OP': False}
# Keys refused for some values: key -> (the values FSDP2 has, what to write instead).
REFUSED = {
    'sharding_strategy': (tuple(SHARDING_STRATEGIES) + (None, ),
                          "'NO_SHARD' is DDP: model_wrapper_cfg=dict(type="
                          "'MMDistributedDataParallel'); hybrid sharding is FSDP2's fully_shard on "
                          'a 2-D DeviceMesh, not offered here'),
    'backward_prefetch': ((None, 'BACKWARD_PRE'),
                          "FSDP2 always prefetches before each backward ('BACKWARD_PRE'); order "
                          'it yourself with FSDPModule.set_modules_to_backward_prefetch'),
    'use_orig_params': ((True, ), 'FSDP2 always keeps the original parameters (as DTensors)'),
    'forward_prefetch': ((None, False), 'FSDP2: FSDPModule.set_modules_to_forward_prefetch'),
    'param_init_fn': ((None, ), 'FSDP2: build the model on the meta device, wrap it, then '
                                'to_empty(device=...) and initialise the weights'),
    'buffer_dtype': ((None, ), "FSDP2 leaves buffers alone: give them their dtype with "
                               "model.to() before wrapping"),
    'keep_low_precision_grads': ((False, ), "FSDP2's gradients have the sharded parameters' "
                                            'dtype; set reduce_dtype for the reduction'),
}
MIXED_PRECISION_KEYS = ('param_dtype', 'reduce_dtype', 'output_dtype', 'cast_forward_inputs',
                        'buffer_dtype', 'keep_low_precision_grads', 'cast_root_forward_inputs',
                        '_module_classes_to_ignore')
# The modules FSDP1's mixed precision leaves in their own dtype, unless told otherwise.
FULL_PRECISION_CLASSES = (nn.modules.batchnorm._BatchNorm, )


def _name(value):
    """An enum member (FSDP1's ShardingStrategy, BackwardPrefetch) as its name."""
    return value.name if isinstance(value, enum.Enum) else value


def refuse_unless_allowed(key: str, value) -> None:
    allowed, instead = REFUSED[key]
    if _name(value) not in allowed:
        raise ValueError(f'MMFullyShardedDataParallel: {key}={value!r} has no FSDP2 meaning here '
                         f'(allowed: {list(allowed)}); {instead}')


def parse_dtype(key: str, value) -> Optional[torch.dtype]:
    """None, a floating torch dtype, or its name in torch (``'bfloat16'``)."""
    dtype = getattr(torch, value, None) if isinstance(value, str) else value
    if value is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise ValueError(f'MMFullyShardedDataParallel: mixed_precision {key}={value!r} must be a '
                         "floating torch dtype or its name, e.g. 'bfloat16'")
    return dtype


def mixed_precision_policy(mixed_precision) -> tuple:
    """``mixed_precision`` (None, a dict, FSDP1's ``MixedPrecision``, FSDP2's policy) as FSDP2's
    ``MixedPrecisionPolicy``, and the module classes kept in their own dtype."""
    from torch.distributed.fsdp import MixedPrecisionPolicy
    if mixed_precision is None or isinstance(mixed_precision, MixedPrecisionPolicy):
        return mixed_precision or MixedPrecisionPolicy(), ()
    if dataclasses.is_dataclass(mixed_precision):  # FSDP1's MixedPrecision
        mixed_precision = dataclasses.asdict(mixed_precision)
    if not isinstance(mixed_precision, dict):
        raise TypeError(f'MMFullyShardedDataParallel: mixed_precision={mixed_precision!r} must be '
                        'a dict such as dict(param_dtype=\'bfloat16\', reduce_dtype=\'float32\')')
    unknown = sorted(set(mixed_precision) - set(MIXED_PRECISION_KEYS))
    if unknown:
        raise ValueError(f'MMFullyShardedDataParallel: mixed_precision has unknown keys {unknown}'
                         f'; allowed: {list(MIXED_PRECISION_KEYS[:5])}')
    for key in ('buffer_dtype', 'keep_low_precision_grads'):
        if key in mixed_precision:
            refuse_unless_allowed(key, mixed_precision[key])
    # FSDP1 casts the root's inputs (cast_root_forward_inputs, True by default) and, with
    # cast_forward_inputs, every wrapped module's; FSDP2 has the second switch only.
    cast = mixed_precision.get('cast_forward_inputs', True) or \
        mixed_precision.get('cast_root_forward_inputs', True)
    policy = MixedPrecisionPolicy(
        **{key: parse_dtype(key, mixed_precision.get(key))
           for key in ('param_dtype', 'reduce_dtype', 'output_dtype')},
        cast_forward_inputs=bool(cast))
    kept = mixed_precision.get('_module_classes_to_ignore', FULL_PRECISION_CLASSES)
    return policy, tuple(kept) if policy.param_dtype is not None else ()


def offload_policy(cpu_offload):
    """``cpu_offload`` (None, a bool, a dict or FSDP1's ``CPUOffload``) as FSDP2's policy."""
    from torch.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy
    if isinstance(cpu_offload, OffloadPolicy):
        return cpu_offload
    if dataclasses.is_dataclass(cpu_offload):
        cpu_offload = dataclasses.asdict(cpu_offload)
    if isinstance(cpu_offload, dict):
        cpu_offload = cpu_offload.get('offload_params', False)
    if not isinstance(cpu_offload, bool) and cpu_offload is not None:
        raise TypeError(f'MMFullyShardedDataParallel: cpu_offload={cpu_offload!r} must be a bool '
                        'or dict(offload_params=True)')
    return CPUOffloadPolicy() if cpu_offload else OffloadPolicy()


def wrap_policy(auto_wrap_policy) -> Optional[Callable]:
    """FSDP1's ``auto_wrap_policy`` as a callable: a name is looked up in FUNCTIONS (a dotted
    path is imported), a dict's other keys are bound as its arguments."""
    if auto_wrap_policy is None or callable(auto_wrap_policy):
        return auto_wrap_policy
    cfg = dict(type=auto_wrap_policy) if isinstance(auto_wrap_policy, str) else auto_wrap_policy
    if not isinstance(cfg, dict) or 'type' not in cfg:
        raise TypeError(f'MMFullyShardedDataParallel: auto_wrap_policy={auto_wrap_policy!r} must '
                        'be a callable, a function name or a dict with `type`')
    cfg = dict(cfg)
    policy = cfg.pop('type')
    policy = FUNCTIONS.get(policy) if isinstance(policy, str) else policy
    if not callable(policy):
        raise ValueError(f'MMFullyShardedDataParallel: auto_wrap_policy type '
                         f'{auto_wrap_policy!r} is not a registered function or dotted path')
    return functools.partial(policy, **cfg) if cfg else policy


def modules_to_shard(module: nn.Module, policy: Optional[Callable]) -> list:
    """The submodules ``policy`` picks, innermost first, as FSDP1's recursive wrapping visits
    them: a module is asked with the number of its parameters no picked submodule holds."""
    picked = []

    def visit(parent: nn.Module) -> int:
        """Picks below ``parent``; returns how many of its parameters stay unpicked."""
        total = sum(p.numel() for p in parent.parameters())
        if not policy(module=parent, recurse=True, nonwrapped_numel=total):
            return total  # the policy does not look inside
        unpicked = sum(p.numel() for p in parent.parameters(recurse=False))
        for child in parent.children():
            left = visit(child)
            if policy(module=child, recurse=False, nonwrapped_numel=left):
                picked.append(child)
            else:
                unpicked += left
        return unpicked

    if policy is not None:
        visit(module)
    return picked


def fully_shard_arguments(sharding_strategy=None, cpu_offload=None, mixed_precision=None,
                          backward_prefetch=None, use_orig_params=True, **kwargs) -> Tuple[dict,
                                                                                          dict]:
    """``(arguments of fully_shard, the rest)`` from MMEngine's keys; the rest are the keys
    the wrapper itself acts on (``auto_wrap_policy``, ``device_id``, ``sync_module_states``,
    ``ignored_modules``, ``process_group``) and ``full_precision``: the module classes that
    get their own ``fully_shard`` without ``param_dtype``. Anything else is refused here."""
    for key, value in (('sharding_strategy', sharding_strategy),
                       ('backward_prefetch', backward_prefetch),
                       ('use_orig_params', use_orig_params)):
        refuse_unless_allowed(key, value)
    for key in ('forward_prefetch', 'param_init_fn'):
        refuse_unless_allowed(key, kwargs.pop(key, None))
    kwargs.pop('limit_all_gathers', None)  # FSDP2 needs no rate limiter
    reshard = SHARDING_STRATEGIES.get(_name(sharding_strategy))
    if 'reshard_after_forward' in kwargs:  # FSDP2's own key, when sharding_strategy is not set
        if sharding_strategy is not None:
            raise ValueError('MMFullyShardedDataParallel: give sharding_strategy or '
                             'reshard_after_forward, not both')
        reshard = kwargs.pop('reshard_after_forward')
    own = ('auto_wrap_policy', 'device_id', 'sync_module_states', 'ignored_modules',
           'process_group')
    unknown = sorted(set(kwargs) - set(own))
    if unknown:
        raise TypeError(f'MMFullyShardedDataParallel got unexpected keys {unknown}; allowed: '
                        "MMEngine's sharding_strategy, mixed_precision, cpu_offload, "
                        f'backward_prefetch, use_orig_params, {", ".join(own)}, and FSDP2\'s '
                        'reshard_after_forward')
    mp_policy, kwargs['full_precision'] = mixed_precision_policy(mixed_precision)
    return dict(reshard_after_forward=reshard, mp_policy=mp_policy,
                offload_policy=offload_policy(cpu_offload)), kwargs
