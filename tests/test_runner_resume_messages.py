"""Resume messages that say what happened (issue 24, item 5): no checkpoint, the checkpoint
actually loaded after a fallback, a directory or a config passed as a checkpoint, and the MMCV
side's fallback from an unreadable latest.pth."""
import os

import pytest
import torch

from minimm.checkpoint import CheckpointError, save_checkpoint
from minimm.cli import DEMO_CONFIG
from minimm.config import ConfigDict
from minimm.mmcv import train as mmcv_train
from minimm.mmcv.resume_fallback import newest_readable_checkpoint
from minimm.runner.world_size import world_size_change_message
from toy import toy_runner

pytestmark = pytest.mark.ops_backend  # toy_runner's model trains through the ops


def _log_text(runner):
    with open(os.path.join(runner.log_dir, f'{runner.timestamp}.log')) as f:
        return f.read()


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def test_auto_resume_without_a_checkpoint_says_there_is_none(tmp_path):
    runner = toy_runner(tmp_path, max_=1, val=False, resume=True)
    runner.load_or_resume()
    log = _log_text(runner)
    assert 'has no checkpoint yet: nothing to resume' in log
    assert 'checkpoint None' not in log


def test_the_message_names_the_checkpoint_loaded_after_a_fallback(tmp_path):
    toy_runner(tmp_path, max_=3, val=False).train()
    _truncate(tmp_path / 'epoch_3.pth')
    resumed = toy_runner(tmp_path, max_=3, val=False, resume=True)
    resumed.load_or_resume()
    log = _log_text(resumed)
    assert 'Auto resumed from the latest checkpoint' not in log
    said = log.index(f"Auto resumed from {tmp_path / 'epoch_2.pth'}, the newest checkpoint that "
                     f"could be read (the latest, {tmp_path / 'epoch_3.pth'}, could not).")
    assert log.index(f"cannot read checkpoint '{tmp_path / 'epoch_3.pth'}'") < said

    fine = toy_runner(tmp_path / 'ok', max_=1, val=False)
    fine.train()
    again = toy_runner(tmp_path / 'ok', max_=1, val=False, resume=True)
    again.load_or_resume()
    assert f"Auto resumed from the latest checkpoint {tmp_path / 'ok' / 'epoch_1.pth'}." in \
        _log_text(again)


def test_a_directory_given_to_resume_is_called_a_directory(tmp_path):
    runner = toy_runner(tmp_path / 'w', max_=1, val=False, resume=str(tmp_path))
    with pytest.raises(CheckpointError, match=f"'{tmp_path}' is a directory, not a checkpoint "
                                              r'file.*`--resume` without a path'):
        runner.load_or_resume()


@pytest.mark.parametrize('trusted', [False, True])
def test_a_config_given_as_a_checkpoint_is_named(tmp_path, trusted):
    runner = toy_runner(tmp_path, max_=1, val=False,
                        load_from=dict(path=DEMO_CONFIG, trusted=trusted))
    with pytest.raises(CheckpointError) as info:
        runner.load_or_resume()
    assert str(info.value) == (f'cannot read checkpoint {DEMO_CONFIG!r}: it is a Python file '
                               '(a config?), not a checkpoint')
    other = tmp_path / 'notes.txt'
    other.write_text('hello')
    with pytest.raises(CheckpointError, match="starts with b'hell', not like a file written by "
                                              'torch.save'):
        toy_runner(tmp_path / 'b', max_=1, val=False, load_from=str(other)).load_or_resume()


def _mmcv_checkpoints(folder):
    for epoch in (1, 2, 3):
        save_checkpoint({'meta': dict(epoch=epoch), 'state_dict': {'w': torch.ones(1)}},
                        str(folder / f'epoch_{epoch}.pth'))
    os.symlink('epoch_3.pth', folder / 'latest.pth')  # as MMCV's save_checkpoint links it


def test_mmcv_resume_falls_back_from_an_unreadable_latest(tmp_path, monkeypatch):
    _mmcv_checkpoints(tmp_path)
    assert newest_readable_checkpoint(str(tmp_path / 'latest.pth')) == str(tmp_path / 'latest.pth')
    _truncate(tmp_path / 'epoch_3.pth')
    with pytest.warns(UserWarning, match=f"(?s)cannot read checkpoint '{tmp_path / 'latest.pth'}'"
                                         f".*Resuming from {tmp_path / 'epoch_2.pth'} instead"):
        chosen = newest_readable_checkpoint(str(tmp_path / 'latest.pth'))
    assert chosen == str(tmp_path / 'epoch_2.pth')  # epoch_3.pth (the link's target) is not retried

    resumed_from = []
    monkeypatch.setattr(mmcv_train, 'train_model',
                        lambda cfg, distributed: resumed_from.append(cfg['resume_from']))
    with pytest.warns(UserWarning, match='Resuming from'):
        mmcv_train.train_from_cfg(ConfigDict(work_dir=str(tmp_path)), resume='auto')
    assert resumed_from == [str(tmp_path / 'epoch_2.pth')]

    for name in ('epoch_1.pth', 'epoch_2.pth'):
        _truncate(tmp_path / name)
    with pytest.raises(CheckpointError, match='no readable checkpoint to resume from'):
        newest_readable_checkpoint(str(tmp_path / 'latest.pth'))


def test_load_from_with_another_head_reports_model_and_ema_once_each_labelled(tmp_path):
    toy_runner(tmp_path / 'a', max_=1, val=False).train()
    checkpoint = torch.load(tmp_path / 'a' / 'epoch_1.pth', weights_only=True)
    checkpoint['state_dict']['linear.weight'] = torch.zeros(3, 4)  # a head with 3 classes
    checkpoint['state_dict']['linear.bias'] = torch.zeros(3)
    torch.save(checkpoint, tmp_path / 'three_classes.pth')
    runner = toy_runner(tmp_path / 'b', max_=1, val=False, custom_hooks=[dict(type='EMAHook')],
                        load_from=str(tmp_path / 'three_classes.pth'))
    runner.train()
    log = _log_text(runner)
    assert log.count('do not match exactly') == 2
    assert log.count('The model and loaded state dict do not match exactly') == 1
    assert log.count("The EMA model (EMAHook's averaged copy) and loaded state dict do not "
                     'match exactly') == 1


def test_a_world_size_change_is_named_by_what_an_iteration_now_takes():
    # Same per-rank batch: half the ranks, half the samples per iteration.
    same_batch = world_size_change_message(2, 1, 8, 4, samples_per_iter=4, saved_samples_per_iter=8)
    assert 'sees 4 samples, where it took 8' in same_batch
    assert 'an epoch is now 8 iterations (was 4)' in same_batch
    # The per-rank batch doubled to keep 8 samples an iteration: steps keep their meaning.
    kept = world_size_change_message(2, 1, 4, 4, samples_per_iter=8, saved_samples_per_iter=8)
    assert 'still takes 8 samples over all ranks' in kept and 'move through' not in kept
    # An older checkpoint without the count: the ratio of the world sizes.
    assert 'sees 1/2 of the samples' in world_size_change_message(2, 1)
    assert world_size_change_message(2, 2) is None and world_size_change_message(None, 2) is None
