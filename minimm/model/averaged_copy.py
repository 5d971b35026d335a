"""The averaged models' copy of the model: a deep copy, also of a model sharded by FSDP2.

``BaseAveragedModel`` keeps its average in a copy of the model (MMEngine: ``deepcopy(model)``).
A model that FSDP2's ``fully_shard`` wrapped refuses a deep copy: its modules' classes are
FSDP's (``FSDPLinear``...), whose ``__deepcopy__`` raises, and FSDP's forward hooks hold the
process group. Yet the copy an average needs is simple: the same modules, each parameter a
DTensor with the same placements, holding this rank's rows and nothing else (no hooks, no
gathering: nobody runs the copy's forward while training).

:func:`averaged_copy` builds that copy one module at a time: each module is made again from its
own class (the one FSDP put its class in front of) with its attributes deep-copied, except FSDP's
bookkeeping (its state keys and managed-module flags) and the hooks FSDP registered; its
parameters and buffers are deep-copied, which copies a DTensor's local shard and keeps its mesh
and placements. The same is done for a model with activation checkpointing (FSDPStrategy's),
whose hooks are left out too. Any other model is deep-copied as MMEngine does.
"""
from copy import deepcopy

from torch import nn

# The packages whose hooks a copy leaves out: FSDP2's, and the composable activation
# checkpointing that FSDPStrategy applies (``torch.distributed._composable.checkpoint``).
_HOOK_PACKAGES = ('torch.distributed.fsdp', 'torch.distributed._composable')
_FSDP_FLAGS = ('_is_fsdp_managed_module', '_fsdp_use_orig_params')
_STATE_KEY = '__composable_api_state_key'  # how FSDP2 and checkpoint file their state
_TENSORS = ('_parameters', '_buffers', '_modules')


def _applied_in_place(model: nn.Module) -> bool:
    """Whether torch's composable APIs (``fully_shard``, ``checkpoint``) changed ``model``."""
    return any(key.startswith(_STATE_KEY) for m in model.modules() for key in vars(m))


def averaged_copy(model: nn.Module) -> nn.Module:
    """A copy of ``model`` to average into; for a model sharded by FSDP2, a copy holding this
    rank's shards (same placements) with FSDP's classes and hooks left out (and the hooks of
    activation checkpointing: the copy's forward does not run in training)."""
    if not _applied_in_place(model):
        return deepcopy(model)
    return _copy_module(model, {})


def _plain_class(module: nn.Module) -> type:
    cls = type(module)
    index = getattr(cls, '_orig_cls_mro_index', None)  # FSDP<Name> -> FSDPModule -> Name
    return cls.__mro__[index] if index is not None else cls


def _from_torch_distributed(hook) -> bool:
    return str(getattr(hook, '__module__', '') or '').startswith(_HOOK_PACKAGES)


def _copy_module(module: nn.Module, memo: dict) -> nn.Module:
    cls = _plain_class(module)
    new = cls.__new__(cls)
    memo[id(module)] = new  # an attribute pointing back at the module points at the copy
    state = vars(module)
    hook_dicts = [key for key, value in state.items() if 'hooks' in key and isinstance(value, dict)]
    # Hook ids are unique in the process: an id dropped from one dict is dropped from its
    # companions too (``_forward_pre_hooks_with_kwargs`` has the same keys).
    dropped_ids = {hook_id for key in hook_dicts for hook_id, hook in state[key].items()
                   if _from_torch_distributed(hook)}
    for key, value in state.items():
        if key in _TENSORS or key in _FSDP_FLAGS or key.startswith(_STATE_KEY):
            continue
        if key in hook_dicts:
            value = type(value)((i, hook) for i, hook in value.items() if i not in dropped_ids)
        new.__dict__[key] = deepcopy(value, memo)
    new.__dict__['_parameters'] = {name: deepcopy(p, memo)
                                   for name, p in module._parameters.items()}
    new.__dict__['_buffers'] = {name: deepcopy(b, memo) for name, b in module._buffers.items()}
    new.__dict__['_modules'] = {name: None if child is None else _copy_module(child, memo)
                                for name, child in module._modules.items()}
    return new
