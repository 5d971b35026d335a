"""A fresh run never overwrites another run's checkpoints (issue 39): it refuses, in one line
naming --resume and a new work dir; resuming, and runs of one process, go on as before. The other
run is a subprocess here: runs of the test's own process count as one (``work_dir.py``)."""
import os
import os.path as osp
import subprocess
import sys

import pytest

from minimm.cli import DEMO_CONFIG, command_line
from toy import toy_runner

pytestmark = pytest.mark.ops_backend  # toy_runner's model trains through the ops

TESTS = osp.dirname(osp.abspath(__file__))


def _other_process_trains(work_dir):
    """Train the toy for one epoch into ``work_dir`` in another process; return its files."""
    code = f'from toy import toy_runner; toy_runner({str(work_dir)!r}, max_=1, val=False).train()'
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([TESTS, os.environ.get('PYTHONPATH', '')]))
    subprocess.run([sys.executable, '-c', code], check=True, env=env, capture_output=True)
    return {name: osp.getmtime(osp.join(work_dir, name)) for name in os.listdir(work_dir)
            if name.endswith('.pth') or name == 'last_checkpoint'}


def test_a_fresh_run_refuses_another_runs_checkpoints_and_leaves_them(tmp_path):
    before = _other_process_trains(tmp_path)
    assert set(before) == {'epoch_1.pth', 'last_checkpoint'}
    with pytest.raises(FileExistsError) as info:
        toy_runner(tmp_path, max_=1, val=False).train()
    assert str(info.value) == (
        f'work_dir {tmp_path} holds the checkpoints of another run (epoch_1.pth, '
        'last_checkpoint), which a fresh run would overwrite: continue that run with --resume '
        '(resume=True), or give this run a new work_dir (--work-dir)')
    assert {name: osp.getmtime(tmp_path / name) for name in before} == before
    # Resuming it is what the message offers, and it trains on.
    resumed = toy_runner(tmp_path, max_=2, val=False, resume=True)
    resumed.train()
    assert resumed.epoch == 2 and osp.isfile(tmp_path / 'epoch_2.pth')


def test_runs_of_one_process_may_follow_each_other_in_one_work_dir(tmp_path):
    # As MMEngine's own tests do: runner after runner in one temporary folder.
    toy_runner(tmp_path, max_=1, val=False).train()
    toy_runner(tmp_path, max_=1, val=False).train()
    assert osp.isfile(tmp_path / 'epoch_1.pth')


def test_testing_in_a_work_dir_with_checkpoints_is_not_refused(tmp_path, capsys):
    _other_process_trains(tmp_path)
    assert command_line(['test', DEMO_CONFIG, '--work-dir', str(tmp_path), '--checkpoint',
                         str(tmp_path / 'epoch_1.pth')]) == 1
    # Refused for not fitting (a toy checkpoint for the digits CNN), not for the folder.
    assert 'holds none of the weights of the model' in capsys.readouterr().err


def test_the_cli_names_resume_and_a_new_work_dir(tmp_path, capsys):
    _other_process_trains(tmp_path)
    assert command_line(['train', DEMO_CONFIG, '--work-dir', str(tmp_path), '--cfg-options',
                         'train_cfg.max_epochs=1']) == 1
    line = capsys.readouterr().err.splitlines()[0]
    assert line.startswith(f'minimm: error: work_dir {tmp_path} holds the checkpoints of '
                           'another run (epoch_1.pth, last_checkpoint)')
    assert '--resume' in line and '--work-dir' in line


def test_the_demo_default_moves_to_a_free_folder(tmp_path):
    from minimm.work_dir import free_work_dir
    base = str(tmp_path / 'demo')
    assert free_work_dir(base) == base
    os.makedirs(base)
    open(osp.join(base, 'epoch_8.pth'), 'w').close()
    assert free_work_dir(base) == base + '_2'
