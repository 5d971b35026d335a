"""Checkpoints: atomic writes, max_keep_ckpts, save_best, last_checkpoint, resume == uninterrupted."""
import os
import os.path as osp
import re

import pytest
import torch

from minimm.checkpoint import find_latest_checkpoint, load_checkpoint_file, save_checkpoint
from minimm.hooks import Hook
from minimm.registry import HOOKS
from toy import RecordHook, ScriptedMetric, toy_loader, toy_loader_cfg, toy_runner


def _files(folder):
    return sorted(f for f in os.listdir(folder) if f.endswith('.pth'))


def test_atomic_save_keeps_old_file_on_failure(tmp_path, monkeypatch):
    path = str(tmp_path / 'a.pth')
    save_checkpoint({'x': torch.ones(2)}, path)

    def broken_save(obj, f):
        f.write(b'half a file')
        raise RuntimeError('disk full')

    monkeypatch.setattr(torch, 'save', broken_save)
    with pytest.raises(RuntimeError, match='disk full'):
        save_checkpoint({'x': torch.zeros(2)}, path)
    monkeypatch.undo()
    assert torch.equal(load_checkpoint_file(path)['x'], torch.ones(2))
    assert os.listdir(tmp_path) == ['a.pth']  # no temporary file left behind


def test_max_keep_ckpts_and_last_checkpoint(tmp_path):
    runner = toy_runner(tmp_path, max_=4, val=False, default_hooks=dict(
        checkpoint=dict(type='CheckpointHook', interval=1, max_keep_ckpts=2)))
    runner.train()
    assert _files(tmp_path) == ['epoch_3.pth', 'epoch_4.pth']
    assert find_latest_checkpoint(str(tmp_path)) == str(tmp_path / 'epoch_4.pth')
    ckpt = load_checkpoint_file(str(tmp_path / 'epoch_4.pth'))   # weights_only=True
    assert set(ckpt) == {'meta', 'state_dict', 'message_hub', 'optimizer'}
    assert ckpt['meta']['epoch'] == 4 and ckpt['meta']['iter'] == 12
    assert ckpt['meta']['seed'] == 0


def test_interval_save_begin_and_iter_based(tmp_path):
    runner = toy_runner(tmp_path / 'e', max_=5, val=False, default_hooks=dict(
        checkpoint=dict(type='CheckpointHook', interval=2, save_begin=2, save_last=False)))
    runner.train()
    # Saved when (epoch - save_begin) % interval == 0, epochs counted from 1: 2 and 4.
    assert _files(tmp_path / 'e') == ['epoch_2.pth', 'epoch_4.pth']
    runner = toy_runner(tmp_path / 'i', by_epoch=False, max_=7, val=False, default_hooks=dict(
        checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=3)))
    runner.train()
    assert _files(tmp_path / 'i') == ['iter_3.pth', 'iter_6.pth', 'iter_7.pth']


@pytest.mark.parametrize('by_epoch', [True, False])
def test_save_begin_is_the_first_save_and_interval_counts_from_it(tmp_path, by_epoch):
    # save_begin=3 with interval=2 saves at 3 and 5; a hook ignoring save_begin would save at 2,
    # 4 and 6, one shifting it by one at 4 and 6 (save_begin=2 could not tell these apart).
    runner = toy_runner(tmp_path, by_epoch=by_epoch, max_=6, val=False, default_hooks=dict(
        checkpoint=dict(type='CheckpointHook', by_epoch=by_epoch, interval=2, save_begin=3,
                        save_last=False)))
    runner.train()
    name = 'epoch_{}.pth' if by_epoch else 'iter_{}.pth'
    assert _files(tmp_path) == [name.format(3), name.format(5)]


@pytest.mark.parametrize('rule, scores', [('greater', [70, 70, 60]), ('less', [0.5, 0.5, 0.7])])
def test_save_best_keeps_the_first_of_tied_scores(tmp_path, rule, scores):
    # MMEngine's rules are strict (x > y, x < y): an equal score is no improvement, so the best
    # file stays the one of the epoch that first reached it.
    runner = toy_runner(tmp_path, max_=3, val_evaluator=ScriptedMetric(scores),
                        val_dataloader=toy_loader(8, 4), val_cfg=dict(), val=False,
                        default_hooks=dict(checkpoint=dict(
                            type='CheckpointHook', interval=1, save_best='toy/acc', rule=rule)))
    runner.train()
    assert [f for f in _files(tmp_path) if f.startswith('best_')] == ['best_toy_acc_epoch_1.pth']
    assert runner.message_hub.get_info('best_score') == scores[0]


def test_save_best_keeps_one_best_file(tmp_path):
    runner = toy_runner(tmp_path, max_=4, val_evaluator=ScriptedMetric([50, 70, 60, 80]),
                        val_dataloader=toy_loader(8, 4), val_cfg=dict(), val=False,
                        default_hooks=dict(checkpoint=dict(
                            type='CheckpointHook', interval=1, max_keep_ckpts=1,
                            save_best='auto')))
    runner.train()
    assert _files(tmp_path) == ['best_toy_acc_epoch_4.pth', 'epoch_4.pth']
    best = load_checkpoint_file(str(tmp_path / 'best_toy_acc_epoch_4.pth'))
    assert 'optimizer' not in best
    hub = runner.message_hub
    assert hub.get_info('best_score') == 80
    assert hub.get_info('best_ckpt') == str(tmp_path / 'best_toy_acc_epoch_4.pth')
    # The periodic checkpoint was re-saved after the best one, so it records the new best.
    last = load_checkpoint_file(str(tmp_path / 'epoch_4.pth'))
    assert last['message_hub']['runtime_info']['best_score'] == 80


def test_save_best_less_rule_and_several_keys(tmp_path):
    runner = toy_runner(tmp_path, max_=3, val_evaluator=ScriptedMetric([50, 40, 60]),
                        val_dataloader=toy_loader(8, 4), val_cfg=dict(), val=False,
                        default_hooks=dict(checkpoint=dict(
                            type='CheckpointHook', interval=10, save_last=False,
                            save_best=['toy/acc', 'toy/loss'], rule=['greater', 'less'])))
    runner.train()
    assert _files(tmp_path) == ['best_toy_acc_epoch_3.pth', 'best_toy_loss_epoch_1.pth']


class _Crash(Hook):
    """Simulates a crash right after the checkpoint of epoch ``at`` is written."""

    priority = 'LOWEST'

    def __init__(self, at):
        self.at = at

    def after_train_epoch(self, runner):
        if runner.epoch + 1 == self.at:
            raise KeyboardInterrupt('simulated crash')


def _train(work_dir, resume=False, crash_at=None):
    runner = toy_runner(work_dir, max_=4, val=False, resume=resume,
                        custom_hooks=[_Crash(crash_at)] if crash_at else [],
                        train_dataloader=toy_loader_cfg(12, 4, shuffle=True),
                        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1, momentum=0.9)),
                        param_scheduler=[dict(type='LinearLR', start_factor=0.5, by_epoch=False,
                                              end=4),
                                         dict(type='StepLR', step_size=1, gamma=0.5)])
    runner.train()
    return runner


def test_resume_after_crash_gives_identical_weights(tmp_path):
    straight = _train(tmp_path / 'a')
    with pytest.raises(KeyboardInterrupt):
        _train(tmp_path / 'b', crash_at=2)
    assert find_latest_checkpoint(str(tmp_path / 'b')) == str(tmp_path / 'b' / 'epoch_2.pth')
    resumed = _train(tmp_path / 'b', resume=True)
    assert resumed.epoch == 4 and resumed.iter == 12
    for (k, a), (_, b) in zip(straight.model.state_dict().items(),
                              resumed.model.state_dict().items()):
        assert torch.equal(a, b), k
    assert straight.optim_wrapper.get_lr() == resumed.optim_wrapper.get_lr()
    assert _files(tmp_path / 'b') == _files(tmp_path / 'a')


def test_load_from_loads_weights_only(tmp_path):
    first = toy_runner(tmp_path / 'a', max_=1, val=False)
    first.train()
    ckpt = str(tmp_path / 'a' / 'epoch_1.pth')
    second = toy_runner(tmp_path / 'b', max_=1, val=False, load_from=ckpt)
    second.load_or_resume()
    for a, b in zip(first.model.state_dict().values(), second.model.state_dict().values()):
        assert torch.equal(a, b)
    assert second.epoch == 0
    assert osp.exists(ckpt)


def test_published_keys_after_train(tmp_path):
    runner = toy_runner(tmp_path, max_=2, val_evaluator=ScriptedMetric([60, 50]),
                        val_dataloader=toy_loader(8, 4), val_cfg=dict(), val=False,
                        default_hooks=dict(checkpoint=dict(
                            type='CheckpointHook', interval=1, save_best='auto',
                            published_keys=['meta', 'state_dict'])))
    assert '(VERY_LOW    ) CheckpointHook' in runner.get_hooks_info().split('after_train:')[1]
    runner.train()
    published = [f for f in _files(tmp_path) if '-' in f]
    # The last and the best checkpoints, each as '{name}-{8 hex digits of a sha256}.pth'.
    assert [re.sub('-[0-9a-f]{8}.pth$', '-SHA.pth', f) for f in published] == [
        'best_toy_acc_epoch_1-SHA.pth', 'epoch_2-SHA.pth']
    for name in published:
        ckpt = load_checkpoint_file(str(tmp_path / name))
        source = load_checkpoint_file(str(tmp_path / (name.split('-')[0] + '.pth')))
        assert list(ckpt) == ['meta', 'state_dict']
        assert ckpt['meta'] == source['meta']
    with pytest.raises(TypeError, match='published_keys'):
        HOOKS.build(dict(type='CheckpointHook', published_keys=[1]))


def test_resume_without_checkpoint_retries_in_later_val(tmp_path):
    """resume=True with nothing to resume: as MMEngine, a later val()/test() on the same runner
    resumes from the checkpoint that training wrote."""
    record = RecordHook()
    runner = toy_runner(tmp_path, max_=1, resume=True, custom_hooks=[record])
    runner.train()
    assert 'after_load_checkpoint' not in [c[0] for c in record.calls]
    record.calls.clear()
    runner.val()
    assert [c[0] for c in record.calls][:3] == ['before_run', 'after_load_checkpoint',
                                               'before_val']
    # The (empty) config is dumped as MMEngine does: '{timestamp}.py' in the work dir.
    with open(tmp_path / f'{runner.timestamp}.py') as f:
        assert f.read() == '\n'


def test_resume_warns_on_other_dataset_and_missing_schedulers(tmp_path, capsys):
    first = toy_runner(tmp_path, max_=1, val=False)
    first.train()
    other = toy_loader(12, 4)
    other.dataset.metainfo = dict(classes=('a', 'b', 'c'))
    resumed = toy_runner(tmp_path, max_=2, val=False, resume=True, train_dataloader=other)
    capsys.readouterr()
    resumed.train()
    printed = capsys.readouterr().out   # the runner's logger prints to the console
    assert 'dataset metainfo from the resumed checkpoint is different' in printed
    assert 'no parameter schedulers, so none are resumed' in printed
