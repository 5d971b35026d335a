"""minimm's two EMA extras, hooks beside EMAHook: EMAOnlyCheckpointHook (``*_ema.pth`` twins of
every checkpoint, found through CheckpointHook's MessageHub records) and RawWeightsEvalHook (the
raw weights validated too, as ``val/raw/<name>``).

Oracles: the regular checkpoint files themselves (a twin holds their ``meta`` and ``state_dict``),
and an accuracy computed here by hand from the raw and the averaged weights.
"""
import glob
import os

import pytest
import torch

from minimm.hooks import EMAHook, Hook
from toy import ScriptedMetric, ToyMetric, toy_loader, toy_runner

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py


def _names(folder):
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(str(folder), '*.pth')))


def _load(path):
    return torch.load(path, weights_only=True)


def _assert_twin(folder, name):
    regular = _load(os.path.join(str(folder), name))
    twin = _load(os.path.join(str(folder), name[:-len('.pth')] + '_ema.pth'))
    assert list(twin) == ['meta', 'state_dict']
    assert twin['meta'] == regular['meta']
    assert list(twin['state_dict']) == list(regular['state_dict'])
    for key, value in regular['state_dict'].items():
        assert torch.equal(twin['state_dict'][key], value), key


def _ema_and_twins(**ema):
    return [dict(type='EMAHook', momentum=0.1, **ema), dict(type='EMAOnlyCheckpointHook')]


def test_twins_follow_max_keep_ckpts_by_epoch(tmp_path):
    runner = toy_runner(tmp_path, max_=3, custom_hooks=_ema_and_twins(),
                        default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=1,
                                                           max_keep_ckpts=1)))
    runner.train()
    assert _names(tmp_path) == ['epoch_3.pth', 'epoch_3_ema.pth']
    _assert_twin(tmp_path, 'epoch_3.pth')
    assert _load(tmp_path / 'epoch_3_ema.pth')['meta']['epoch'] == 3
    # The twin holds the EMA weights: the averaged model's, not the model's.
    ema_model = next(h for h in runner.hooks if isinstance(h, EMAHook)).ema_model.module
    twin = _load(tmp_path / 'epoch_3_ema.pth')['state_dict']
    for key, value in ema_model.state_dict().items():
        assert torch.equal(twin[key], value), key
    assert not torch.equal(twin['linear.weight'], runner.model.linear.weight.detach())


def test_twins_by_iteration(tmp_path):
    toy_runner(tmp_path, by_epoch=False, max_=6, val=False, custom_hooks=_ema_and_twins(),
               default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=2,
                                                  by_epoch=False, max_keep_ckpts=2))).train()
    assert _names(tmp_path) == ['iter_4.pth', 'iter_4_ema.pth', 'iter_6.pth', 'iter_6_ema.pth']
    _assert_twin(tmp_path, 'iter_4.pth')
    _assert_twin(tmp_path, 'iter_6.pth')


def test_the_best_checkpoint_gets_a_twin_and_the_replaced_one_loses_it(tmp_path):
    toy_runner(tmp_path, max_=3, val=False, val_dataloader=toy_loader(8, 4), val_cfg=dict(),
               val_evaluator=ScriptedMetric([1, 3, 2]), custom_hooks=_ema_and_twins(),
               default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=1,
                                                  max_keep_ckpts=1, save_best='toy/acc',
                                                  rule='greater'))).train()
    assert _names(tmp_path) == ['best_toy_acc_epoch_2.pth', 'best_toy_acc_epoch_2_ema.pth',
                                'epoch_3.pth', 'epoch_3_ema.pth']
    _assert_twin(tmp_path, 'best_toy_acc_epoch_2.pth')
    _assert_twin(tmp_path, 'epoch_3.pth')


def test_a_resumed_run_keeps_writing_twins(tmp_path):
    checkpoint = dict(checkpoint=dict(type='CheckpointHook', interval=1))
    toy_runner(tmp_path, max_=1, custom_hooks=_ema_and_twins(), default_hooks=checkpoint).train()
    toy_runner(tmp_path, max_=2, custom_hooks=_ema_and_twins(), default_hooks=checkpoint,
               resume=True).train()
    assert _names(tmp_path) == ['epoch_1.pth', 'epoch_1_ema.pth', 'epoch_2.pth',
                                'epoch_2_ema.pth']
    _assert_twin(tmp_path, 'epoch_1.pth')
    _assert_twin(tmp_path, 'epoch_2.pth')


def _accuracy(model):
    metric = ToyMetric()
    model.eval()
    with torch.no_grad():
        for batch in toy_loader(8, 4):
            metric.process(batch, model.val_step(batch))
    return metric.compute_metrics(metric.results)['acc']


class _CountValIters(Hook):
    def __init__(self):
        self.val_iters = 0
        self.metrics = []

    def after_val_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self.val_iters += 1

    def after_val_epoch(self, runner, metrics=None):
        self.metrics.append(dict(metrics))


def test_raw_weights_are_evaluated_beside_the_ema(tmp_path):
    counter = _CountValIters()
    runner = toy_runner(tmp_path, max_=2, custom_hooks=[
        dict(type='EMAHook', momentum=0.05, priority=49), dict(type='RawWeightsEvalHook'),
        counter])
    runner.train()
    hub = runner.message_hub
    ema_model = next(h for h in runner.hooks if isinstance(h, EMAHook)).ema_model.module
    raw, ema = _accuracy(runner.model), _accuracy(ema_model)
    assert raw != ema  # else the test could not tell them apart
    assert hub.get_scalar('val/raw/toy/acc').current() == raw
    assert hub.get_scalar('val/toy/acc').current() == ema
    assert len(hub.get_scalar('val/raw/toy/acc').data[0]) == 2  # one value per validation
    with open(os.path.join(runner.log_dir, f'{runner.timestamp}.log')) as f:
        assert 'raw/toy/acc:' in f.read()
    # The second pass calls no per-iteration hooks (2 validations of 2 batches), and the
    # epoch's metrics stay the EMA's.
    assert counter.val_iters == 4
    assert counter.metrics[-1] == {'toy/acc': ema}


@pytest.mark.parametrize('hooks, message', [
    ([dict(type='RawWeightsEvalHook')], 'needs an EMAHook'),
    ([dict(type='EMAOnlyCheckpointHook')], 'needs an EMAHook'),
    ([dict(type='EMAHook'), dict(type='RawWeightsEvalHook', priority='LOW')],
     'must run before EMAHook'),
    ([dict(type='EMAHook'), dict(type='EMAOnlyCheckpointHook', priority='NORMAL')],
     'must run after CheckpointHook'),
])
def test_a_misplaced_extra_fails_at_the_start(tmp_path, hooks, message):
    runner = toy_runner(tmp_path, max_=1, custom_hooks=hooks)
    with pytest.raises(ValueError, match=message):
        runner.train()


@pytest.mark.parametrize('old, new', [('save_ema_checkpoint', 'EMAOnlyCheckpointHook'),
                                      ('eval_raw_and_ema', 'RawWeightsEvalHook')])
def test_the_old_emahook_options_name_their_hook(old, new):
    with pytest.raises(TypeError, match=new):
        EMAHook(**{old: True})
