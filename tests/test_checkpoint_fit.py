"""A checkpoint that cannot stand for the model is named before anything runs (issue 39): weights
of another shape (to test, validate or resume), NaN or inf weights, and a checkpoint that lacks
what resuming reads."""
import os.path as osp

import pytest
import torch.nn as nn

from minimm.checkpoint import check_fit, load_checkpoint_file, save_checkpoint
from minimm.runner import Runner
from toy import ScriptedMetric, ToyModel, toy_loader, toy_runner

pytestmark = pytest.mark.ops_backend  # toy_runner's model trains through the ops


class WideToy(ToyModel):
    """The same weight names as ToyModel, with 3 classes: every weight of the head differs."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)
        self.bn = nn.BatchNorm1d(3)


def _tester(work_dir, checkpoint, model=None, **kwargs):
    return Runner(model=model or ToyModel(), work_dir=str(work_dir), load_from=str(checkpoint),
                  **kwargs, test_dataloader=toy_loader(8, 4), test_cfg=dict(),
                  test_evaluator=ScriptedMetric([50.0]), val_dataloader=toy_loader(8, 4),
                  val_cfg=dict(), val_evaluator=ScriptedMetric([50.0]))


@pytest.fixture
def trained(tmp_path):
    toy_runner(tmp_path / 'a', max_=1, val=False).train()
    return str(tmp_path / 'a' / 'epoch_1.pth')


@pytest.mark.parametrize('mode', ['test', 'val'])
def test_testing_a_checkpoint_of_other_shapes_names_them_and_stops(tmp_path, trained, mode):
    runner = _tester(tmp_path / 'b', trained, WideToy())
    with pytest.raises(ValueError) as info:
        getattr(runner, mode)()
    assert str(info.value) == (
        f'cannot {mode} from checkpoint {trained!r}: 6 of its weights have another shape than '
        'in the model (WideToy): linear.weight [2, 4] (model: [3, 4]), linear.bias [2] '
        '(model: [3]), bn.weight [2] (model: [3]), ...; give a checkpoint of this model')


def test_other_shapes_are_named_before_ema_hook_loads_its_copy(tmp_path, trained):
    runner = _tester(tmp_path / 'b', trained, WideToy(), custom_hooks=[dict(type='EMAHook')])
    with pytest.raises(ValueError, match=r'^cannot test from checkpoint .*6 of its weights'):
        runner.test()
    with open(osp.join(runner.log_dir, f'{runner.timestamp}.log')) as f:
        assert 'do not match exactly' not in f.read()  # the EMA copy's load never started


def test_a_checkpoint_with_nan_weights_is_named_with_the_count(tmp_path, trained):
    checkpoint = load_checkpoint_file(trained)
    checkpoint['state_dict']['linear.weight'][0, :3] = float('nan')
    checkpoint['state_dict']['bn.running_var'][1] = float('inf')
    broken = str(tmp_path / 'nan.pth')
    save_checkpoint(checkpoint, broken)
    with pytest.raises(ValueError) as info:
        _tester(tmp_path / 'b', broken).test()
    assert str(info.value) == (
        f'cannot test from checkpoint {broken!r}: 2 of its tensors hold NaN or inf values: '
        'linear.weight (3 of 8), bn.running_var (1 of 2); give a checkpoint written before '
        'training diverged')
    with pytest.raises(ValueError, match=r'^cannot resume from .*linear.weight \(3 of 8\)'):
        toy_runner(tmp_path / 'c', max_=2, val=False, resume=broken).train()


def test_a_fitting_checkpoint_is_tested(tmp_path, trained):
    assert _tester(tmp_path / 'b', trained).test() == {'toy/acc': 50.0, 'toy/loss': 1.0}
    check_fit(ToyModel(), load_checkpoint_file(trained)['state_dict'], trained, purpose='test')


@pytest.mark.parametrize('drop, missing', [(('message_hub',), 'message_hub'),
                                           (('meta.epoch', 'meta.iter'), 'meta.epoch, meta.iter')])
def test_resuming_a_checkpoint_without_the_runs_state_names_what_is_missing(tmp_path, trained,
                                                                            drop, missing):
    checkpoint = load_checkpoint_file(trained)
    for key in drop:
        if key.startswith('meta.'):
            del checkpoint['meta'][key[5:]]
        else:
            del checkpoint[key]
    path = str(tmp_path / 'partial.pth')
    save_checkpoint(checkpoint, path)
    runner = toy_runner(tmp_path / 'r', max_=2, val=False, resume=path)
    with pytest.raises(ValueError) as info:
        runner.train()
    assert str(info.value) == (
        f'cannot resume from {path!r}: it lacks {missing}, which a Runner writes into every '
        'checkpoint (is it from another tool?); start from its weights with load_from, or '
        'test it')
    assert osp.isfile(path)
    # Its weights are fine for load_from.
    toy_runner(tmp_path / 'l', max_=1, val=False, load_from=path).train()
    assert osp.isfile(tmp_path / 'l' / 'epoch_1.pth')
