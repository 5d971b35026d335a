"""SIGKILL a `minimm train` process twice, then `--resume`: the final weights equal those of an
uninterrupted run (issue 8).

The first kill lands between checkpoints (in epoch 2, after epoch_1.pth), the second while
epoch_3.pth is being written. With ``max_keep_ckpts=1`` a save that deleted the old file before the
new one was complete would leave nothing to resume from.
"""
import os
import signal
import subprocess
import sys
import textwrap

import torch

from minimm.cli import main
from minimm.config import Config
from minimm.runner import Runner, find_latest_checkpoint
from minimm.checkpoint import load_checkpoint_file

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)

CONFIG = textwrap.dedent("""
    custom_imports = dict(imports=['kill_resume_toy'])
    model = dict(type='KillTestToyModel')
    train_dataloader = dict(batch_size=4, sampler=dict(type='DefaultSampler', shuffle=True),
                            collate_fn=dict(type='default_collate'),
                            dataset=dict(type='KillTestToyDataset', n=12))
    train_cfg = dict(by_epoch=True, max_epochs=4)
    optim_wrapper = dict(optimizer=dict(type='SGD', lr=0.1, momentum=0.9))
    param_scheduler = [dict(type='LinearLR', start_factor=0.5, by_epoch=False, end=4)]
    default_hooks = dict(checkpoint=dict(type='CheckpointHook', interval=1, max_keep_ckpts=1))
    custom_hooks = [dict(type='KillTestPauseHook')]
    randomness = dict(seed=0)
""")


def _train_and_kill(config, work_dir, *extra, **env):
    """Run `minimm train` in a subprocess; SIGKILL it at the pause point that ``env`` sets."""
    # One thread, as in this process (see the test): results are bit-identical only for the same
    # thread count.
    environ = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, TESTS]), OMP_NUM_THREADS='1',
                   **env)
    command = [sys.executable, '-m', 'minimm.cli', 'train', config, '--work-dir', work_dir,
               *extra]
    proc = subprocess.Popen(command, env=environ, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        output = []
        for line in proc.stdout:
            output.append(line)
            if line.strip() in ('PAUSED', 'WRITING'):
                proc.send_signal(signal.SIGKILL)
                break
        proc.wait(timeout=120)
    finally:
        proc.kill()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL, ''.join(output)


def test_sigkill_between_and_during_checkpoints_then_resume(tmp_path):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _kill_twice_then_resume(tmp_path)
    finally:
        torch.set_num_threads(threads)


def _kill_twice_then_resume(tmp_path):
    config = tmp_path / 'toy_kill.py'
    config.write_text(CONFIG)
    work_dir = str(tmp_path / 'killed')

    _train_and_kill(str(config), work_dir, KILL_TEST_PAUSE_AT_ITER='5')        # in epoch 2
    assert find_latest_checkpoint(work_dir) == os.path.join(work_dir, 'epoch_1.pth')

    _train_and_kill(str(config), work_dir, '--resume', KILL_TEST_SLOW_SAVE_EPOCH='3')
    assert find_latest_checkpoint(work_dir) == os.path.join(work_dir, 'epoch_2.pth')
    load_checkpoint_file(os.path.join(work_dir, 'epoch_2.pth'))      # complete and readable
    assert not os.path.exists(os.path.join(work_dir, 'epoch_3.pth'))

    main(['train', str(config), '--work-dir', work_dir, '--resume'])  # in this process: faster
    assert sorted(f for f in os.listdir(work_dir) if f.endswith(('.pth', '.tmp'))) == [
        'epoch_4.pth']

    cfg = Config.fromfile(str(config))
    cfg.work_dir = str(tmp_path / 'straight')
    Runner.from_cfg(cfg).train()
    straight = load_checkpoint_file(str(tmp_path / 'straight' / 'epoch_4.pth'))
    resumed = load_checkpoint_file(os.path.join(work_dir, 'epoch_4.pth'))
    assert list(straight['state_dict']) == list(resumed['state_dict'])
    for key, value in straight['state_dict'].items():
        assert torch.equal(value, resumed['state_dict'][key]), key
