"""OptimWrapper, AmpOptimWrapper and build_optim_wrapper.

The accumulation tests use the loss ``w . x``, whose gradient ``x`` does not depend on ``w``, so
the expected weights are a closed form: after each group, ``w -= lr * mean(x over the group)``.
"""
import contextlib

import pytest
import torch

from minimm.logging.message_hub import MessageHub
from minimm.optim import AmpOptimWrapper, OptimWrapper, build_optim_wrapper
from minimm.registry import OPTIM_WRAPPERS


def linear_model():
    model = torch.nn.Linear(3, 1, bias=False)
    with torch.no_grad():
        model.weight.zero_()
    return model


def test_accumulation_steps_with_group_means_including_last_partial_group():
    torch.manual_seed(0)
    model = linear_model()
    wrapper = OptimWrapper(torch.optim.SGD(model.parameters(), lr=1.0), accumulative_counts=3)
    wrapper.initialize_count_status(model, init_counts=0, max_counts=7)
    xs = torch.randn(7, 3)
    updates = []
    for i in range(7):
        wrapper.update_params((model.weight[0] * xs[i]).sum())
        updates.append(wrapper.should_update())
        if i == 1:  # mid-group: two scaled gradients accumulated, no step yet
            assert torch.allclose(model.weight.grad[0], (xs[0] + xs[1]) / 3)
            assert torch.equal(model.weight.detach(), torch.zeros(1, 3))
    assert updates == [False, False, True, False, False, True, True]
    # Groups [0, 3), [3, 6) and the partial [6, 7), each averaged over its own size.
    expected = -(xs[0:3].mean(0) + xs[3:6].mean(0) + xs[6:7].mean(0))
    assert torch.allclose(model.weight.detach()[0], expected, atol=1e-6)
    assert model.weight.grad is None or not model.weight.grad.any()  # zeroed after the step


def test_accumulation_without_known_run_length_divides_by_counts():
    model = linear_model()
    wrapper = OptimWrapper(torch.optim.SGD(model.parameters(), lr=1.0), accumulative_counts=4)
    loss = torch.tensor(8.0)
    assert wrapper.scale_loss(loss) == 2.0
    wrapper.initialize_count_status(model, init_counts=8, max_counts=10)  # resumed at 8 of 10
    assert wrapper.inner_count == 8 and wrapper.scale_loss(loss) == 4.0  # remainder group of 2
    # A run that is a whole number of groups, "resumed" at its end: no group is left.
    wrapper.initialize_count_status(model, init_counts=8, max_counts=8)
    with pytest.raises(ValueError, match='loss_factor should be larger than zero'):
        wrapper.scale_loss(loss)


def test_optim_context_skips_ddp_sync_inside_an_accumulation_group():
    calls = []

    class FakeDDP(torch.nn.Module):
        @contextlib.contextmanager
        def no_sync(self):
            calls.append('no_sync')
            yield

    model = FakeDDP()
    wrapper = OptimWrapper(torch.optim.SGD(linear_model().parameters(), lr=0.1),
                           accumulative_counts=2)
    wrapper.initialize_count_status(model, 0, 3)
    synced = []
    for _ in range(3):
        before = len(calls)
        with wrapper.optim_context(model):
            pass
        synced.append(len(calls) == before)
        wrapper._inner_count += 1  # what backward() does
    # Sync on the backward that completes a group (2nd) and on the run's last (3rd).
    assert synced == [False, True, True]


def test_clip_grad_norm_clips_and_logs_the_norm():
    model = linear_model()
    clip_cfg = dict(max_norm=1.0, norm_type=2)
    wrapper = OptimWrapper(torch.optim.SGD(model.parameters(), lr=1.0), clip_grad=clip_cfg)
    wrapper.update_params((model.weight[0] * torch.tensor([3.0, 0.0, 4.0])).sum())
    # The gradient (3, 0, 4) has norm 5; the step used it scaled to norm 1.
    assert torch.allclose(model.weight.detach()[0], torch.tensor([-0.6, 0.0, -0.8]))
    hub = MessageHub.get_current_instance()
    assert hub.get_scalar('train/grad_norm').current() == pytest.approx(5.0)
    assert clip_cfg == dict(max_norm=1.0, norm_type=2)


def test_clip_grad_value_clips_each_element():
    model = linear_model()
    clip_cfg = dict(type='value', clip_value=0.5)
    wrapper = OptimWrapper(torch.optim.SGD(model.parameters(), lr=1.0), clip_grad=clip_cfg)
    wrapper.update_params((model.weight[0] * torch.tensor([3.0, -0.25, -4.0])).sum())
    assert torch.equal(model.weight.detach()[0], torch.tensor([-0.5, 0.25, 0.5]))
    assert clip_cfg['type'] == 'value'  # the caller's config is not popped


@pytest.mark.parametrize('clip_grad,error', [
    ([1.0], TypeError), ({}, TypeError), (dict(type='max', max_norm=1), ValueError),
    (dict(type='norm'), ValueError)])
def test_clip_grad_config_errors(clip_grad, error):
    with pytest.raises(error):
        OptimWrapper(torch.optim.SGD(linear_model().parameters(), lr=0.1), clip_grad=clip_grad)


def test_constructor_errors():
    with pytest.raises(TypeError, match='torch.optim.Optimizer'):
        OptimWrapper(dict(type='SGD', lr=0.1))
    with pytest.raises(ValueError, match='accumulative_counts'):
        OptimWrapper(torch.optim.SGD(linear_model().parameters(), lr=0.1), accumulative_counts=0)


def test_get_lr_and_momentum():
    params = list(torch.nn.Linear(2, 1).parameters())
    assert OptimWrapper(torch.optim.SGD(params, lr=0.1, momentum=0.8)).get_momentum() == \
        {'momentum': [0.8]}
    adam = OptimWrapper(torch.optim.Adam(params, lr=0.01, betas=(0.7, 0.9)))
    assert adam.get_momentum() == {'momentum': [0.7]} and adam.get_lr() == {'lr': [0.01]}
    assert OptimWrapper(torch.optim.Adagrad(params, lr=0.1)).get_momentum() == {'momentum': [0]}


def test_several_param_groups_get_a_base_group():
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD([{'params': [model.weight]},
                                 {'params': [model.bias], 'lr': 0.5}], lr=0.1, momentum=0.9)
    wrapper = OptimWrapper(optimizer)
    assert len(wrapper.param_groups) == 3 and wrapper.param_groups[-1]['lr'] == 0.1
    assert wrapper.get_lr() == {'base_lr': [0.1], 'lr': [0.1, 0.5]}
    assert wrapper.get_momentum() == {'momentum': [0.9, 0.9]}
    state = wrapper.state_dict()
    assert state['base_param_settings']['lr'] == 0.1

    state['base_param_settings'] = dict(state['base_param_settings'], lr=0.02)
    other = OptimWrapper(torch.optim.SGD([{'params': [model.weight]},
                                          {'params': [model.bias], 'lr': 0.5}], lr=0.1))
    other.load_state_dict(state)
    assert other.get_lr()['base_lr'] == [0.02]
    assert 'base_param_settings' in state  # loading did not pop from the caller's dict


def test_state_dict_round_trip():
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    wrapper = OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    wrapper.update_params(model(torch.randn(4, 2)).sum())
    state = wrapper.state_dict()
    assert set(state) == {'state', 'param_groups'}
    other = OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9))
    other.load_state_dict(state)
    assert other.get_lr() == {'lr': [0.1]}
    assert torch.equal(other.optimizer.state_dict()['state'][0]['momentum_buffer'],
                       state['state'][0]['momentum_buffer'])


def test_repr_and_defaults():
    wrapper = OptimWrapper(torch.optim.SGD(linear_model().parameters(), lr=0.1),
                           accumulative_counts=2)
    assert repr(wrapper).startswith('Type: OptimWrapper\n_accumulative_counts: 2\noptimizer: \n')
    assert wrapper.defaults['lr'] == 0.1


def test_build_optim_wrapper_from_dict_keeps_the_config_intact():
    model = torch.nn.Linear(2, 1)
    cfg = dict(optimizer=dict(type='SGD', lr=0.01, momentum=0.9), accumulative_counts=2,
               clip_grad=dict(max_norm=1.0))
    wrapper = build_optim_wrapper(model, cfg)
    assert type(wrapper) is OptimWrapper and wrapper._accumulative_counts == 2
    assert wrapper.optimizer.param_groups[0]['params'] == list(model.parameters())
    assert cfg == dict(optimizer=dict(type='SGD', lr=0.01, momentum=0.9),
                       accumulative_counts=2, clip_grad=dict(max_norm=1.0))


def test_build_optim_wrapper_accepts_built_objects():
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    wrapped = build_optim_wrapper(model, optimizer)
    assert wrapped.optimizer is optimizer
    assert build_optim_wrapper(model, wrapped) is wrapped
    from_cfg = build_optim_wrapper(model, dict(type='OptimWrapper', optimizer=optimizer))
    assert from_cfg.optimizer is optimizer


def test_build_optim_wrapper_errors():
    model = torch.nn.Linear(2, 1)
    with pytest.raises(ValueError, match='norm_decay_mult is set, so optimizer.weight_decay'):
        build_optim_wrapper(model, dict(optimizer=dict(type='SGD', lr=0.1),
                                        paramwise_cfg=dict(norm_decay_mult=0.)))
    with pytest.raises(KeyError, match="MyConstructor is not in the mmengine::optimizer wrapper "
                                       'constructor registry'):
        build_optim_wrapper(model, dict(optimizer=dict(type='SGD', lr=0.1),
                                        constructor='MyConstructor'))
    with pytest.raises(ValueError, match='must be a config dict, not a built SGD'):
        build_optim_wrapper(model, dict(optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                        paramwise_cfg=dict(bias_lr_mult=2.)))
    with pytest.raises(KeyError, match='needs an `optimizer`'):
        build_optim_wrapper(model, dict(type='OptimWrapper'))
    with pytest.raises(TypeError, match='should be an OptimWrapper'):
        build_optim_wrapper(model, 'SGD')
    with pytest.raises(KeyError, match="SDG is not in the mmengine::optimizer registry"):
        build_optim_wrapper(model, dict(optimizer=dict(type='SDG', lr=0.1)))


def test_amp_optim_wrapper_cpu_bf16_trains():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    cfg = dict(type='AmpOptimWrapper', optimizer=dict(type='SGD', lr=0.1),
               clip_grad=dict(max_norm=10.0))
    wrapper = build_optim_wrapper(model, cfg)
    assert isinstance(wrapper, AmpOptimWrapper) and wrapper.loss_scaler is None
    before = model.weight.detach().clone()
    with wrapper.optim_context(model):
        out = model(torch.randn(8, 4))
        assert out.dtype == torch.bfloat16  # autocast is on
        loss = out.float().pow(2).mean()
    wrapper.update_params(loss)
    assert model.weight.dtype == torch.float32 and not torch.equal(model.weight, before)
    assert torch.isfinite(model.weight).all()
    assert 'loss_scaler' not in wrapper.state_dict()  # no scaler on CPU
    assert 'AmpOptimWrapper' in OPTIM_WRAPPERS


def test_amp_optim_wrapper_arguments():
    params = list(torch.nn.Linear(2, 1).parameters())
    wrapper = AmpOptimWrapper(optimizer=torch.optim.SGD(params, lr=0.1), loss_scale=512.,
                              dtype='bfloat16')
    assert wrapper.cast_dtype is torch.bfloat16 and wrapper._scale_update_param == 512.
    AmpOptimWrapper(optimizer=torch.optim.SGD(params, lr=0.1), loss_scale=dict(init_scale=8.))
    with pytest.raises(TypeError, match='loss_scale must be'):
        AmpOptimWrapper(optimizer=torch.optim.SGD(params, lr=0.1), loss_scale=512)
    with pytest.raises(ValueError, match='dtype should be any of'):
        AmpOptimWrapper(optimizer=torch.optim.SGD(params, lr=0.1), dtype='float64')


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')
def test_amp_optim_wrapper_cuda_scaler_state():
    model = torch.nn.Linear(4, 2).cuda()
    wrapper = AmpOptimWrapper(optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                              loss_scale=256.)
    with wrapper.optim_context(model):
        loss = model(torch.randn(8, 4, device='cuda')).float().pow(2).mean()
    wrapper.update_params(loss)
    state = wrapper.state_dict()
    assert state['loss_scaler']['scale'] == 256.
    wrapper.load_state_dict(state)
    assert 'loss_scaler' in state
