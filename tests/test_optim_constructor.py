"""DefaultOptimWrapperConstructor and paramwise_cfg: the parameter groups it builds, checked against
tables written out by hand from MMEngine 0.10's documented rules, and real configs' paramwise_cfg
(Swin, ConvNeXt, RTMDet, YOLOX) trained through the Runner with the per-group LR of every
iteration checked against the schedule's closed form."""
import pytest
import torch
import torch.nn as nn

from minimm.optim import DefaultOptimWrapperConstructor, OptimWrapper, build_optim_wrapper
from minimm.registry import OPTIM_WRAPPER_CONSTRUCTORS

BASE_LR, BASE_WD = 0.01, 1e-4


class Net(nn.Module):
    """One of each kind of parameter the rules tell apart."""

    def __init__(self):
        super().__init__()
        self.param1 = nn.Parameter(torch.ones(3))           # a 1-D parameter of the root module
        self.conv1 = nn.Conv2d(3, 4, 3, bias=True)
        self.bn = nn.BatchNorm2d(4)
        self.dwconv = nn.Conv2d(4, 4, 3, groups=4, bias=False)
        self.sub = nn.Sequential(nn.Linear(4, 2), nn.LayerNorm(2))
        self.gn = nn.GroupNorm(2, 4)
        self.frozen = nn.Linear(2, 2, bias=False)
        self.frozen.weight.requires_grad_(False)


def settings(optim_wrapper, model):
    """{full parameter name: (lr, weight_decay)} as the optimizer will use them."""
    names = {id(p): n for n, p in model.named_parameters()}
    result = {}
    for group in optim_wrapper.optimizer.param_groups:
        for p in group['params']:
            assert names[id(p)] not in result, 'a parameter in two groups'
            result[names[id(p)]] = (group['lr'], group['weight_decay'])
    return result


def build(model, paramwise_cfg, **optimizer):
    optimizer = dict(dict(type='SGD', lr=BASE_LR, weight_decay=BASE_WD, momentum=0.9), **optimizer)
    return build_optim_wrapper(model, dict(optimizer=optimizer, paramwise_cfg=paramwise_cfg))


def test_without_paramwise_cfg_one_group_of_all_parameters():
    model = Net()
    wrapper = build_optim_wrapper(model, dict(optimizer=dict(type='SGD', lr=BASE_LR)))
    assert type(wrapper) is OptimWrapper and len(wrapper.optimizer.param_groups) == 1
    assert wrapper.optimizer.param_groups[0]['params'] == list(model.parameters())


def test_bias_norm_dwconv_flat_rules():
    model = Net()
    wrapper = build(model, dict(bias_lr_mult=2., bias_decay_mult=0.5, norm_decay_mult=0.,
                                dwconv_decay_mult=0.1, flat_decay_mult=0.3))
    lr, wd = BASE_LR, BASE_WD
    expected = {
        'param1': (lr, wd * 0.3),            # 1-D, no other rule: flat
        'conv1.weight': (lr, wd),
        'conv1.bias': (lr * 2, wd * 0.5),     # bias: bias_lr_mult and bias_decay_mult
        'bn.weight': (lr, 0.),                # norm layers: norm_decay_mult comes first...
        'bn.bias': (lr, 0.),                  # ...and their bias keeps the base lr
        'dwconv.weight': (lr, wd * 0.1),      # in_channels == groups
        'sub.0.weight': (lr, wd),
        'sub.0.bias': (lr * 2, wd * 0.5),
        'sub.1.weight': (lr, 0.),             # LayerNorm
        'sub.1.bias': (lr, 0.),
        'gn.weight': (lr, 0.),                # GroupNorm
        'gn.bias': (lr, 0.),
        'frozen.weight': (lr, wd),            # requires_grad=False: a plain group
    }
    got = settings(wrapper, model)
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert got[name] == pytest.approx(value), name
    # One group per parameter, in the order of named_parameters().
    assert [g['params'][0] for g in wrapper.optimizer.param_groups] == list(model.parameters())


def test_custom_keys_longest_first_ties_alphabetical_and_skip_other_rules():
    model = Net()
    custom_keys = {'sub': dict(lr_mult=0.1, decay_mult=0.5), 'sub.1': dict(lr_mult=0.),
                   'conv1.bias': dict(decay_mult=0.), 'bn': dict(lr_mult=3.),
                   'n.': dict(lr_mult=5.)}
    wrapper = build(model, dict(custom_keys=custom_keys, norm_decay_mult=0., bias_lr_mult=2.))
    got = settings(wrapper, model)
    lr, wd = BASE_LR, BASE_WD
    assert got['sub.0.weight'] == pytest.approx((lr * 0.1, wd * 0.5))
    # 'sub.1' is longer than 'sub'; a custom key overrides norm_decay_mult (decay_mult 1).
    assert got['sub.1.weight'] == pytest.approx((0., wd))
    assert got['conv1.bias'] == pytest.approx((lr, 0.))   # custom key: no bias_lr_mult
    # 'bn' and 'n.' are both in 'bn.weight' and equally long: the alphabetically first wins.
    assert got['bn.weight'] == pytest.approx((lr * 3, wd))
    assert got['gn.bias'] == pytest.approx((lr * 5, wd))  # only 'n.' matches
    # A key's entries are copied into the group, as MMEngine does.
    group = next(g for g in wrapper.optimizer.param_groups if g['params'][0] is model.sub[0].weight)
    assert group['lr_mult'] == 0.1 and group['decay_mult'] == 0.5


def test_bypass_duplicate_skips_a_shared_parameter():
    model = Net()
    model.tied = nn.Linear(4, 2)
    model.tied.weight = model.sub[0].weight            # one tensor, two modules
    with pytest.raises(ValueError, match='more than one parameter group'):
        build(model, dict(norm_decay_mult=0.))             # torch refuses the duplicate
    wrapper = build(model, dict(norm_decay_mult=0., bypass_duplicate=True))
    params = [p for g in wrapper.optimizer.param_groups for p in g['params']]
    assert len(params) == len(set(map(id, params))) == len(list(model.parameters()))


def test_wrapped_model_and_optimizer_without_weight_decay():
    model = Net()
    ddp_like = nn.Module()
    ddp_like.module = model                        # the constructor builds for .module
    wrapper = DefaultOptimWrapperConstructor(
        dict(type='OptimWrapper', optimizer=dict(type='Adam', lr=BASE_LR)),
        dict(bias_lr_mult=2.))(ddp_like)
    got = settings(wrapper, model)
    assert got['conv1.bias'] == (BASE_LR * 2, 0) and got['conv1.weight'] == (BASE_LR, 0)


@pytest.mark.parametrize('paramwise_cfg, optimizer, message', [
    (dict(norm_decay_mult=0.), dict(weight_decay=None), 'norm_decay_mult is set'),
    (dict(custom_keys={'bn': dict(decay_mult=0.)}), dict(weight_decay=None),
     r"custom_keys\['bn'\] sets decay_mult"),
    (dict(custom_keys={'bn': dict(lr_mult=0.)}), dict(lr=None), 'base_lr should not be None'),
    (dict(custom_keys=['bn']), {}, 'custom_keys must be a dict'),
    ('norm_decay_mult=0', {}, 'paramwise_cfg should be None or a dict'),
])
def test_bad_paramwise_cfg_fails_when_built(paramwise_cfg, optimizer, message):
    cfg = dict(type='SGD', lr=BASE_LR, weight_decay=BASE_WD)
    cfg.update(optimizer)
    cfg = {k: v for k, v in cfg.items() if v is not None}
    with pytest.raises((ValueError, TypeError), match=message):
        DefaultOptimWrapperConstructor(dict(optimizer=cfg), paramwise_cfg)


def test_a_downstream_constructor_subclass_is_used():
    """The shape of MMDetection's LearningRateDecayOptimizerConstructor (ConvNeXt configs): a
    subclass with its own paramwise_cfg keys that overrides add_params."""

    @OPTIM_WRAPPER_CONSTRUCTORS.register_module(force=True)
    class LayerDecayConstructor(DefaultOptimWrapperConstructor):
        def add_params(self, params, module, **kwargs):
            rate = self.paramwise_cfg['decay_rate']
            for depth, (name, param) in enumerate(module.named_parameters()):
                params.append(dict(params=[param], lr=self.base_lr * rate ** depth))

    model = nn.Sequential(nn.Linear(2, 2, bias=False), nn.Linear(2, 2, bias=False))
    wrapper = build_optim_wrapper(model, dict(
        constructor='LayerDecayConstructor', paramwise_cfg=dict(decay_rate=0.5),
        optimizer=dict(type='AdamW', lr=0.0002, betas=(0.9, 0.999), weight_decay=0.05)))
    assert [g['lr'] for g in wrapper.optimizer.param_groups] == [0.0002, 0.0001]


# paramwise_cfg of real configs (MMDetection 3.x Swin and RTMDet, MMPretrain ConvNeXt, YOLOX).
SWIN = dict(custom_keys={'absolute_pos_embed': dict(decay_mult=0.),
                         'relative_position_bias_table': dict(decay_mult=0.),
                         'norm': dict(decay_mult=0.)})
CONVNEXT = dict(norm_decay_mult=0.0, bias_decay_mult=0.0, flat_decay_mult=0.0,
                custom_keys={'.absolute_pos_embed': dict(decay_mult=0.0),
                             '.relative_position_bias_table': dict(decay_mult=0.0)})
RTMDET = dict(norm_decay_mult=0, bias_decay_mult=0, bypass_duplicate=True)
YOLOX = dict(norm_decay_mult=0., bias_decay_mult=0.)


class TinySwin(nn.Module):
    def __init__(self):
        super().__init__()
        self.absolute_pos_embed = nn.Parameter(torch.zeros(1, 4))
        self.stage = nn.Module()
        self.stage.relative_position_bias_table = nn.Parameter(torch.zeros(3, 2))
        self.stage.proj = nn.Linear(4, 4)
        self.norm = nn.LayerNorm(4)
        self.head = nn.Linear(4, 2)


@pytest.mark.parametrize('paramwise_cfg, no_decay', [
    (SWIN, {'absolute_pos_embed', 'stage.relative_position_bias_table', 'norm.weight',
            'norm.bias'}),
    (CONVNEXT, {'absolute_pos_embed', 'stage.relative_position_bias_table', 'norm.weight',
                'norm.bias', 'stage.proj.bias', 'head.bias'}),
    (RTMDET, {'norm.weight', 'norm.bias', 'stage.proj.bias', 'head.bias'}),
    (YOLOX, {'norm.weight', 'norm.bias', 'stage.proj.bias', 'head.bias'}),
])
def test_real_paramwise_cfgs(paramwise_cfg, no_decay):
    model = TinySwin()
    wrapper = build_optim_wrapper(model, dict(
        type='OptimWrapper', paramwise_cfg=paramwise_cfg,
        optimizer=dict(type='AdamW', lr=0.0001, betas=(0.9, 0.999), weight_decay=0.05)))
    got = settings(wrapper, model)
    # '.absolute_pos_embed' (ConvNeXt's key, with the dot) matches a root parameter, because
    # MMEngine matches against f'{prefix}.{name}' and the root's prefix is empty.
    assert {name for name, (_, wd) in got.items() if wd == 0} == no_decay
    assert all(wd == 0.05 for name, (_, wd) in got.items() if name not in no_decay)
    assert all(lr == 0.0001 for lr, _ in got.values())


def test_runner_trains_paramwise_groups_on_the_schedule(tmp_path):
    """Through the Runner (``optim_wrapper.paramwise_cfg`` in its config), every group follows
    the schedule from its own base lr: lr(group, i) = base_lr * mult(group) * warmup(i) * step(e),
    with a LinearLR warm-up over iterations [0, 3) (MMEngine's factor reaches 1 at end - 1:
    0.25 + 0.75 * i / 2) and a x0.1 step at epoch 1 (3 iterations per epoch)."""
    from minimm.hooks import Hook

    from toy import toy_runner

    class LrRecorder(Hook):
        def __init__(self):
            self.seen = []

        def before_train_iter(self, runner, batch_idx, data_batch=None):
            self.seen.append([g['lr'] for g in runner.optim_wrapper.optimizer.param_groups])

    recorder = LrRecorder()
    runner = toy_runner(
        tmp_path, max_=2, val=False, custom_hooks=[recorder],
        optim_wrapper=dict(
            optimizer=dict(type='SGD', lr=0.1, momentum=0.9, weight_decay=1e-4),
            paramwise_cfg=dict(custom_keys={'bn': dict(lr_mult=0.1)}, bias_lr_mult=2.,
                               bias_decay_mult=0.)),
        param_scheduler=[dict(type='LinearLR', start_factor=0.25, by_epoch=False, begin=0, end=3),
                         dict(type='MultiStepLR', by_epoch=True, milestones=[1], gamma=0.1)])
    runner.train()
    groups = runner.optim_wrapper.optimizer.param_groups
    model = runner.model
    assert [g['params'][0] for g in groups] == [model.linear.weight, model.linear.bias,
                                                model.bn.weight, model.bn.bias]
    assert [g['weight_decay'] for g in groups] == [1e-4, 0., 1e-4, 1e-4]
    mults = [1., 2., 0.1, 0.1]          # linear.bias: bias_lr_mult; bn.*: the custom key
    for i, lrs in enumerate(recorder.seen):
        warmup = 0.25 + 0.75 * min(i, 2) / 2
        step = 0.1 if i >= 3 else 1.
        assert lrs == pytest.approx([0.1 * m * warmup * step for m in mults]), i
    assert len(recorder.seen) == 6
