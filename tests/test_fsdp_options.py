"""Sharded training in this process, no spawn: the configs of tests/test_fsdp.py on one process
(not distributed: unsharded), MMEngine's FSDP1 keys mapped to FSDP2 or refused in one line, the
auto-wrap policy against FSDP1's choice, and the strategies' options."""
import re

import pytest
import torch
from torch import nn

from test_fsdp import RULES, WideToy, _assert_equal_states, _averages, _is_linear, _runner

pytestmark = pytest.mark.ops_backend  # the averages run on this lane's op backend

def test_one_process_runs_the_same_configs_unsharded(tmp_path):
    """Not distributed, neither the wrapper nor a strategy wraps the model (as the Runner does
    for DDP): the run is the plain one, bit for bit, activation checkpointing included."""
    from minimm.hooks import EMAHook
    from minimm.model import is_model_wrapper
    plain = _runner(str(tmp_path / 'plain'), [EMAHook(**RULES[0])], launcher='none')
    plain.train()
    configs = {
        'model_wrapper_cfg': dict(cfg=dict(model_wrapper_cfg=dict(
            type='MMFullyShardedDataParallel', sharding_strategy='FULL_SHARD'))),
        'FSDPStrategy': dict(runner_type='FlexibleRunner', strategy=dict(
            type='FSDPStrategy', activation_checkpointing=dict(check_fn=_is_linear))),
        'DDPStrategy': dict(runner_type='FlexibleRunner', strategy=dict(type='DDPStrategy')),
    }
    for name, kwargs in configs.items():
        runner = _runner(str(tmp_path / name), [EMAHook(**RULES[0])], launcher='none', **kwargs)
        runner.train()
        assert not is_model_wrapper(runner.model), name
        for a, b in zip(runner.model.parameters(), plain.model.parameters()):
            assert torch.equal(a, b), name
        _assert_equal_states(_averages(runner), _averages(plain), name)


@pytest.mark.parametrize('kwargs, words', [
    (dict(sharding_strategy='NO_SHARD'), "sharding_strategy='NO_SHARD'"),
    (dict(sharding_strategy='HYBRID_SHARD'), '2-D DeviceMesh'),
    (dict(backward_prefetch='BACKWARD_POST'), 'set_modules_to_backward_prefetch'),
    (dict(use_orig_params=False), 'use_orig_params=False'),
    (dict(param_init_fn=print), 'to_empty'),
    (dict(forward_prefetch=True), 'set_modules_to_forward_prefetch'),
    (dict(mixed_precision=dict(buffer_dtype='float16')), "buffer_dtype='float16'"),
    (dict(mixed_precision=dict(keep_low_precision_grads=True)), 'reduce_dtype'),
    (dict(mixed_precision=dict(param_dtype='bf16')), "param_dtype='bf16'"),
    (dict(mixed_precision=dict(param_type='bfloat16')), "unknown keys ['param_type']"),
    (dict(cpu_offload='yes'), "cpu_offload='yes'"),
    (dict(auto_wrap_policy='no_such_policy'), "'no_such_policy'"),
    (dict(flatten_parameters=True), "['flatten_parameters']"),
    (dict(sharding_strategy='FULL_SHARD', reshard_after_forward=False), 'not both'),
])
def test_fsdp1_keys_without_an_fsdp2_meaning_are_refused_in_one_line(kwargs, words):
    from minimm.model.fsdp_options import fully_shard_arguments, wrap_policy
    with pytest.raises((ValueError, TypeError), match=re.escape(words)) as info:
        policy = kwargs.pop('auto_wrap_policy', None)
        wrap_policy(policy)
        fully_shard_arguments(**kwargs)
    assert '\n' not in str(info.value)


def test_fsdp1_keys_are_mapped_to_fully_shard_arguments():
    from torch.distributed.fsdp import (BackwardPrefetch, CPUOffload, CPUOffloadPolicy,
                                        MixedPrecision, OffloadPolicy, ShardingStrategy)

    from minimm.model.fsdp_options import fully_shard_arguments
    args, own = fully_shard_arguments()
    assert args['reshard_after_forward'] is None and own == dict(full_precision=())
    assert type(args['offload_policy']) is OffloadPolicy
    assert fully_shard_arguments(sharding_strategy='SHARD_GRAD_OP')[0]['reshard_after_forward'] \
        is False
    args, own = fully_shard_arguments(
        sharding_strategy=ShardingStrategy.FULL_SHARD, cpu_offload=CPUOffload(offload_params=True),
        backward_prefetch=BackwardPrefetch.BACKWARD_PRE, limit_all_gathers=True, device_id=0,
        mixed_precision=MixedPrecision(param_dtype=torch.float16, reduce_dtype=torch.float32))
    policy = args['mp_policy']
    assert args['reshard_after_forward'] is True
    assert isinstance(args['offload_policy'], CPUOffloadPolicy)
    # FSDP1's cast_root_forward_inputs (True by default) casts the inputs
    assert (policy.param_dtype, policy.reduce_dtype, policy.cast_forward_inputs) == (
        torch.float16, torch.float32, True)
    assert own == dict(device_id=0, full_precision=(nn.modules.batchnorm._BatchNorm, ))
    args, _ = fully_shard_arguments(mixed_precision=dict(param_dtype='bfloat16'),
                                    reshard_after_forward=False)
    assert args['mp_policy'].param_dtype is torch.bfloat16
    assert args['reshard_after_forward'] is False


def test_auto_wrap_policy_picks_the_modules_fsdp1_would_wrap():
    from minimm.model.fsdp_options import modules_to_shard, wrap_policy
    model = nn.Sequential(nn.Linear(4, 7), nn.Sequential(nn.Linear(7, 7), nn.ReLU()),
                          nn.Linear(7, 2))  # 35, 56 and 16 parameters
    policy = dict(type='torch.distributed.fsdp.wrap.size_based_auto_wrap_policy')
    # FSDP1 wraps a module whose parameters not yet wrapped reach min_num_params, innermost
    # first; the inner Sequential has none left once its Linear is wrapped.
    assert modules_to_shard(model, wrap_policy(dict(policy, min_num_params=40))) == [model[1][0]]
    assert modules_to_shard(model, wrap_policy(dict(policy, min_num_params=30))) == [
        model[0], model[1][0]]
    assert modules_to_shard(model, wrap_policy(dict(policy, min_num_params=100))) == []
    assert modules_to_shard(model, None) == []
    # Two Linear layers of 20 below the threshold each: their parent, with 40, is wrapped.
    nested = nn.Sequential(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4)), nn.Linear(4, 2))
    assert modules_to_shard(nested, wrap_policy(dict(policy, min_num_params=30))) == [nested[0]]


@pytest.mark.parametrize('strategy, words', [
    (dict(type='FSDPStrategy', state_dict_cfg='sharded'), "state_dict_cfg='sharded'"),
    (dict(type='FSDPStrategy', state_dict_cfg=dict(state_dict_type='FULL')),
     "state_dict_type in ['LOCAL_STATE_DICT'"),
    (dict(type='FSDPStrategy', activation_checkpointing=dict(check=print)),
     'must be dict(check_fn=...)'),
    (dict(type='FSDPStrategy', activation_checkpointing=dict(check_fn='no_such_fn')),
     "check_fn='no_such_fn'"),
    (dict(type='DDPStrategy', model_wrapper='MMDistributedDataParallel'),
     "model_wrapper='MMDistributedDataParallel'"),
])
def test_strategy_options_are_checked_in_one_line(strategy, words):
    from minimm.registry import STRATEGIES
    with pytest.raises((ValueError, TypeError), match=re.escape(words)) as info:
        STRATEGIES.build(strategy)
    assert '\n' not in str(info.value)


def test_flexible_runner_refuses_a_second_wrapper_config(tmp_path):
    with pytest.raises(ValueError, match='not model_wrapper_cfg'):
        _runner(str(tmp_path), [], launcher='none', runner_type='FlexibleRunner',
                strategy=dict(type='FSDPStrategy'),
                cfg=dict(model_wrapper_cfg=dict(type='MMFullyShardedDataParallel')))


@pytest.mark.filterwarnings('ignore:model. WideToy values cannot be written')  # a built model
def test_state_dict_cfg_is_kept_for_the_checkpoint_code(tmp_path):
    from minimm.registry import RUNNERS, STRATEGIES
    full = dict(state_dict_type='FULL_STATE_DICT', state_dict_config=dict(offload_to_cpu=True))
    assert STRATEGIES.build(dict(type='FSDPStrategy')).state_dict_cfg == 'local'
    assert STRATEGIES.build(dict(type='FSDPStrategy', state_dict_cfg=full)).state_dict_cfg == full
    # a whole config, as `minimm train` builds it: runner_type and strategy are read from it
    runner = RUNNERS.build(dict(runner_type='FlexibleRunner', model=WideToy(),
                                work_dir=str(tmp_path), strategy=dict(
                                    type='FSDPStrategy', state_dict_cfg='full')))
    assert type(runner).__name__ == 'FlexibleRunner' and runner.strategy.state_dict_cfg == 'full'
