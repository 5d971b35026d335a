"""MMEngine's checkpoint API (``minimm.runner.checkpoint``), ``Runner.scale_lr`` and the early
check of ``param_scheduler``."""
import re

import pytest
import torch
import torch.nn as nn
from torch.nn.parallel import DataParallel

from minimm.runner import (CheckpointLoader, get_state_dict, load_checkpoint, load_state_dict,
                           save_checkpoint)
from minimm.runner.checkpoint import (_load_checkpoint_with_prefix, load_from_local,
                                      load_from_http)
from minimm.optim import OptimWrapper
from toy import toy_runner


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
        self.head = nn.Linear(3, 1)


def _filled(value):
    net = Net()
    for tensor in net.state_dict().values():
        if tensor.is_floating_point():
            tensor.fill_(value)
    return net


def test_load_checkpoint_revises_keys_and_returns_the_file_as_read(tmp_path):
    path = str(tmp_path / 'net.pth')
    save_checkpoint(dict(state_dict=_filled(2.0).state_dict(), meta=dict(epoch=3)), path)

    class Wrapper(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = _filled(0.0)

    target = Wrapper()
    checkpoint = load_checkpoint(target, path, revise_keys=[(r'^', 'backbone.')])
    assert checkpoint['meta'] == dict(epoch=3) and 'body.0.weight' in checkpoint['state_dict']
    assert torch.equal(target.backbone.head.weight, torch.full((1, 3), 2.0))
    part = _load_checkpoint_with_prefix('body', path)
    assert sorted(part) == sorted(k[len('body.'):] for k in Net().state_dict()
                                  if k.startswith('body.'))
    with pytest.raises(AssertionError, match='neck. is not in the pretrained model'):
        _load_checkpoint_with_prefix('neck', path)


def test_module_versions_survive_save_and_load(tmp_path):
    """An old module version's keys are converted by the module on load (``_metadata``)."""

    class Old(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(1, 1)

    class New(nn.Module):
        _version = 2

        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(1, 1)

        def _load_from_state_dict(self, state_dict, prefix, local_metadata, *args):
            if local_metadata.get('version', 1) < 2:   # fc1 was renamed fc in version 2
                for key in [k for k in state_dict if k.startswith(prefix + 'fc1.')]:
                    state_dict[key.replace('fc1.', 'fc.')] = state_dict.pop(key)
            super()._load_from_state_dict(state_dict, prefix, local_metadata, *args)

    old, new = Old(), New()
    save_checkpoint(old.state_dict(), str(tmp_path / 'old.pth'))
    save_checkpoint(new.state_dict(), str(tmp_path / 'new.pth'))
    target = New()
    load_checkpoint(target, str(tmp_path / 'old.pth'), strict=True)
    assert torch.equal(target.fc.weight, old.fc1.weight)
    load_checkpoint(target, str(tmp_path / 'new.pth'), strict=True)  # version 2: no renaming
    assert torch.equal(target.fc.weight, new.fc.weight)


def test_load_state_dict_reports_once_and_post_hooks_may_forgive(tmp_path, capsys):
    net = Net()
    state = {k: v for k, v in Net().state_dict().items() if k != 'head.bias'}
    load_state_dict(net, state)  # no logger: printed, as MMEngine's print_log(logger=None)
    assert capsys.readouterr().out.count('missing keys in source state_dict: head.bias') == 1
    with pytest.raises(RuntimeError, match='missing keys in source state_dict: head.bias'):
        load_state_dict(net, state, strict=True)
    net.head.register_load_state_dict_post_hook(
        lambda module, keys: keys.missing_keys.remove('head.bias'))
    load_state_dict(net, state, strict=True)
    assert capsys.readouterr().out == ''


def test_get_state_dict_looks_through_wrappers_inside_the_model():
    net = Net()
    expected = net.state_dict()
    net.body = DataParallel(net.body)
    assert list(get_state_dict(DataParallel(net))) == list(expected)
    assert get_state_dict(net)._metadata['body'] == dict(version=nn.Sequential._version)


def test_checkpoint_loader_picks_the_longest_prefix_and_names_unsupported_schemes():
    def loader_name(path):
        return CheckpointLoader._get_checkpoint_loader(path).__name__

    assert loader_name('work_dirs/epoch_1.pth') == 'load_from_local'
    assert loader_name('https://host/x.pth') == 'load_from_http'
    assert loader_name('open-mmlab:s3://bucket/x.pth') == 'load_from_ceph'
    assert loader_name(' s3://x.pth') == 'load_from_local'   # a prefix matches at the start
    with pytest.raises(NotImplementedError, match=re.escape("'pavi://model/x.pth'")):
        CheckpointLoader.load_checkpoint('pavi://model/x.pth', logger='silent')

    def from_memory(filename, map_location=None):
        return dict(state_dict={}, source=filename)

    CheckpointLoader.register_scheme('mem://', from_memory)
    CheckpointLoader.register_scheme('mem://deep/', lambda filename, map_location=None: 'deep')
    try:
        assert CheckpointLoader.load_checkpoint('mem://x', logger='silent')['source'] == 'mem://x'
        assert CheckpointLoader.load_checkpoint('mem://deep/x', logger='silent') == 'deep'
        with pytest.raises(KeyError, match='already registered'):
            CheckpointLoader.register_scheme('mem://', from_memory)
    finally:
        for prefix in ('mem://', 'mem://deep/'):
            CheckpointLoader._schemes.pop(prefix)
    assert load_from_http.__name__ == 'load_from_http'


def test_local_paths_expand_the_home_folder(tmp_path, monkeypatch):
    monkeypatch.setenv('HOME', str(tmp_path))
    save_checkpoint(dict(x=torch.ones(1)), str(tmp_path / 'c.pth'))
    assert torch.equal(load_from_local('~/c.pth')['x'], torch.ones(1))


def test_save_checkpoint_refuses_file_backends(tmp_path):
    save_checkpoint({}, str(tmp_path / 'a.pth'), backend_args=dict(backend='local'))
    with pytest.raises(ValueError, match="backend may only be 'local' or 'disk'"):
        save_checkpoint({}, str(tmp_path / 'b.pth'), backend_args=dict(backend='petrel'))
    with pytest.raises(ValueError, match='the s3:// scheme needs a file backend'):
        save_checkpoint({}, 's3://bucket/c.pth')


def test_scale_lr_is_the_linear_rule(tmp_path):
    runner = toy_runner(tmp_path, val=False)   # batches of 4, one process
    for auto_scale_lr, lr in ((None, 0.1), (dict(enable=False, base_batch_size=16), 0.1),
                              (dict(enable=True, base_batch_size=16), 0.1 * 4 / 16)):
        wrapper = OptimWrapper(torch.optim.SGD(runner.model.parameters(), lr=0.1))
        runner.scale_lr(wrapper, auto_scale_lr)
        assert wrapper.param_groups[0]['lr'] == pytest.approx(lr)
    with pytest.raises(AssertionError, match='base_batch_size'):
        runner.scale_lr(wrapper, dict(enable=True))


def test_auto_scale_lr_applies_before_the_first_step(tmp_path):
    runner = toy_runner(tmp_path, val=False, auto_scale_lr=dict(enable=True, base_batch_size=2))
    runner.train()   # batch size 4 on one process: twice the configured lr
    assert runner.optim_wrapper.param_groups[0]['lr'] == pytest.approx(0.2)


@pytest.mark.parametrize('param_scheduler, error, match', [
    ('StepLR', TypeError, '`param_scheduler` should be a'),
    ([dict(type='StepLR', step_size=1), 'StepLR'], TypeError, "but got 'StepLR'"),
    (dict(linear1='error_type'), AssertionError, 'Each value of `param_scheduler`'),
])
def test_a_bad_param_scheduler_fails_when_the_runner_is_built(tmp_path, param_scheduler, error,
                                                               match):
    with pytest.raises(error, match=match):
        toy_runner(tmp_path, val=False, param_scheduler=param_scheduler)
