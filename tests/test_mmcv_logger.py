"""minimm.mmcv's logger hooks against MMCV 1.7.2: JSON log lines (keys, order, values), console
lines, averaging and reset rules, and the service loggers read back from what they wrote."""
import glob
import json
import logging
import os
import re
import sys

import numpy as np
import pytest
import torch

from minimm.mmcv import (HOOKS, EpochBasedRunner, EvalHook, Hook, IterBasedRunner, LoggerHook,
                         TextLoggerHook)
from mmcv_toy import ToyModel, loader
from test_vis_backends import needs, read_tensorboard

META = dict(exp_name='demo', seed=3, some=0.123456789, lst=[1.123456789, 2])


def losses(n, seed=0):
    """Each batch's loss: the model is never stepped (no OptimizerHook), so these are fixed."""
    with torch.no_grad():
        return [ToyModel()(**batch).item() for batch in loader(n, 2, seed)]


TRAIN, VAL = losses(6), losses(4, seed=1)  # 3 train batches, 2 val batches


def run(tmp_path, hooks, by_iter=False, workflow=(('train', 1), ('val', 1)), optimizer=None,
        meta=META, extra=()):
    model = ToyModel()
    optimizer = optimizer or torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    runner_cls, length = (IterBasedRunner, dict(max_iters=4)) if by_iter else \
        (EpochBasedRunner, dict(max_epochs=1))
    runner = runner_cls(model, optimizer=optimizer, work_dir=str(tmp_path),
                        logger=logging.getLogger('mmcv-logger-test'), meta=meta, **length)
    runner.register_training_hooks(lr_config=None, log_config=dict(interval=2, hooks=hooks))
    for hook in extra:
        runner.register_hook(hook, priority='LOW')
    loaders = [loader(6, 2), loader(4, 2, seed=1)]
    runner.run(loaders[:len(workflow)], list(workflow))
    return runner


def json_lines(runner):
    with open(os.path.join(runner.work_dir, f'{runner.timestamp}.log.json')) as f:
        return f.read().splitlines()


def test_json_log_lines_match_mmcv(tmp_path):
    ev = EvalHook(loader(4, 2, seed=1))
    runner = run(tmp_path, [dict(type='TextLoggerHook')], extra=[ev])
    meta_line, train, evaluation, val = json_lines(runner)
    # The meta line: top-level floats rounded to 5 decimals, lists element-wise.
    assert meta_line == '{"exp_name": "demo", "seed": 3, "some": 0.12346, "lst": [1.12346, 2]}'
    train = json.loads(train)
    assert list(train) == ['mode', 'epoch', 'iter', 'lr', 'data_time', 'loss', 'time']
    assert train['mode'] == 'train' and train['epoch'] == 1 and train['iter'] == 2
    assert train['lr'] == 0.1 and train['loss'] == round((TRAIN[0] + TRAIN[1]) / 2, 5)
    assert train['time'] == round(train['time'], 5) and train['time'] >= train['data_time'] >= 0
    # EvalHook's results: mode 'val' (no 'time'), train-mode epoch, iter = len(eval loader).
    with torch.no_grad():
        score = float(torch.stack([o for b in loader(4, 2, seed=1)
                                   for o in ToyModel()(**b, return_loss=False)]).mean())
    assert evaluation == f'{{"mode": "val", "epoch": 1, "iter": 2, "lr": 0.1, "score": ' \
                         f'{round(score, 5)}}}'
    val = json.loads(val)
    assert list(val) == ['mode', 'epoch', 'iter', 'lr', 'data_time', 'loss', 'time']
    assert (val['mode'], val['epoch'], val['iter']) == ('val', 1, 2)
    assert val['loss'] == round((VAL[0] + VAL[1]) / 2, 5)


def test_console_lines_match_mmcv(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger='mmcv-logger-test'):
        run(tmp_path, [dict(type='TextLoggerHook')])
    lines = [r.getMessage() for r in caplog.records if r.name == 'mmcv-logger-test']
    start = lines.index(next(line for line in lines if line.startswith('Epoch [')))
    train, exp_name, val = lines[start:start + 3]
    assert re.fullmatch(r'Epoch \[1\]\[2/3\]\tlr: 1\.000e-01, eta: 0:00:0\d, time: \d+\.\d{3}, '
                        rf'data_time: \d+\.\d{{3}}, loss: {(TRAIN[0] + TRAIN[1]) / 2:.4f}', train)
    # The exp name is printed at the end of each epoch, so before the val line too.
    assert exp_name == 'Exp name: demo'
    assert val == f'Epoch(val) [1][2]\tloss: {(VAL[0] + VAL[1]) / 2:.4f}'


def test_iter_based_lines_count_iterations(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger='mmcv-logger-test'):
        runner = run(tmp_path, [dict(type='TextLoggerHook')], by_iter=True,
                     workflow=[('train', 1)], meta=None)
    lines = [json.loads(line) for line in json_lines(runner)]  # no meta line when meta is None
    # The epoch lags the loader wrap by one iteration (MMCV reads it before fetching the batch).
    assert [(d['mode'], d['epoch'], d['iter']) for d in lines] == [('train', 1, 2),
                                                                  ('train', 1, 4)]
    assert lines[1]['loss'] == round((TRAIN[2] + TRAIN[0]) / 2, 5)  # the loader wrapped around
    console = [r.getMessage() for r in caplog.records if r.getMessage().startswith('Iter')]
    assert [line.split('\t')[0] for line in console] == ['Iter [2/4]', 'Iter [4/4]']


def test_train_lines_report_the_peak_cuda_memory_in_mib(tmp_path, caplog, monkeypatch):
    # No GPU here: pretend there is one that peaked at 3 MiB and a bit.
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'max_memory_allocated', lambda device=None: 3 * 2**20 + 5)
    with caplog.at_level(logging.INFO, logger='mmcv-logger-test'):
        runner = run(tmp_path, [dict(type='TextLoggerHook')], workflow=[('train', 1)])
    train = json.loads(json_lines(runner)[1])
    assert list(train) == ['mode', 'epoch', 'iter', 'lr', 'memory', 'data_time', 'loss', 'time']
    assert train['memory'] == 3
    assert any(re.search(r'data_time: \d+\.\d{3}, memory: 3, loss: ', r.getMessage())
               for r in caplog.records)


def test_two_optimizers_log_a_dict_of_lrs_unrounded(tmp_path, caplog):
    model = ToyModel()
    optimizer = dict(a=torch.optim.SGD(model.parameters(), lr=0.00617283945),
                     b=torch.optim.Adam(model.parameters(), lr=0.005))
    with caplog.at_level(logging.INFO, logger='mmcv-logger-test'):
        runner = run(tmp_path, [dict(type='TextLoggerHook')], optimizer=optimizer,
                     workflow=[('train', 1)])
    assert json.loads(json_lines(runner)[1])['lr'] == dict(a=0.00617283945, b=0.005)
    assert any('\tlr_a: 6.173e-03 lr_b: 5.000e-03, eta: ' in r.getMessage()
               for r in caplog.records)


@pytest.mark.parametrize('ignore_last,expected', [
    (True, [(2, (TRAIN[0] + TRAIN[1]) / 2)]),
    (False, [(2, (TRAIN[0] + TRAIN[1]) / 2), (3, (TRAIN[1] + TRAIN[2]) / 2)])])
def test_the_last_partial_interval_is_the_last_interval_entries(tmp_path, ignore_last, expected):
    runner = run(tmp_path, [dict(type='TextLoggerHook', ignore_last=ignore_last)],
                 workflow=[('train', 1)])
    logged = [json.loads(line) for line in json_lines(runner)[1:]]
    assert [(d['iter'], d['loss']) for d in logged] == [(i, round(v, 5)) for i, v in expected]


def test_only_the_last_logger_clears_the_output(tmp_path):
    needs('tensorboard')
    runner = run(tmp_path, [dict(type='TextLoggerHook'), dict(type='TensorboardLoggerHook')])
    text, board = [h for h in runner.hooks if isinstance(h, LoggerHook)]
    assert (text.reset_flag, board.reset_flag) == (False, True)
    assert runner.log_buffer.output == {} and not runner.log_buffer.ready


def test_tensorboard_logger_writes_tags_at_iter_plus_one(tmp_path):
    needs('tensorboard')
    run(tmp_path, [dict(type='TensorboardLoggerHook')])
    scalars, _ = read_tensorboard(tmp_path / 'tf_logs')
    assert sorted(scalars) == ['learning_rate', 'momentum', 'train/loss', 'val/loss']
    assert scalars['train/loss'] == [(2, pytest.approx((TRAIN[0] + TRAIN[1]) / 2))]
    assert scalars['val/loss'] == [(4, pytest.approx((VAL[0] + VAL[1]) / 2))]
    assert scalars['learning_rate'] == [(2, pytest.approx(0.1)), (4, pytest.approx(0.1))]
    assert scalars['momentum'] == [(2, pytest.approx(0.9)), (4, pytest.approx(0.9))]


class FakeRunner:
    mode, epoch, iter, inner_iter = 'train', 2, 7, 3

    def __init__(self, output=None):
        self.log_buffer = type('Buffer', (), dict(output=output or {}))()


def test_logger_hook_helpers_follow_mmcv():
    hook, runner = TextLoggerHook(), FakeRunner(dict(time=1.))
    assert hook.get_mode(runner) == 'train' and hook.get_epoch(runner) == 3
    assert hook.get_iter(runner) == 8 and hook.get_iter(runner, inner_iter=True) == 4
    assert TextLoggerHook(by_epoch=False).get_iter(runner, inner_iter=True) == 8
    assert hook.get_mode(FakeRunner()) == 'val'  # train mode without 'time': evaluation results
    runner.mode = 'val'
    assert hook.get_mode(runner) == 'val' and hook.get_epoch(runner) == 2
    runner.mode = 'test'
    with pytest.raises(ValueError, match="runner mode should be 'train' or 'val'"):
        hook.get_mode(runner)
    assert [LoggerHook.is_scalar(v) for v in (1, 0.5, np.array(2.), torch.ones(1), 'a',
                                              np.ones(2))] == [True] * 4 + [False] * 2
    with pytest.raises(TypeError):
        LoggerHook.is_scalar(torch.tensor(1.))  # MMCV takes len() of a 0-d tensor


def test_text_logger_copies_logs_to_out_dir(tmp_path):
    runner = run(tmp_path / 'work', [dict(type='TextLoggerHook', out_dir=str(tmp_path / 'out'),
                                          keep_local=False)], workflow=[('train', 1)])
    name = f'{runner.timestamp}.log.json'
    assert os.path.exists(tmp_path / 'out' / 'work' / name)
    assert not os.path.exists(tmp_path / 'work' / name)
    with pytest.raises(ValueError, match='file_client_args should be "None"'):
        TextLoggerHook(file_client_args=dict(backend='disk'))


def test_missing_service_packages_are_named_with_their_pip_install(tmp_path, monkeypatch):
    # As MMCV: the service hooks import their package when built (Pavi, TensorBoard: before
    # the run), and a missing one is an ImportError saying what to install.
    for name, module in [('WandbLoggerHook', 'wandb'), ('MlflowLoggerHook', 'mlflow'),
                         ('NeptuneLoggerHook', 'neptune.new'), ('DvcliveLoggerHook', 'dvclive'),
                         ('ClearMLLoggerHook', 'clearml'), ('SegmindLoggerHook', 'segmind')]:
        monkeypatch.setitem(sys.modules, module, None)
        with pytest.raises(ImportError, match=f'pip install {module.split(".")[0]}'):
            HOOKS.build(dict(type=name))
    monkeypatch.setitem(sys.modules, 'pavi', None)
    with pytest.raises(ImportError, match='No module named pavi'):
        run(tmp_path, [dict(type='PaviLoggerHook')])


class WandbSummary(Hook):

    def after_run(self, runner):
        board = next(h for h in runner.hooks if isinstance(h, LoggerHook))
        self.summary = dict(board.wandb.run.summary)


def test_wandb_logger_logs_tags_at_iter_plus_one(tmp_path, monkeypatch):
    needs('wandb')
    monkeypatch.chdir(tmp_path)  # as in MMCV, W&B writes to ./wandb unless init_kwargs say
    probe = WandbSummary()  # reads the run's summary before the logger's after_run closes it
    run(tmp_path, [dict(type='WandbLoggerHook', init_kwargs=dict(mode='offline', project='t'))],
        extra=[probe])
    assert glob.glob(str(tmp_path / 'wandb' / 'offline-run-*'))
    summary = probe.summary
    assert summary['train/loss'] == pytest.approx((TRAIN[0] + TRAIN[1]) / 2)
    assert summary['val/loss'] == pytest.approx((VAL[0] + VAL[1]) / 2)
    assert summary['learning_rate'] == 0.1 and summary['_step'] == 4  # step = iter + 1


def test_mlflow_logger_logs_metrics_and_the_model(tmp_path, monkeypatch):
    needs('mlflow')
    monkeypatch.setenv('MLFLOW_TRACKING_URI', f'file://{tmp_path}/mlruns')  # MLflow's own setting
    runner = run(tmp_path, [dict(type='MlflowLoggerHook', exp_name='demo', params=dict(seed=3))])
    hook = [h for h in runner.hooks if isinstance(h, LoggerHook)][0]
    mlflow = hook.mlflow
    client = mlflow.tracking.MlflowClient(f'file://{tmp_path}/mlruns')
    run_info, = client.search_runs([client.get_experiment_by_name('demo').experiment_id])
    history = client.get_metric_history(run_info.info.run_id, 'train/loss')
    assert [(m.step, m.value) for m in history] == [(2, (TRAIN[0] + TRAIN[1]) / 2)]
    assert run_info.data.params == {'seed': '3'}
    assert glob.glob(str(tmp_path / 'mlruns' / '*' / '*' / 'artifacts' / 'models' / '*')) or \
        glob.glob(str(tmp_path / 'mlruns' / '*' / 'models' / '*' / 'artifacts' / '*'))


def test_neptune_logger_logs_at_iter_plus_one(tmp_path, monkeypatch):
    needs('neptune')
    monkeypatch.chdir(tmp_path)
    run(tmp_path, [dict(type='NeptuneLoggerHook', init_kwargs=dict(
        mode='offline', capture_hardware_metrics=False, capture_stdout=False,
        capture_stderr=False, git_ref=False, source_files=[]))])
    ops = [json.loads(line)['obj'] for path in glob.glob('.neptune/offline/*/data-*.log')
           for line in open(path)]
    logged = {('/'.join(op['path']), v['step']): v['value'] for op in ops
              if op['type'] == 'LogFloats' for v in op['values']}
    assert logged[('train/loss', 2)] == pytest.approx((TRAIN[0] + TRAIN[1]) / 2)
    assert logged[('val/loss', 4)] == pytest.approx((VAL[0] + VAL[1]) / 2)


def needs_dvclive_1():
    """MMCV's hook calls ``Live.set_step`` and ``Live.log`` (dvclive < 2)."""
    dvclive = needs('dvclive')
    if not hasattr(dvclive.Live, 'set_step'):
        pytest.skip('dvclive >= 2 has no Live.set_step/Live.log, which MMCV 1.7 calls')
    return dvclive


def test_dvclive_logger_steps_by_epoch_and_saves_the_model(tmp_path, monkeypatch):
    needs_dvclive_1()
    monkeypatch.chdir(tmp_path)
    run(tmp_path, [dict(type='DvcliveLoggerHook', model_file=str(tmp_path / 'model.pth'))])
    metrics = tmp_path / 'dvclive' / 'plots' / 'metrics'
    # by_epoch: train iterations are not averaged, so only the val epoch is logged, at epoch 1.
    assert not (metrics / 'train').exists()
    rows = (metrics / 'val' / 'loss.tsv').read_text().split()
    assert rows[:2] == ['step', 'loss'] and rows[2] == '1'
    assert float(rows[3]) == pytest.approx((VAL[0] + VAL[1]) / 2)
    assert os.path.exists(tmp_path / 'model.pth')


def test_dvclive_logger_writes_to_the_callers_live_object(tmp_path, monkeypatch):
    dvclive = needs_dvclive_1()
    monkeypatch.chdir(tmp_path)
    live = dvclive.Live(str(tmp_path / 'own'))
    run(tmp_path, [dict(type='DvcliveLoggerHook', dvclive=live)])
    rows = (tmp_path / 'own' / 'plots' / 'metrics' / 'val' / 'loss.tsv').read_text().split()
    assert rows[:3] == ['step', 'loss', '1']
    assert float(rows[3]) == pytest.approx((VAL[0] + VAL[1]) / 2)
    assert not (tmp_path / 'dvclive').exists()  # nothing went to the hook's default folder


class CsvLoggerHook(LoggerHook):
    """A logger hook written as downstream repos write theirs against mmcv.runner: override
    ``log`` and build the record from ``get_mode``, ``get_iter`` and ``get_loggable_tags``."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.rows = []

    def log(self, runner):
        tags = self.get_loggable_tags(runner, add_mode=False)
        self.rows.append((self.get_mode(runner), self.get_epoch(runner),
                          self.get_iter(runner, inner_iter=True), self.get_iter(runner), tags))


def test_a_logger_hook_subclass_gets_mmcvs_records(tmp_path):
    hook = CsvLoggerHook(interval=2, ignore_last=False)
    model = ToyModel()
    runner = EpochBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1,
                                                               momentum=0.9),
                              work_dir=str(tmp_path), logger=logging.getLogger('t'), max_epochs=1)
    runner.register_hook(hook, priority='VERY_LOW')
    runner.register_hook(HOOKS.build(dict(type='IterTimerHook')), priority='LOW')
    runner.run([loader(6, 2), loader(4, 2, seed=1)], [('train', 1), ('val', 1)])
    common = dict(learning_rate=0.1, momentum=0.9)
    # train: at inner iters 2 and 3 (ignore_last=False: the last 2 entries, batches 2 and 3);
    # val: the mean of both batches, at val inner iter 2 and train iter 4 (3 done, + 1)
    assert [row[:4] for row in hook.rows] == [('train', 1, 2, 2), ('train', 1, 3, 3),
                                              ('val', 1, 2, 4)]
    assert [row[4]['loss'] for row in hook.rows] == pytest.approx(
        [(TRAIN[0] + TRAIN[1]) / 2, (TRAIN[1] + TRAIN[2]) / 2, (VAL[0] + VAL[1]) / 2])
    assert all({k: v for k, v in row[4].items() if k != 'loss'} == common for row in hook.rows)
    # the only logger hook is the last one: it clears the output after logging
    assert hook.reset_flag and runner.log_buffer.output == {}
