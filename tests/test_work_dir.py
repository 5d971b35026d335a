"""A work dir is the run's own (issue 32): a run deletes only its own files (a copied work dir
never touches the original's), a busy work dir is refused naming the running process and a
crashed run leaves no stuck lock, log folders never collide, ``resume=True`` without a usable
``last_checkpoint`` resumes from the newest readable checkpoint instead of starting over, and a
resume with nothing left to train says so. Both worlds."""
import copy
import gc
import os
import shutil
import subprocess
import sys

import pytest
import torch

from minimm.config import ConfigDict
from minimm.mmcv import train as mmcv_train
from minimm.mmcv.resume_fallback import newest_readable_checkpoint
from minimm.runner import Runner
from minimm.work_dir import WorkDirBusyError, lock_work_dir
from test_runner_checks import MMCV_CONFIG
from toy import ScriptedMetric, toy_loader, toy_runner

pytestmark = pytest.mark.ops_backend  # toy_runner's model trains through the ops


def _log_text(runner):
    with open(os.path.join(runner.log_dir, f'{runner.timestamp}.log')) as f:
        return f.read()


def _best_runner(work_dir, scores, max_epochs, **kwargs):
    return toy_runner(work_dir, max_=max_epochs, val=False,
                      val_dataloader=toy_loader(8, 4), val_cfg=dict(),
                      val_evaluator=ScriptedMetric(scores),
                      default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=1,
                                                         save_best='toy/acc')), **kwargs)


def _bests(folder):
    return sorted(name for name in os.listdir(folder) if name.startswith('best_'))


def test_resuming_a_copied_work_dir_never_deletes_the_originals_files(tmp_path):
    _best_runner(tmp_path / 'A', [50, 60], 2).train()
    assert _bests(tmp_path / 'A') == ['best_toy_acc_epoch_2.pth']
    shutil.copytree(tmp_path / 'A', tmp_path / 'B')  # cp -r A B; B's checkpoints name A's files
    resumed = _best_runner(tmp_path / 'B', [70, 80], 4, resume=True)
    resumed.train()
    assert _bests(tmp_path / 'A') == ['best_toy_acc_epoch_2.pth']  # MMEngine deletes it
    assert _bests(tmp_path / 'B') == ['best_toy_acc_epoch_4.pth']  # B's own copy was replaced
    log = _log_text(resumed)
    assert f"Auto resumed from the latest checkpoint {tmp_path / 'B' / 'epoch_2.pth'}." in log
    assert f"previous best checkpoint {tmp_path / 'B' / 'best_toy_acc_epoch_2.pth'} is" in log
    assert str(tmp_path / 'A') + os.sep not in log


def test_mmcv_eval_hook_of_a_copied_work_dir_keeps_the_originals_best(tmp_path):
    from minimm.mmcv.hooks import EvalHook

    class Runner:
        work_dir = str(tmp_path / 'B')
        meta = dict(hook_msgs=dict(best_ckpt=str(tmp_path / 'A' / 'best_acc_epoch_2.pth')))
        logger = None

    hook = EvalHook(toy_loader(4, 4), save_best='acc')
    hook.before_run(Runner())
    assert hook.best_ckpt_path == str(tmp_path / 'B' / 'best_acc_epoch_2.pth')


LOCK_IT = ('import sys; from minimm.work_dir import lock_work_dir; lock_work_dir(sys.argv[1]); '
           'print("locked", flush=True); sys.stdin.read()')


def test_a_busy_work_dir_is_refused_naming_the_process(tmp_path):
    runner = toy_runner(tmp_path, max_=1, val=False)
    toy_runner(tmp_path, max_=1, val=False)  # a second runner of the same process is fine
    other = subprocess.run([sys.executable, '-c', LOCK_IT, str(tmp_path)], input='',
                           capture_output=True, text=True)
    assert other.returncode == 1
    assert (f'WorkDirBusyError: work_dir {tmp_path} is in use by another run (pid {os.getpid()}, '
            'started ') in other.stderr
    assert 'give this run another work_dir (--work-dir)' in other.stderr
    del runner
    gc.collect()  # the runners are gone: the lock is given back
    free = subprocess.run([sys.executable, '-c', LOCK_IT, str(tmp_path)], input='',
                          capture_output=True, text=True)
    assert free.returncode == 0, free.stderr


def test_a_killed_run_leaves_no_stuck_lock(tmp_path):
    holder = subprocess.Popen([sys.executable, '-c', LOCK_IT, str(tmp_path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == 'locked\n'
    with pytest.raises(WorkDirBusyError, match=f'pid {holder.pid}, started'):
        lock_work_dir(str(tmp_path))
    holder.kill()
    holder.wait()
    lock_work_dir(str(tmp_path))()  # free again: taken and given back


def test_runs_started_in_the_same_second_get_their_own_log_files(tmp_path, monkeypatch):
    monkeypatch.setattr(Runner, '_shared_timestamp', lambda self: '20260101_000000')
    first = toy_runner(tmp_path, max_=1, val=False)
    second = toy_runner(tmp_path, max_=1, val=False)
    assert first.timestamp == '20260101_000000' and second.timestamp == '20260101_000000_2'
    assert first.log_dir != second.log_dir
    assert second.log_dir == os.path.join(str(tmp_path), second.timestamp)
    first.logger.info('first only')
    assert 'first only' not in _log_text(second)


def test_a_work_dir_that_is_a_file_is_named(tmp_path):
    (tmp_path / 'w').write_text('x')
    with pytest.raises(NotADirectoryError, match=f'work_dir {tmp_path / "w"} is a file, not a '
                                                 'folder'):
        toy_runner(tmp_path / 'w', max_=1, val=False)


@pytest.mark.parametrize('record', ['empty', 'deleted'])
def test_resume_without_last_checkpoint_resumes_from_the_newest_checkpoint(tmp_path, record):
    toy_runner(tmp_path, max_=2, val=False).train()
    if record == 'empty':
        (tmp_path / 'last_checkpoint').write_text('')
    else:
        os.remove(tmp_path / 'last_checkpoint')
    kept = {name: os.stat(tmp_path / name).st_mtime_ns for name in ('epoch_1.pth', 'epoch_2.pth')}
    resumed = toy_runner(tmp_path, max_=3, val=False, resume=True)
    resumed.train()
    assert resumed.iter == 9
    for name, mtime in kept.items():  # not retrained, not overwritten
        assert os.stat(tmp_path / name).st_mtime_ns == mtime
    log = _log_text(resumed)
    assert 'last_checkpoint is missing or empty: resuming from the newest readable' in log
    assert f"Auto resumed from {tmp_path / 'epoch_2.pth'}, the newest checkpoint that could " \
           'be read (no record of the latest).' in log


def test_an_unreadable_checkpoint_skipped_on_resume_is_kept_not_overwritten(tmp_path):
    toy_runner(tmp_path, max_=2, val=False).train()
    broken = (tmp_path / 'epoch_2.pth').read_bytes()[:100]
    (tmp_path / 'epoch_2.pth').write_bytes(broken)
    resumed = toy_runner(tmp_path, max_=2, val=False, resume=True)
    resumed.train()
    assert (tmp_path / 'epoch_2.pth.unreadable').read_bytes() == broken
    assert torch.load(tmp_path / 'epoch_2.pth', weights_only=True)['meta']['epoch'] == 2
    assert f"(kept as {tmp_path / 'epoch_2.pth'}.unreadable)" in _log_text(resumed)


def test_a_resume_with_nothing_left_to_train_says_so(tmp_path):
    toy_runner(tmp_path, max_=2, val=False).train()
    resumed = toy_runner(tmp_path, max_=1, val=False, resume=True)
    resumed.train()
    assert resumed.epoch == 2
    assert ('The checkpoint is at epoch 2 and train_cfg.max_epochs is 1: nothing is left to '
            'train; raise max_epochs to train on.') in _log_text(resumed)


def test_resuming_a_finished_schedule_into_a_longer_run_warns(tmp_path):
    cosine = [dict(type='LinearLR', start_factor=0.5, by_epoch=False, begin=0, end=2),
              dict(type='CosineAnnealingLR', by_epoch=True, begin=0)]
    toy_runner(tmp_path, max_=2, val=False, param_scheduler=cosine).train()
    resumed = toy_runner(tmp_path, max_=4, val=False, resume=True, param_scheduler=cosine)
    resumed.train()
    log = _log_text(resumed)
    assert log.count('ended at') == 1  # the cosine, not the warm-up that ended long before
    assert ('CosineAnnealingLR ended at epoch 2, where the run that wrote the checkpoint ended '
            '(its `end`, restored from the checkpoint), and training goes on to epoch 4: its value '
            'stays where it ended.') in log
    fresh = toy_runner(tmp_path / 'fresh', max_=2, val=False, param_scheduler=cosine)
    fresh.train()
    assert 'ended at' not in _log_text(fresh)
    # An interrupted run resumed with its own length: the cosine has not ended, no warning.
    os.remove(tmp_path / 'fresh' / 'epoch_2.pth')
    (tmp_path / 'fresh' / 'last_checkpoint').write_text(str(tmp_path / 'fresh' / 'epoch_1.pth'))
    interrupted = toy_runner(tmp_path / 'fresh', max_=2, val=False, resume=True,
                             param_scheduler=cosine)
    interrupted.train()
    assert 'ended at' not in _log_text(interrupted) and interrupted.epoch == 2


def _mmcv_checkpoints(folder, epochs=(1, 2)):
    folder.mkdir(exist_ok=True)
    for epoch in epochs:
        torch.save({'meta': dict(epoch=epoch), 'state_dict': {}}, folder / f'epoch_{epoch}.pth')


def test_mmcv_resume_without_latest_resumes_from_the_newest_numbered_file(tmp_path, monkeypatch):
    assert newest_readable_checkpoint(str(tmp_path / 'latest.pth')) is None  # nothing to resume
    _mmcv_checkpoints(tmp_path)
    resumed_from = []
    monkeypatch.setattr(mmcv_train, 'train_model',
                        lambda cfg, distributed: resumed_from.append(cfg['resume_from']))
    with pytest.warns(UserWarning, match=f"latest.pth does not exist\nResuming from "
                                         f"{tmp_path / 'epoch_2.pth'} instead"):
        mmcv_train.train_from_cfg(ConfigDict(work_dir=str(tmp_path)), resume='auto')
    assert resumed_from == [str(tmp_path / 'epoch_2.pth')]


def test_mmcv_resume_with_nothing_left_to_train_says_so(tmp_path):
    from minimm.config import Config
    cfg = Config.fromfile(MMCV_CONFIG)
    cfg.merge_from_dict({'work_dir': str(tmp_path), 'runner.max_epochs': 1,
                         'data.samples_per_gpu': 512, 'evaluation.interval': 5,
                         'log_config.hooks': [dict(type='TextLoggerHook')]})
    again = copy.deepcopy(cfg)  # train_model pops lr_config.policy, as MMCV's does
    mmcv_train.train_model(cfg)
    again.resume_from = str(tmp_path / 'epoch_1.pth')
    runner = mmcv_train.train_model(again)
    with open(os.path.join(tmp_path, f'{runner.timestamp}.log')) as f:
        assert ('The checkpoint is at epoch 1 and runner.max_epochs is 1: nothing is left to '
                'train; raise max_epochs to train on.') in f.read()
