"""minimm.mmcv's optimizer side against closed forms and plain PyTorch: DefaultOptimizerConstructor's
param groups, build_optimizer, an MMCV 1.x config with paramwise_cfg trained by `minimm train`,
and OptimizerHook subclassed the way downstream repos do it."""
import os
import warnings

import pytest
import torch
from torch import nn

from minimm.cli import main
from minimm.mmcv import (HOOKS, OPTIMIZER_BUILDERS, OPTIMIZERS, DefaultOptimizerConstructor,
                         OptimizerHook, build_optimizer, build_optimizer_constructor)
from mmcv_toy import ToyModel, loader, make_runner

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LR, WD = 0.01, 1e-4


class Net(nn.Module):
    """One module of each kind the rules tell apart."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))              # a bare parameter
        self.conv = nn.Conv2d(2, 4, 1)                        # plain conv: weight, bias
        self.dw = nn.Conv2d(4, 4, 3, groups=4)                # depthwise
        self.bn = nn.BatchNorm2d(4)                           # norm
        self.head = nn.Sequential(nn.Linear(4, 3), nn.LayerNorm(3))


NAMES = ['scale', 'conv.weight', 'conv.bias', 'dw.weight', 'dw.bias', 'bn.weight', 'bn.bias',
         'head.0.weight', 'head.0.bias', 'head.1.weight', 'head.1.bias']


def groups(optimizer):
    return [(g['lr'], g['weight_decay']) for g in optimizer.param_groups]


def test_no_paramwise_cfg_is_one_group_with_the_optimizers_settings():
    model = Net()
    optimizer = build_optimizer(model, dict(type='SGD', lr=LR, momentum=0.9, weight_decay=WD))
    (group, ) = optimizer.param_groups
    assert group['params'] == list(model.parameters())
    assert (group['lr'], group['momentum'], group['weight_decay']) == (LR, 0.9, WD)
    assert 'SGD' in OPTIMIZERS and 'AdamW' in OPTIMIZERS


def test_the_rules_give_each_parameter_its_closed_form_lr_and_decay():
    paramwise_cfg = dict(bias_lr_mult=2., bias_decay_mult=0.5, norm_decay_mult=0.,
                         dwconv_decay_mult=0.1)
    model = Net()
    optimizer = build_optimizer(model, dict(type='SGD', lr=LR, weight_decay=WD,
                                            paramwise_cfg=paramwise_cfg))
    assert [g['params'][0] for g in optimizer.param_groups] == list(model.parameters())
    expected = {
        'scale': (LR, WD), 'conv.weight': (LR, WD), 'conv.bias': (2 * LR, 0.5 * WD),
        # a depthwise conv's bias: bias_lr_mult, but its decay is the depthwise one
        'dw.weight': (LR, 0.1 * WD), 'dw.bias': (2 * LR, 0.1 * WD),
        # norm layers: no bias_lr_mult, norm decay for weight and bias
        'bn.weight': (LR, 0.), 'bn.bias': (LR, 0.),
        'head.0.weight': (LR, WD), 'head.0.bias': (2 * LR, 0.5 * WD),
        'head.1.weight': (LR, 0.), 'head.1.bias': (LR, 0.)}
    assert groups(optimizer) == [pytest.approx(expected[name]) for name in NAMES]


def test_custom_keys_win_longest_first_then_alphabetically_and_override_the_rules():
    custom_keys = {'head': dict(lr_mult=0.1), 'head.1': dict(lr_mult=0.5, decay_mult=0.),
                   'conv': dict(decay_mult=2.), 'dw': dict(lr_mult=3.), 'nothing': dict(lr_mult=0.)}
    model = Net()
    optimizer = DefaultOptimizerConstructor(
        dict(type='SGD', lr=LR, weight_decay=WD),
        dict(custom_keys=custom_keys, norm_decay_mult=0., bias_lr_mult=2.))(model)
    expected = {
        'scale': (LR, WD), 'conv.weight': (LR, 2 * WD), 'conv.bias': (LR, 2 * WD),
        # 'dw.bias' contains 'dw' only; 'dw.weight' too: both keys of length 2 lose to nothing
        'dw.weight': (3 * LR, WD), 'dw.bias': (3 * LR, WD),
        'bn.weight': (LR, 0.), 'bn.bias': (LR, 0.),
        'head.0.weight': (0.1 * LR, WD), 'head.0.bias': (0.1 * LR, WD),
        'head.1.weight': (0.5 * LR, 0.), 'head.1.bias': (0.5 * LR, 0.)}
    assert groups(optimizer) == [pytest.approx(expected[name]) for name in NAMES]
    # equally long keys: the alphabetically first one ('ab' before 'bc' in 'xabc')
    tie = nn.Module()
    tie.xabc = nn.Parameter(torch.ones(1))
    optimizer = DefaultOptimizerConstructor(dict(type='SGD', lr=LR), dict(custom_keys={
        'bc': dict(lr_mult=5.), 'ab': dict(lr_mult=7.)}))(tie)
    assert optimizer.param_groups[0]['lr'] == pytest.approx(7 * LR)


def test_frozen_parameters_keep_the_defaults_and_duplicates_can_be_bypassed():
    model = Net()
    model.conv.requires_grad_(False)
    model.shared = model.head[0]  # the same Linear under a second name
    paramwise_cfg = dict(bias_lr_mult=2.)
    with pytest.raises(ValueError, match='some parameters appear in more than one parameter group'):
        DefaultOptimizerConstructor(dict(type='SGD', lr=LR), paramwise_cfg)(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        optimizer = DefaultOptimizerConstructor(dict(type='SGD', lr=LR),
                                                dict(paramwise_cfg, bypass_duplicate=True))(model)
    assert [str(w.message) for w in caught] == [
        'shared is duplicate. It is skipped since bypass_duplicate=True'] * 2
    assert [g['params'][0] for g in optimizer.param_groups] == list(model.parameters())
    # conv is frozen: its bias keeps the default lr despite bias_lr_mult
    assert [g['lr'] for g in optimizer.param_groups][1:3] == [LR, LR]


def test_the_bypass_duplicate_warning_shows_even_when_warnings_are_ignored():
    model = Net()
    model.shared = model.head[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('ignore')  # as `python -W ignore`, how the MMCV peer suite runs
        DefaultOptimizerConstructor(dict(type='SGD', lr=LR), dict(bypass_duplicate=True))(model)
        warnings.warn('another warning')  # still ignored: the filter was only for that message
    assert [str(w.message) for w in caught] == [
        'shared is duplicate. It is skipped since bypass_duplicate=True'] * 2


def test_dcn_offset_layers_get_their_own_lr_mult():
    class DeformConv2d(nn.Conv2d):  # named as mmcv.ops' layer: minimm recognises it by name
        def __init__(self):
            super().__init__(2, 2, 3)
            self.conv_offset = nn.Conv2d(2, 18, 3)

    model = nn.Module()
    model.dcn = DeformConv2d()
    optimizer = DefaultOptimizerConstructor(
        dict(type='SGD', lr=LR, weight_decay=WD),
        dict(dcn_offset_lr_mult=0.1, bias_lr_mult=2., bias_decay_mult=0.5))(model)
    assert [name for name, _ in model.named_parameters()] == [
        'dcn.weight', 'dcn.bias', 'dcn.conv_offset.weight', 'dcn.conv_offset.bias']
    # the DCN's own bias follows the bias rules (as MMCV); its offset layer only the DCN rule
    assert groups(optimizer) == [pytest.approx(g) for g in [
        (LR, WD), (2 * LR, 0.5 * WD), (0.1 * LR, WD), (0.1 * LR, WD)]]


def test_bad_configs_fail_when_the_constructor_is_built():
    with pytest.raises(TypeError, match='optimizer_cfg should be a dict'):
        DefaultOptimizerConstructor([])
    with pytest.raises(TypeError, match='paramwise_cfg should be None or a dict'):
        DefaultOptimizerConstructor(dict(lr=LR), ['error'])
    with pytest.raises(TypeError, match='custom_keys must be a dict'):
        DefaultOptimizerConstructor(dict(lr=LR), dict(custom_keys=[0.1]))
    for paramwise_cfg in (dict(norm_decay_mult=0.), dict(custom_keys={'a': dict(decay_mult=1.)})):
        with pytest.raises(ValueError, match='base_wd should not be None'):
            DefaultOptimizerConstructor(dict(type='SGD', lr=LR), paramwise_cfg)
    with pytest.raises(KeyError, match='NoSuchConstructor is not in the optimizer builder registry'):
        build_optimizer(Net(), dict(type='SGD', lr=LR, constructor='NoSuchConstructor'))


def test_a_registered_constructor_is_used_by_build_optimizer():
    @OPTIMIZER_BUILDERS.register_module(force=True)
    class HeadOnlyConstructor(DefaultOptimizerConstructor):
        def __call__(self, model):
            return OPTIMIZERS.build(dict(self.optimizer_cfg, params=model.head.parameters()))

    model = Net()
    optimizer = build_optimizer(model, dict(type='SGD', lr=LR, constructor='HeadOnlyConstructor'))
    assert optimizer.param_groups[0]['params'] == list(model.head.parameters())
    constructor = build_optimizer_constructor(dict(type='HeadOnlyConstructor',
                                                   optimizer_cfg=dict(type='Adam', lr=LR)))
    assert isinstance(constructor(model), torch.optim.Adam)


def test_minimm_train_builds_the_paramwise_groups_of_an_mmcv_config(tmp_path):
    config = tmp_path / 'paramwise.py'
    config.write_text(
        f"_base_ = [{os.path.join(REPO, 'minimm', 'configs', 'digits_mmcv1.py')!r}]\n"
        "optimizer = dict(type='SGD', lr=0.1, momentum=0.9, weight_decay=1e-4, paramwise_cfg=dict(\n"
        "    custom_keys={'head': dict(lr_mult=0.1, decay_mult=0.)}, norm_decay_mult=0.,\n"
        "    bias_lr_mult=2.))\n"
        "runner = dict(type='EpochBasedRunner', max_epochs=1)\n"
        "custom_hooks = []\n")
    main(['train', str(config), '--work-dir', str(tmp_path / 'work')])
    saved = torch.load(tmp_path / 'work' / 'epoch_1.pth', weights_only=True)['optimizer']
    # the checkpoint's groups, in named_parameters order: the lr each group started from (the
    # step schedule only scales it) and its weight decay
    got = [(g['initial_lr'], g['weight_decay'], g['momentum']) for g in saved['param_groups']]
    conv, bias, norm, head = (0.1, 1e-4), (0.2, 1e-4), (0.1, 0.), (0.01, 0.)
    expected = [conv, bias, norm, norm, conv, bias, norm, norm, head, head]  # backbone.0,1,4,5, head
    assert got == [pytest.approx(e + (0.9, )) for e in expected]
    # the step LR hook kept the ratios between the groups (warm-up done: factor 1)
    assert [g['lr'] for g in saved['param_groups']] == pytest.approx([e[0] for e in expected])


class ClipByValueOptimizerHook(OptimizerHook):
    """The kind of variant downstream repos write: clip each gradient element to
    [-clip_value, clip_value] between backward and step, and log how many were clipped."""

    def __init__(self, clip_value, **kwargs):
        super().__init__(**kwargs)
        self.clip_value = clip_value

    def after_train_iter(self, runner):
        runner.optimizer.zero_grad()
        runner.outputs['loss'].backward()
        grads = [p.grad for p in runner.model.parameters() if p.grad is not None]
        clipped = sum(int((g.abs() > self.clip_value).sum()) for g in grads)
        nn.utils.clip_grad_value_(runner.model.parameters(), self.clip_value)
        runner.log_buffer.update({'clipped': clipped}, runner.outputs['num_samples'])
        runner.optimizer.step()


def test_an_optimizer_hook_subclass_steps_as_plain_pytorch_does():
    clip = 0.05
    HOOKS.register_module(module=ClipByValueOptimizerHook, force=True)
    runner = make_runner(max_epochs=2)
    runner.register_optimizer_hook(dict(type='ClipByValueOptimizerHook', clip_value=clip))
    runner.run([loader(6, 2)], [('train', 2)])
    # the oracle: the same batches, stepped by hand
    model = ToyModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=runner.optimizer.defaults['lr'],
                                momentum=runner.optimizer.defaults['momentum'])
    clipped = []
    for _ in range(2):
        for batch in loader(6, 2):
            optimizer.zero_grad()
            model(**batch).backward()
            clipped.append(sum(int((p.grad.abs() > clip).sum()) for p in model.parameters()))
            for p in model.parameters():
                p.grad.clamp_(-clip, clip)
            optimizer.step()
    for a, b in zip(model.parameters(), runner.model.parameters()):
        torch.testing.assert_close(a, b)
    assert runner.log_buffer.val_history['clipped'] == clipped and any(clipped)
