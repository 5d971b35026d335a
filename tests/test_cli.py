"""The `minimm` command: train, resume, test and info on the shipped demo config."""
import json
import os.path as osp
import re

import pytest

from minimm.cli import DEMO_CONFIG, main


def test_train_resume_test(tmp_path, capsys):
    work_dir = str(tmp_path / 'run')
    main(['train', DEMO_CONFIG, '--work-dir', work_dir, '--cfg-options',
          'train_cfg.max_epochs=1', 'train_dataloader.batch_size=128'])
    assert osp.exists(osp.join(work_dir, 'epoch_1.pth'))
    assert osp.exists(osp.join(work_dir, 'digits_ema.py'))          # the dumped config
    main(['train', DEMO_CONFIG, '--work-dir', work_dir, '--resume', '--cfg-options',
          'train_cfg.max_epochs=2', 'train_dataloader.batch_size=128'])
    assert osp.exists(osp.join(work_dir, 'epoch_2.pth'))
    capsys.readouterr()
    main(['test', DEMO_CONFIG, '--work-dir', str(tmp_path / 'test'),
          '--checkpoint', osp.join(work_dir, 'epoch_2.pth')])
    printed = capsys.readouterr().out
    assert "'accuracy/top1'" in printed


def test_info(capsys):
    main(['info'])
    out = capsys.readouterr().out
    assert 'torch' in out and 'native ops' in out


def test_bad_arguments():
    with pytest.raises(SystemExit):
        main(['train'])
    with pytest.raises(SystemExit):
        main(['info', '--bogus'])


def test_bench_dispatch_and_overhead_smoke(capsys):
    with pytest.raises(SystemExit) as info:
        main(['bench', 'overhead', '--help'])
    assert info.value.code == 0 and 'minimm bench overhead' in capsys.readouterr().out
    main(['bench', 'overhead', '--iters', '20', '--rounds', '1', '--json'])
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(result) >= {'bare_us', 'runner_us', 'ratio', 'no_hooks_us', 'no_hooks_ratio'}
    assert result['ratio'] > 0 and result['no_hooks_ratio'] > 0


@pytest.mark.parametrize('argv', [
    ['ema', '--workloads', 'small', '--rounds', '2'],
    ['pack', '--workloads', 'small', 'resnet50_bn', '--rounds', '2'],
    ['ema-hook', '--workloads', 'small', '--iters', '3', '--rounds', '1'],
])
def test_benchmarks_run_and_report_ratios(argv, capsys):
    main(['bench'] + argv + ['--threads', '1', '--json'])
    out = capsys.readouterr().out
    rows = json.loads(out[out.index('['):])  # a compile notice may come first
    assert rows and all(row['ms'] > 0 for row in rows)
    assert 'limit' in {row['method'] for row in rows}


def test_top_level_help_names_every_command_without_rest_marks(capsys):
    with pytest.raises(SystemExit):
        main(['--help'])
    out = capsys.readouterr().out
    commands = re.search(r'\{([a-z,-]+)\}', out).group(1).split(',')
    description = out.split('\n\n')[1]
    assert all(re.search(rf'\b{command}\b', description) for command in commands), description
    assert '``' not in out


def test_bench_overhead_help_keeps_its_list(capsys):
    with pytest.raises(SystemExit):
        main(['bench', 'overhead', '--help'])
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith('* bare: a hand-written PyTorch loop') for line in lines)
    assert any(line.startswith('* runner: Runner.train()') for line in lines)
    assert any(line.startswith('* runner, no hooks: the same') for line in lines)
    assert not any('``' in line or '**' in line for line in lines)


def test_train_profile_hooks_logs_the_sync_audit(tmp_path, capsys):
    main(['train', DEMO_CONFIG, '--work-dir', str(tmp_path), '--profile-hooks', '--cfg-options',
          'train_cfg.max_epochs=1', 'train_dataloader.batch_size=128',
          'default_hooks.logger.interval=5'])
    printed = capsys.readouterr()
    lines = (printed.out + printed.err).splitlines()
    rows = {tuple(line.split()[:2]): line.split()[-1] for line in lines if len(line.split()) > 2}
    # 12 iterations, log lines after the 5th and 10th: the loss is read twice, nothing else is
    assert rows[('LoggerHook', 'after_train_iter')] == '2'
    assert rows[('model', 'train/val/test_step')] == '0'
    assert all(reads == '0' for (hook, stage), reads in rows.items()
               if stage == 'after_train_iter' and hook != 'LoggerHook')
    assert any(line.startswith('Device reads, counted with a dispatch mode') for line in lines)


def test_profile_hooks_is_refused_for_an_mmcv_config(tmp_path):
    config = osp.join(osp.dirname(DEMO_CONFIG), 'digits_mmcv1.py')
    with pytest.raises(SystemExit, match='--profile-hooks needs an MMEngine-style config'):
        main(['train', config, '--work-dir', str(tmp_path), '--profile-hooks'])
