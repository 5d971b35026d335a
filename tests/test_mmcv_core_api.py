"""The helpers downstream MMCV 1.x code imports from around the runner, under MMCV's names:
``mmcv.parallel``'s wrappers, the checkpoint functions, ``RUNNER_BUILDERS``, ``dist_utils``.
Oracles: plain PyTorch (``state_dict``, ``DataParallel``) and MMCV 1.7's documented behaviour."""
import logging

import pytest
import torch
from torch import nn
from torch.nn.parallel import DataParallel

from minimm.mmcv import (RUNNER_BUILDERS, RUNNERS, EpochBasedRunner, _load_checkpoint,
                         _load_checkpoint_with_prefix, allreduce_grads, allreduce_params,
                         build_runner, load_checkpoint, load_state_dict, save_checkpoint,
                         weights_to_cpu)
from minimm.mmcv.checkpoint import get_state_dict
from minimm.mmcv.parallel import MODULE_WRAPPERS, MMDataParallel, is_module_wrapper
from dist_utils import run_distributed
from mmcv_toy import ToyModel


class WithExtraBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
        self.register_buffer('scratch', torch.arange(3.), persistent=False)
        self.CLASSES = ('cat', 'dog')


def test_is_module_wrapper_knows_torchs_wrappers_and_registered_ones():
    model = ToyModel()
    assert not is_module_wrapper(model)
    assert is_module_wrapper(DataParallel(model)) and is_module_wrapper(MMDataParallel(model))

    @MODULE_WRAPPERS.register_module(force=True)
    class MyWrapper(nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module

    assert is_module_wrapper(MyWrapper(model))


def test_mmdataparallel_steps_through_the_module_on_the_cpu():
    if torch.cuda.is_available():
        pytest.skip('checks the CPU path (no device_ids)')
    model = ToyModel()
    batch = dict(x=torch.ones(2, 3), y=torch.zeros(2, 1))
    wrapped = MMDataParallel(model)
    assert wrapped.device_ids == []
    assert wrapped.train_step(batch, None)['loss'].item() == pytest.approx(
        model.train_step(batch, None)['loss'].item())
    assert wrapped.val_step(batch)['num_samples'] == 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a GPU')
def test_mmdataparallel_moves_the_batch_to_its_gpu():
    model = ToyModel().cuda()
    batch = dict(x=torch.ones(2, 3), y=torch.zeros(2, 1))  # on the CPU
    outputs = MMDataParallel(model, device_ids=[0]).train_step(batch, None)
    assert outputs['loss'].device.type == 'cuda'


def test_get_state_dict_is_state_dict_plus_every_buffer_and_unwraps():
    model = WithExtraBuffer()
    expected = list(model.state_dict()) + ['scratch']  # torch skips the non-persistent one
    state = get_state_dict(DataParallel(model))
    assert sorted(state) == sorted(expected)
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    assert state._metadata['backbone.1']['version'] == nn.BatchNorm1d._version


def test_save_checkpoint_writes_meta_weights_and_optimizers(tmp_path):
    model = WithExtraBuffer()
    optimizers = dict(a=torch.optim.SGD(model.parameters(), lr=0.1))
    path = str(tmp_path / 'ckpt.pth')
    save_checkpoint(DataParallel(model), path, optimizer=optimizers, meta=dict(epoch=3))
    checkpoint = torch.load(path, weights_only=True)
    assert checkpoint['meta']['epoch'] == 3 and checkpoint['meta']['mmcv_version'] == '1.7.2'
    assert checkpoint['meta']['CLASSES'] == ('cat', 'dog')
    assert set(checkpoint['optimizer']) == {'a'}
    assert torch.equal(checkpoint['state_dict']['scratch'], torch.arange(3.))
    with pytest.raises(TypeError, match='meta must be a dict or None'):
        save_checkpoint(model, path, meta=[1])


def test_load_checkpoint_revises_keys_and_returns_the_whole_file(tmp_path):
    source, target = WithExtraBuffer(), WithExtraBuffer()
    with torch.no_grad():
        source.backbone[0].weight.fill_(0.5)
    path = str(tmp_path / 'plain.pth')
    torch.save({f'module.{k}': v for k, v in source.state_dict().items()}, path)  # a bare dict
    checkpoint = load_checkpoint(target, path)
    assert 'module.backbone.0.weight' in checkpoint
    assert torch.equal(target.backbone[0].weight, source.backbone[0].weight)
    assert set(_load_checkpoint(path)) == set(checkpoint)
    with pytest.raises(FileNotFoundError):
        load_checkpoint(target, str(tmp_path / 'missing.pth'))


def test_load_checkpoint_with_prefix_strips_it(tmp_path):
    model = WithExtraBuffer()
    path = str(tmp_path / 'ckpt.pth')
    save_checkpoint(model, path)
    state = _load_checkpoint_with_prefix('backbone', path)
    assert sorted(state) == sorted(model.backbone.state_dict())
    with pytest.raises(AssertionError, match='neck. is not in the pretrained model'):
        _load_checkpoint_with_prefix('neck', path)


def test_load_state_dict_reports_as_mmcv(capsys):
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    state = {k: v for k, v in model.state_dict().items() if 'num_batches_tracked' not in k}
    load_state_dict(model, state, strict=True)  # a missing num_batches_tracked is no error
    state['extra'] = torch.zeros(1)
    del state['0.bias']
    with pytest.raises(RuntimeError, match=r'(?s)unexpected key in source state_dict: extra.*'
                                           r'missing keys in source state_dict: 0\.bias'):
        load_state_dict(model, state, strict=True)
    load_state_dict(model, state)  # not strict, no logger: printed
    assert 'do not match exactly' in capsys.readouterr().out


def test_weights_to_cpu_keeps_the_metadata():
    state = nn.Linear(2, 2).state_dict()
    assert weights_to_cpu(state)._metadata == state._metadata


def test_a_runner_constructor_from_the_registry_builds_the_runner():
    @RUNNER_BUILDERS.register_module(force=True)
    class NamingConstructor:
        def __init__(self, runner_cfg, default_args=None):
            self.runner_cfg, self.default_args = runner_cfg, default_args

        def __call__(self):
            runner = RUNNERS.build(self.runner_cfg, default_args=self.default_args)
            runner.my_name = 'named'
            return runner

    cfg = dict(type='EpochBasedRunner', max_epochs=1, constructor='NamingConstructor')
    runner = build_runner(cfg, default_args=dict(model=ToyModel(), logger=logging.getLogger()))
    assert isinstance(runner, EpochBasedRunner) and runner.my_name == 'named'
    assert 'constructor' in cfg  # the caller's config is not changed
    with pytest.raises(KeyError, match='Nope is not in the runner builder registry'):
        build_runner(dict(cfg, constructor='Nope'))


def _allreduce_on_two_ranks(rank):
    params = [torch.full((2, ), float(rank + 1)), torch.full((3, ), 10. * (rank + 1))]
    grad_owner = nn.Linear(1, 1)
    grad_owner.weight.grad = torch.full((1, 1), 2. * (rank + 1))
    grad_owner.bias.requires_grad_(False)  # no gradient taken: left alone
    allreduce_params(params)
    allreduce_grads(list(grad_owner.parameters()))
    return params, grad_owner.weight.grad


def test_allreduce_params_and_grads_average_over_the_ranks(tmp_path):
    for params, grad in run_distributed(_allreduce_on_two_ranks, tmp_path):
        assert torch.equal(params[0], torch.full((2, ), 1.5))  # (1 + 2) / 2
        assert torch.equal(params[1], torch.full((3, ), 15.))
        assert torch.equal(grad, torch.full((1, 1), 3.))


def test_allreduce_on_one_process_changes_nothing():
    model = ToyModel()
    model(torch.ones(2, 3), torch.zeros(2, 1)).backward()
    before = [p.grad.clone() for p in model.parameters()]
    allreduce_grads(list(model.parameters()))
    allreduce_params(list(model.parameters()))
    assert all(torch.equal(a, p.grad) for a, p in zip(before, model.parameters()))
