"""minimm plot / plot-lr: what they read, the schedule they compute, and the missing-matplotlib
message."""
import json
import math
import sys

import pytest

from minimm.cli import main as cli_main
from minimm.config import Config
from minimm.plot import PLOT_INSTALL_HINT, find_scalar_log, read_scalar_log
from minimm.plot.lr import config_schedule
from toy import toy_runner

PNG_MAGIC = b'\x89PNG\r\n\x1a\n'
DEMO = 'minimm/configs/digits_ema.py'


def test_plot_a_run(tmp_path, capsys):
    runner = toy_runner(tmp_path, max_=2, default_hooks=dict(
        checkpoint=None, logger=dict(type='LoggerHook', interval=1)))
    runner.train()
    train, val = read_scalar_log(find_scalar_log(str(tmp_path)))
    assert [row['x'] for row in train] == [1, 2, 3, 4, 5, 6]       # every iteration logged
    assert all('loss' in row and 'lr' in row for row in train)
    assert [(row['x'], 'toy/acc' in row) for row in val] == [(1, True), (2, True)]
    capsys.readouterr()
    cli_main(['plot', str(tmp_path), '--out', str(tmp_path / 'curves.png')])
    assert capsys.readouterr().out.strip() == str(tmp_path / 'curves.png')
    assert (tmp_path / 'curves.png').read_bytes()[:8] == PNG_MAGIC


def test_reads_an_mmcv_json_log(tmp_path):
    log = tmp_path / '20240101_000000.log.json'
    lines = [dict(env_info='...', seed=0),                        # the meta line: skipped
             dict(mode='train', epoch=1, iter=10, lr=0.1, loss=2.0),
             dict(mode='val', epoch=1, iter=45, lr=0.1, accuracy=50.0)]
    log.write_text(''.join(json.dumps(line) + '\n' for line in lines))
    train, val = read_scalar_log(find_scalar_log(str(tmp_path)))
    assert train == [dict(x=10, lr=0.1, loss=2.0)]
    assert val == [dict(x=1, iter=45, lr=0.1, accuracy=50.0)]


def test_an_epoch_based_mmcv_log_is_drawn_on_one_iteration_axis(tmp_path):
    # EpochBasedRunner logs the iteration within the epoch; 45 iterations an epoch, interval 15.
    log = tmp_path / '20240101_000000.log.json'
    lines = [dict(mode='train', epoch=epoch, iter=it, lr=0.1, loss=1.0)
             for epoch in (1, 2) for it in (15, 30, 45)]
    log.write_text(''.join(json.dumps(line) + '\n' for line in lines))
    train, _ = read_scalar_log(str(log))
    assert [row['x'] for row in train] == [15, 30, 45, 60, 75, 90]


def test_no_log_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match='no vis_data/scalars.json'):
        find_scalar_log(str(tmp_path))


def test_schedule_of_the_demo_config_matches_the_closed_form():
    values = config_schedule(Config.fromfile(DEMO), epoch_length=45)
    lr = values['lr']
    assert len(lr) == 8 * 45
    # LinearLR(begin=0, end=20) goes from 0.1x to 1x, reaching 1x at iteration end - 1 = 19 as
    # MMEngine's does; times the cosine factor of the epoch (T_max = 8 epochs).
    for it in range(8 * 45):
        warmup = 0.1 + 0.9 * min(it, 19) / 19
        cosine = (1 + math.cos(math.pi * (it // 45) / 8)) / 2
        assert math.isclose(lr[it], 0.1 * warmup * cosine, rel_tol=1e-9), it
    assert values['momentum'] == [0.9] * (8 * 45)


def test_schedule_counts_the_epoch_length_from_the_dataset():
    # 1437 training digits in batches of 32: 45 iterations per epoch.
    assert len(config_schedule(Config.fromfile(DEMO))['lr']) == 8 * 45


def test_plot_lr_writes_a_png(tmp_path, capsys):
    out = tmp_path / 'lr.png'
    cli_main(['plot-lr', DEMO, '--out', str(out), '--epoch-length', '10'])
    assert out.read_bytes()[:8] == PNG_MAGIC


def test_plot_lr_without_out_writes_into_the_work_dir_not_the_current_folder(tmp_path,
                                                                              monkeypatch):
    import os
    monkeypatch.chdir(tmp_path)
    demo = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', DEMO)
    cli_main(['plot-lr', demo, '--epoch-length', '10'])
    assert not (tmp_path / 'lr_schedule.png').exists()
    # digits_ema.py sets work_dir = 'work_dirs/digits_ema', relative to where minimm runs
    assert (tmp_path / 'work_dirs' / 'digits_ema' / 'lr_schedule.png').read_bytes()[:8] == PNG_MAGIC


def test_iteration_based_and_adam_betas(tmp_path):
    cfg = dict(train_cfg=dict(by_epoch=False, max_iters=10),
               optim_wrapper=dict(optimizer=dict(type='Adam', lr=1.0)),
               param_scheduler=[dict(type='MultiStepLR', by_epoch=False, milestones=[4], gamma=0.5),
                                dict(type='ConstantMomentum', by_epoch=False, factor=0.5, end=4)])
    values = config_schedule(cfg)
    assert values['lr'] == [1.0] * 4 + [0.5] * 6
    # betas[0] = 0.9, halved; as MMEngine's Constant schedulers, restored at step end - 1 = 3.
    assert values['momentum'] == [0.45] * 3 + [0.9] * 7


def test_missing_matplotlib_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, 'matplotlib', None)      # makes `import matplotlib` fail
    for argv in (['plot', str(tmp_path)], ['plot-lr', DEMO]):
        with pytest.raises(SystemExit) as info:
            cli_main(argv)
        assert str(info.value) == PLOT_INSTALL_HINT
    assert 'pip install -e ".[plot]"' in PLOT_INSTALL_HINT


MMCV_DEMO = 'minimm/configs/digits_mmcv1.py'


def test_schedule_of_the_mmcv_config_matches_mmcv_formulas():
    # lr_config = dict(policy='step', step=[5, 7], warmup='linear', warmup_iters=20,
    # warmup_ratio=0.1): MMCV's linear warm-up r * (1 - (1 - cur / 20) * (1 - 0.1)) while
    # cur < 20, then x0.1 from epoch 5 (0-based) and again from epoch 7.
    values = config_schedule(Config.fromfile(MMCV_DEMO))
    lr = values['lr']
    assert len(lr) == 8 * 45
    for it in range(8 * 45):
        epoch = it // 45
        regular = 0.1 * 0.1 ** ((epoch >= 5) + (epoch >= 7))
        warm = 1 - (1 - it / 20) * (1 - 0.1) if it < 20 else 1.0
        assert math.isclose(lr[it], regular * warm, rel_tol=1e-12), it
    assert set(values['momentum']) == {0.9}


def test_mmcv_momentum_config_and_iteration_based_runner():
    cfg = dict(runner=dict(type='IterBasedRunner', max_iters=6),
               optimizer=dict(type='SGD', lr=1.0, momentum=0.9),
               lr_config=dict(policy='fixed', by_epoch=False),
               momentum_config=dict(policy='step', step=[3], gamma=0.5, by_epoch=False))
    values = config_schedule(cfg)
    assert values['lr'] == [1.0] * 6
    assert values['momentum'] == [0.9] * 3 + [0.45] * 3


def test_neither_world_is_a_clear_error():
    with pytest.raises(ValueError, match='neither an MMEngine-style config'):
        config_schedule(dict(model=dict(type='DigitsCNN')))
