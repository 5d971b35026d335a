"""The long lines a run starts with (the config dump and the hook table: 53 lines before the
demo's first training line) go to the run's log file always, and to the console only on request
(issue 39). MMEngine 0.10.7's Runner logs both at INFO, so its console opens every run with them;
minimm keeps the console for the training. Checked for the three ways in: a ``Runner`` built in
Python, MMCV 1.x's classic runner, and the command line with an MMCV 1.x config (through
``main``, as the README's Python blocks call it).
"""
import glob
import os.path as osp

import pytest
import torch

from minimm.cli import main
from minimm.logging import MMLogger
from minimm.console_details import show_details
from minimm.mmcv import EpochBasedRunner
from mmcv_toy import ToyModel, loader
from toy import toy_runner

TABLE = 'Hooks will be executed in the following order'
MMCV_CONFIG = osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), 'minimm', 'configs',
                       'digits_mmcv1.py')


def read(path):
    with open(path, encoding='utf-8') as f:
        return f.read()


@pytest.mark.parametrize('verbose', [False, True])
def test_a_runner_built_in_python_prints_them_only_with_verbose(tmp_path, capsys, verbose):
    runner = toy_runner(tmp_path, cfg=dict(note='shown in the dump'), verbose=verbose)
    console, log = capsys.readouterr().out, read(runner.logger.log_file)
    assert TABLE in log and 'Config:' in log and 'shown in the dump' in log
    assert (TABLE in console) == verbose and ('Config:' in console) == verbose, console
    assert 'native ops:' in console                  # the short startup lines stay


@pytest.mark.parametrize('verbose', [False, True])
def test_the_classic_mmcv_runner_prints_its_hook_table_only_on_request(tmp_path, capsys, verbose):
    logger = MMLogger.get_instance(f'mmcv_details_{verbose}', log_file=str(tmp_path / 'run.log'))
    torch.manual_seed(0)
    model = ToyModel()
    runner = EpochBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                              work_dir=str(tmp_path), logger=logger, max_epochs=1)
    before = show_details(verbose)
    try:
        runner.run([loader()], [('train', 1)])
    finally:
        show_details(before)
    console = capsys.readouterr().out
    assert TABLE in read(tmp_path / 'run.log')
    assert (TABLE in console) == verbose, console
    assert 'workflow: ' in console


def test_minimm_train_with_an_mmcv_config_keeps_the_table_for_the_log_file(tmp_path, capsys):
    work_dir = str(tmp_path / 'mmcv1')
    main(['train', MMCV_CONFIG, '--work-dir', work_dir, '--cfg-options', 'runner.max_epochs=1'])
    console = capsys.readouterr().out
    first_train = next(i for i, line in enumerate(console.splitlines()) if 'Epoch [1]' in line)
    assert TABLE not in console and first_train < 10, console[:3000]
    (log_file,) = glob.glob(osp.join(work_dir, '*.log'))
    assert TABLE in read(log_file)
