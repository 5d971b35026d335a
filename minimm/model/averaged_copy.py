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
and placements. A model FSDP did not touch is deep-copied as MMEngine does.
"""
from copy import deepcopy

from torch import nn

_FSDP_PACKAGE = 'torch.distributed.fsdp'
_FSDP_FLAGS = ('_is_fsdp_managed_module', '_fsdp_use_orig_params')
_STATE_KEY = '__composable_api_state_key'  # how FSDP2 files its state on a module
_TENSORS = ('_parameters', '_buffers', '_modules')


def _is_sharded(model: nn.Module) -> bool:
    return any(getattr(m, '_is_fsdp_managed_module', False) for m in model.modules())


def averaged_copy(model: nn.Module) -> nn.Module:
    """A copy of ``model`` to average into; for a model sharded by FSDP2, a copy holding this
    rank's shards (same placements) with FSDP's classes and hooks left out."""
    if not _is_sharded(model):
        return deepcopy(model)
    return _copy_module(model, {})


def _plain_class(module: nn.Module) -> type:
    cls = type(module)
    index = getattr(cls, '_orig_cls_mro_index', None)  # FSDP<Name> -> FSDPModule -> Name
    return cls.__mro__[index] if index is not None else cls


def _from_fsdp(hook) -> bool:
    return str(getattr(hook, '__module__', '') or '').startswith(_FSDP_PACKAGE)


def _copy_module(module: nn.Module, memo: dict) -> nn.Module:
    cls = _plain_class(module)
    new = cls.__new__(cls)
    memo[id(module)] = new  # an attribute pointing back at the module points at the copy
    state = vars(module)
    hook_dicts = [key for key, value in state.items() if 'hooks' in key and isinstance(value, dict)]
    # Hook ids are unique in the process: an id dropped from one dict is dropped from its
    # companions too (``_forward_pre_hooks_with_kwargs`` has the same keys).
    fsdp_ids = {hook_id for key in hook_dicts for hook_id, hook in state[key].items()
                if _from_fsdp(hook)}
    for key, value in state.items():
        if key in _TENSORS or key in _FSDP_FLAGS or key.startswith(_STATE_KEY):
            continue
        if key in hook_dicts:
            value = type(value)((i, hook) for i, hook in value.items() if i not in fsdp_ids)
        new.__dict__[key] = deepcopy(value, memo)
    new.__dict__['_parameters'] = {name: deepcopy(p, memo)
                                   for name, p in module._parameters.items()}
    new.__dict__['_buffers'] = {name: deepcopy(b, memo) for name, b in module._buffers.items()}
    new.__dict__['_modules'] = {name: None if child is None else _copy_module(child, memo)
                                for name, child in module._modules.items()}
    return new
