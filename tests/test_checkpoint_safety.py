"""Checkpoints that cannot lose data or be misread (issue 8): retention order, file modes, resume
past a corrupt file, named read errors, plain-data metadata, trusted foreign files, strict=False."""
import os
import stat
from collections import OrderedDict

import numpy as np
import pytest
import torch
import torch.nn as nn

from minimm.cli import DEMO_CONFIG, main
from minimm.evaluator import BaseMetric
from minimm.hooks import Hook
from minimm.runner import find_latest_checkpoint
from minimm.checkpoint import (CheckpointError, load_checkpoint_file, load_state_dict,
                               save_checkpoint)
from toy import ToyDataset, ToyMetric, ToyModel, toy_loader, toy_runner

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py


def _pth_and_tmp(folder):
    return sorted(f for f in os.listdir(folder) if f.endswith(('.pth', '.tmp')))


def _log_text(runner):
    with open(os.path.join(runner.log_dir, f'{runner.timestamp}.log')) as f:
        return f.read()


class _FailSave(Hook):
    """Makes the save of the checkpoint named ``name`` fail as a full disk would."""

    def __init__(self, name):
        self.name = name

    def before_save_checkpoint(self, runner, checkpoint):
        # CheckpointHook records the file it is about to write in the MessageHub.
        hub = runner.message_hub
        if self.name in [os.path.basename(path or '') for path in
                         (hub.get_info('last_ckpt'), hub.get_info('best_ckpt'))]:
            raise OSError(28, 'No space left on device')


def test_failed_save_keeps_the_previous_checkpoint(tmp_path):
    runner = toy_runner(tmp_path, max_=2, val=False, custom_hooks=[_FailSave('epoch_2.pth')],
                        default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=1,
                                                           max_keep_ckpts=1)))
    with pytest.raises(OSError, match='No space left'):
        runner.train()
    assert _pth_and_tmp(tmp_path) == ['epoch_1.pth']
    assert find_latest_checkpoint(str(tmp_path)) == str(tmp_path / 'epoch_1.pth')
    assert load_checkpoint_file(str(tmp_path / 'epoch_1.pth'))['meta']['epoch'] == 1


class _CountingMetric(BaseMetric):
    """``calls`` grows by one per validation, so with rule 'greater' every epoch is a new best."""

    default_prefix = 'toy'

    def __init__(self):
        super().__init__()
        self.calls = 0

    def process(self, data_batch, data_samples):
        self.results.append(0)

    def compute_metrics(self, results):
        self.calls += 1
        return dict(calls=self.calls)


def test_failed_best_save_keeps_the_previous_best(tmp_path):
    runner = toy_runner(tmp_path, max_=2, val=False, val_dataloader=toy_loader(8, 4),
                        val_cfg=dict(), val_evaluator=_CountingMetric(),
                        custom_hooks=[_FailSave('best_toy_calls_epoch_2.pth')],
                        default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=1,
                                                           save_best='toy/calls',
                                                           rule='greater')))
    with pytest.raises(OSError, match='No space left'):
        runner.train()
    assert _pth_and_tmp(tmp_path) == ['best_toy_calls_epoch_1.pth', 'epoch_1.pth', 'epoch_2.pth']


def test_files_get_the_umask_mode_and_the_folder_is_synced(tmp_path, monkeypatch):
    synced_dirs = []
    real_fsync = os.fsync

    def recording_fsync(fd):
        synced_dirs.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real_fsync(fd)

    monkeypatch.setattr(os, 'fsync', recording_fsync)
    old_umask = os.umask(0o027)
    try:
        save_checkpoint({'x': torch.ones(1)}, str(tmp_path / 'a.pth'))
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(os.stat(tmp_path / 'a.pth').st_mode) == 0o640
    assert synced_dirs == [False, True]  # the file, then the folder after the rename


def test_a_stale_temporary_file_of_a_killed_write_is_removed(tmp_path):
    import socket
    import subprocess
    import sys
    host = socket.gethostname()
    dead = subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'],
                          capture_output=True, text=True).stdout.strip()  # a pid that has ended
    stale = tmp_path / f'.a.pth.{dead}@{host}.k1ll3d.tmp'
    # Another live process writing the same file right now (two ranks saving one snapshot):
    # its file must stay, or its rename fails. So must one of another machine, which cannot be
    # asked, and one whose name says no owner.
    alive = tmp_path / f'.a.pth.{os.getppid()}@{host}.wr1t1n.tmp'
    remote = tmp_path / f'.a.pth.{dead}@another-host.wr1t1n.tmp'
    unowned = tmp_path / '.a.pth.n0wn3r.tmp'
    for path in (stale, alive, remote, unowned):
        path.write_bytes(b'half a file')
    save_checkpoint({'x': torch.ones(1)}, str(tmp_path / 'a.pth'))
    assert _pth_and_tmp(tmp_path) == sorted(['a.pth', alive.name, remote.name, unowned.name])


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def test_resume_falls_back_to_the_newest_readable_checkpoint(tmp_path):
    toy_runner(tmp_path, max_=3, val=False).train()
    _truncate(tmp_path / 'epoch_3.pth')
    resumed = toy_runner(tmp_path, max_=3, val=False, resume=True)
    resumed.load_or_resume()
    assert (resumed.epoch, resumed.iter) == (2, 6)
    log = _log_text(resumed)
    assert f"cannot read checkpoint '{tmp_path / 'epoch_3.pth'}'" in log
    assert 'central directory' in log  # torch's reason
    # Kept under another name, so that training epoch 3 again does not overwrite it.
    assert f"(kept as {tmp_path / 'epoch_3.pth'}.unreadable)" in log
    assert (tmp_path / 'epoch_3.pth.unreadable').exists()

    for name in ('epoch_1.pth', 'epoch_2.pth'):
        _truncate(tmp_path / name)
    again = toy_runner(tmp_path, max_=3, val=False, resume=True)
    with pytest.raises(CheckpointError, match='no readable checkpoint') as info:
        again.load_or_resume()
    tried = [line for line in str(info.value).splitlines() if 'cannot read' in line]
    assert [n for line in tried for n in ('epoch_3', 'epoch_2', 'epoch_1') if n in line] == [
        'epoch_2', 'epoch_1']  # epoch_3.pth, set aside before, is "does not exist" now


def test_a_corrupt_file_given_by_path_is_an_error_naming_it(tmp_path, capsys):
    toy_runner(tmp_path / 'a', max_=1, val=False).train()
    corrupt = tmp_path / 'a' / 'epoch_1.pth'
    _truncate(corrupt)
    for kwargs in (dict(load_from=str(corrupt)), dict(resume=str(corrupt))):
        runner = toy_runner(tmp_path / 'b', max_=1, val=False, **kwargs)
        with pytest.raises(CheckpointError, match=f"cannot read checkpoint '{corrupt}'"):
            runner.load_or_resume()
    with pytest.raises(CheckpointError, match=f"cannot read checkpoint '{corrupt}'"):
        main(['test', DEMO_CONFIG, '--work-dir', str(tmp_path / 'c'), '--checkpoint',
              str(corrupt)])


class _NumpyMetaDataset(ToyDataset):
    metainfo = dict(classes=('neg', 'pos'), palette=np.array([[0, 0, 255], [255, 0, 0]]),
                    weight=np.float32(0.5))


def test_metadata_is_saved_as_plain_data(tmp_path):
    loader = torch.utils.data.DataLoader(_NumpyMetaDataset(12), batch_size=4)
    toy_runner(tmp_path, max_=1, val=False, train_dataloader=loader).train()
    meta = torch.load(tmp_path / 'epoch_1.pth', weights_only=True)['meta']
    assert meta['dataset_meta'] == dict(classes=('neg', 'pos'),
                                        palette=[[0, 0, 255], [255, 0, 0]], weight=0.5)
    assert type(meta['dataset_meta']['weight']) is float
    resumed = toy_runner(tmp_path, max_=1, val=False, resume=True, train_dataloader=loader)
    resumed.load_or_resume()
    assert 'dataset metainfo' not in _log_text(resumed)  # the same metainfo, saved as lists


def test_a_range_is_saved_as_a_list():
    # MMCV 1.x configs write gpu_ids=range(1); the runner's meta carries the config into files.
    from minimm.plain_data import to_plain_data
    assert to_plain_data(dict(gpu_ids=range(2))) == dict(gpu_ids=[0, 1])


def test_the_path_in_the_message_names_dict_keys_and_state_dict_metadata():
    from minimm.plain_data import to_plain_data
    with pytest.raises(TypeError, match=r"meta key \('a', <object"):
        to_plain_data({('a', object()): 1}, 'meta')
    state = OrderedDict(w=1)
    state._metadata = {'': {'version': object()}}
    with pytest.raises(TypeError, match=r"state\._metadata\[''\]\['version'\] is a builtins"):
        to_plain_data(state, 'state')


class _AddsObject(Hook):
    def before_save_checkpoint(self, runner, checkpoint):
        checkpoint['meta']['custom'] = {'history': [1, object()]}


def test_an_unstorable_value_fails_at_save_naming_its_key(tmp_path):
    runner = toy_runner(tmp_path, max_=1, val=False, custom_hooks=[_AddsObject()])
    with pytest.raises(TypeError, match=r"checkpoint\['meta'\]\['custom'\]\['history'\]\[1\] "
                                        r'is a builtins\.object'):
        runner.train()
    assert _pth_and_tmp(tmp_path) == []


class PickledHistory:
    """Stands for MMEngine's HistoryBuffer: any object that needs unpickling to load."""

    def __init__(self, values):
        self.values = values


def test_a_foreign_checkpoint_needs_the_trusted_opt_in(tmp_path):
    torch.manual_seed(1)
    source = ToyModel()
    foreign = str(tmp_path / 'foreign.pth')
    torch.save({'state_dict': source.state_dict(),
                'message_hub': {'log_scalars': {'loss': PickledHistory([1.0])}}}, foreign)
    runner = toy_runner(tmp_path / 'a', max_=1, val=False, load_from=foreign)
    with pytest.raises(CheckpointError, match=f"checkpoint '{foreign}' needs arbitrary "
                                              r'unpickling.*PickledHistory.*trusted=True'):
        runner.load_or_resume()
    trusted = toy_runner(tmp_path / 'b', max_=1, val=False,
                         load_from=dict(path=foreign, trusted=True))
    trusted.load_or_resume()
    for key, value in source.state_dict().items():
        assert torch.equal(trusted.model.state_dict()[key], value), key
    with pytest.raises(KeyError, match='`path` and optionally `trusted`'):
        toy_runner(tmp_path / 'c', max_=1, val=False, load_from=dict(file=foreign))


def test_cli_trust_checkpoint_flag(tmp_path, capsys):
    from minimm.model.digits_cnn import DigitsCNN
    foreign = str(tmp_path / 'foreign.pth')
    torch.save({'state_dict': DigitsCNN().state_dict(), 'extra': PickledHistory([])}, foreign)
    argv = ['test', DEMO_CONFIG, '--work-dir', str(tmp_path / 'w'), '--checkpoint', foreign]
    with pytest.raises(CheckpointError, match='--trust-checkpoint'):
        main(argv)
    main(argv + ['--trust-checkpoint'])
    assert "'accuracy/top1'" in capsys.readouterr().out


def _shape_mismatch_case():
    source = nn.ModuleDict(dict(linear=nn.Linear(4, 2), kept=nn.Linear(2, 2))).state_dict()
    source['ghost'] = torch.zeros(1)
    target = nn.ModuleDict(dict(linear=nn.Linear(4, 3), kept=nn.Linear(2, 2),
                                extra=nn.Linear(1, 1)))
    return source, target


class _Warnings:
    def __init__(self):
        self.messages = []

    def warning(self, message):
        self.messages.append(message)


def test_strict_false_skips_mismatched_shapes_and_warns_once():
    source, target = _shape_mismatch_case()
    logger = _Warnings()
    load_state_dict(target, source, strict=False, logger=logger)
    assert torch.equal(target.kept.weight, source['kept.weight'])  # the rest is loaded
    assert len(logger.messages) == 1
    lines = logger.messages[0].splitlines()
    assert lines == [
        'The model and loaded state dict do not match exactly',
        'unexpected key in source state_dict: ghost',
        'missing keys in source state_dict: extra.weight, extra.bias',
        'size mismatch for linear.weight: copying a param with shape torch.Size([2, 4]) from '
        'checkpoint, the shape in current model is torch.Size([3, 4]).',
        'size mismatch for linear.bias: copying a param with shape torch.Size([2]) from '
        'checkpoint, the shape in current model is torch.Size([3]).']
    with pytest.raises(RuntimeError) as info:
        load_state_dict(_shape_mismatch_case()[1], source, strict=True)
    assert str(info.value).splitlines()[1:] == lines[1:]


class _ThreeClassToy(ToyModel):
    """The fine-tuning case: the same body with another number of classes."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)
        self.bn = nn.BatchNorm1d(3)


def test_ema_hook_strict_load_false_fine_tunes_from_a_checkpoint_with_another_head(tmp_path):
    # load_from to train (fine-tuning) skips a head of another shape with a warning, as MMEngine;
    # to test, every weight must fit (test_bad_inputs.py).
    toy_runner(tmp_path / 'a', max_=1, val=False,
               custom_hooks=[dict(type='EMAHook', momentum=0.1)]).train()
    from minimm.runner import Runner
    runner = Runner(model=_ThreeClassToy(), work_dir=str(tmp_path / 'b'),
                    load_from=str(tmp_path / 'a' / 'epoch_1.pth'),
                    train_dataloader=toy_loader(12, 4),
                    train_cfg=dict(by_epoch=True, max_epochs=1),
                    optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
                    custom_hooks=[dict(type='EMAHook', momentum=0.1, strict_load=False)])
    runner.train()
    assert 'size mismatch for linear.weight' in _log_text(runner)


def test_a_missing_checkpoint_is_a_file_not_found_error_naming_the_file(tmp_path):
    # As MMEngine 0.10 (FileNotFoundError), and a CheckpointError like every other read failure.
    missing = str(tmp_path / 'nowhere.pth')
    for error in (FileNotFoundError, CheckpointError):
        with pytest.raises(error, match='nowhere.pth'):
            load_checkpoint_file(missing)
