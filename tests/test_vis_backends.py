"""The MMEngine-style visualisation backends for TensorBoard and the tracking services, each
checked by reading back what it wrote (event files, local stores, offline logs).

A service's test is skipped, with the reason shown, when its optional package is not installed
(``pip install minimm[loggers]`` installs them all); the missing-package message is tested for
every backend whether or not the package is there.
"""
import csv
import glob
import json
import os
import sys

import pytest
import torch

from minimm.logging import (ClearMLVisBackend, DVCLiveVisBackend, MLflowVisBackend,
                            NeptuneVisBackend, TensorboardVisBackend, Visualizer, WandbVisBackend)
from minimm.registry import VISBACKENDS

BACKENDS = [(TensorboardVisBackend, 'tensorboard', 'tensorboard'),
            (WandbVisBackend, 'wandb', 'wandb'), (MLflowVisBackend, 'mlflow', 'mlflow-skinny'),
            (NeptuneVisBackend, 'neptune', 'neptune'), (DVCLiveVisBackend, 'dvclive', 'dvclive'),
            (ClearMLVisBackend, 'clearml', 'clearml')]


def needs(module):
    """Skip, naming the package, when ``module`` cannot be imported."""
    return pytest.importorskip(module, reason=f'{module} is not installed (pip install '
                                              f'minimm[loggers])')


def read_tensorboard(log_dir):
    """``{tag: [(step, value)]}`` and ``{tag: text}`` of the event files in ``log_dir``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(log_dir), size_guidance={'tensors': 0, 'scalars': 0})
    acc.Reload()
    scalars = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()['scalars']}
    texts = {tag: acc.Tensors(tag)[0].tensor_proto.string_val[0].decode()
             for tag in acc.Tags()['tensors']}
    return scalars, texts


@pytest.mark.parametrize('cls,module,pip_name', BACKENDS, ids=[m for _, m, _ in BACKENDS])
def test_backends_are_lazy_registered_and_name_the_missing_package(tmp_path, monkeypatch, cls,
                                                                  module, pip_name):
    assert VISBACKENDS.get(cls.__name__) is cls
    backend = cls(str(tmp_path / 'out'))
    assert not (tmp_path / 'out').exists()  # nothing is created before the first write
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    with pytest.raises(ImportError, match=f'{cls.__name__} needs the {module} package: run '
                                          f'"pip install {pip_name}"'):
        backend.add_scalar('loss', 1.0)
    backend.close()  # closing a backend that never started is a no-op


def test_tensorboard_writes_scalars_and_config_that_read_back(tmp_path):
    needs('tensorboard')
    backend = TensorboardVisBackend(str(tmp_path))
    backend.add_config(dict(lr=0.5))
    backend.add_scalars({'loss': 0.25, 'acc': torch.tensor(0.5)}, step=3)
    backend.add_scalar('loss', 0.125, step=4)
    with pytest.warns(UserWarning, match='Skip it: name'):
        backend.add_scalar('name', 'text')
    with pytest.raises(KeyError, match='step argument'):
        backend.add_scalars({'step': 1})
    backend.close()
    scalars, texts = read_tensorboard(tmp_path)
    assert scalars == {'loss': [(3, 0.25), (4, 0.125)], 'acc': [(3, 0.5)]}
    assert texts == {'config/text_summary': 'lr = 0.5\n'}


def test_wandb_offline_run_keeps_the_logged_values(tmp_path):
    needs('wandb')
    backend = WandbVisBackend(str(tmp_path), init_kwargs=dict(mode='offline', project='minimm'),
                              define_metric_cfg=dict(loss='min'))
    backend.add_scalars({'loss': 0.5, 'acc': 0.25}, step=1)
    backend.add_scalar('loss', 0.75, step=2)
    backend.add_config(dict(lr=0.5, model=dict(depth=2)))
    run = backend.experiment.run
    summary, config = dict(run.summary), dict(run.config)
    loss_min = summary['loss']['min']  # define_metric asked for the minimum of the loss
    backend.close()
    assert loss_min == 0.5 and summary['acc'] == 0.25
    assert summary['_step'] == 1  # two wandb.log calls: steps 0 and 1
    assert config == dict(lr=0.5, model=dict(depth=2))
    assert glob.glob(str(tmp_path / 'wandb' / 'offline-run-*' / 'run-*.wandb'))
    with pytest.raises(ValueError, match='define_metric_cfg should be dict or list'):
        WandbVisBackend(str(tmp_path), define_metric_cfg='loss')


def test_mlflow_file_store_keeps_metrics_params_and_config(tmp_path):
    needs('mlflow')
    backend = MLflowVisBackend(str(tmp_path), exp_name='demo', run_name='first',
                               tags=dict(kind='test'), params=dict(seed=3))
    backend.add_scalars({'loss': 0.5, 'acc': 0.25}, step=1)
    backend.add_scalar('loss', 0.125, step=2)
    backend.add_config(dict(lr=0.5, model=dict(depth=2, layers=[dict(k=3)])))
    mlflow = backend.experiment
    run_id = mlflow.active_run().info.run_id
    backend.close()
    client = mlflow.tracking.MlflowClient(f'file://{tmp_path}')
    history = client.get_metric_history(run_id, 'loss')
    assert [(m.step, m.value) for m in history] == [(1, 0.5), (2, 0.125)]
    run = client.get_run(run_id)
    assert run.data.params == {'seed': '3', 'lr': '0.5', 'model.depth': '2',
                               'model.layers.0.k': '3'}
    assert run.data.tags['kind'] == 'test' and run.data.tags['mlflow.runName'] == 'first'
    assert client.get_experiment(run.info.experiment_id).name == 'demo'
    config_file = os.path.join(run.info.artifact_uri.replace('file://', ''), 'config.py')
    assert open(config_file).read() == "lr = 0.5\nmodel = {'depth': 2, 'layers': [{'k': 3}]}\n"


def test_neptune_offline_run_logs_values_at_their_steps(tmp_path, monkeypatch):
    needs('neptune')
    monkeypatch.chdir(tmp_path)  # offline runs are stored in ./.neptune
    backend = NeptuneVisBackend(init_kwargs=dict(
        mode='offline', capture_hardware_metrics=False, capture_stdout=False,
        capture_stderr=False, git_ref=False, source_files=[]))
    backend.add_scalars({'loss': 0.5, 'acc': 0.25}, step=1)
    backend.add_scalar('loss', 0.125, step=2)
    backend.add_config(dict(lr=0.5))
    backend.close()
    ops = [json.loads(line)['obj'] for path in glob.glob('.neptune/offline/*/data-*.log')
           for line in open(path)]
    logged = [('/'.join(op['path']), v['step'], v['value']) for op in ops if op['type'] == 'LogFloats'
              for v in op['values']]
    assert logged == [('loss', 1, 0.5), ('acc', 1, 0.25), ('loss', 2, 0.125)]
    assert any(op['type'] == 'UploadFile' and op['path'] == ['config'] for op in ops)


def test_dvclive_writes_metric_tables_and_params_in_save_dir(tmp_path, monkeypatch):
    needs('dvclive')
    monkeypatch.chdir(tmp_path)
    backend = DVCLiveVisBackend(str(tmp_path / 'dvc'))
    backend.add_scalars({'loss': 0.5, 'acc': torch.tensor(0.25)}, step=1)
    backend.add_scalar('loss', 0.125, step=2)
    backend.add_config(dict(lr=0.5, model=dict(depth=2)))
    backend.close()
    with open(tmp_path / 'dvc' / 'plots' / 'metrics' / 'loss.tsv') as f:
        rows = list(csv.DictReader(f, delimiter='\t'))
    assert [(int(r['step']), float(r['loss'])) for r in rows] == [(1, 0.5), (2, 0.125)]
    assert json.load(open(tmp_path / 'dvc' / 'metrics.json')) == dict(loss=0.125, acc=0.25,
                                                                     step=2)
    assert 'depth: 2' in (tmp_path / 'dvc' / 'params.yaml').read_text()
    assert sorted(os.listdir(tmp_path)) == ['dvc']  # nothing written outside save_dir


def test_clearml_offline_task_reports_scalars(tmp_path, monkeypatch):
    clearml = needs('clearml')
    monkeypatch.setenv('HOME', str(tmp_path))  # the offline session goes to ~/.clearml
    # Offline for the rest of the test session too: going back online needs a configured server.
    clearml.Task.set_offline(offline_mode=True)
    backend = ClearMLVisBackend(init_kwargs=dict(
        project_name='minimm', task_name='test', auto_connect_frameworks=False,
        auto_resource_monitoring=False, auto_connect_streams=False))
    backend.add_scalars({'loss': 0.5}, step=1)
    backend.add_scalar('loss', 0.125, step=2)
    folder = backend._task.get_offline_mode_folder()
    backend.close()
    events = [e for line in open(os.path.join(folder, 'metrics.jsonl'))
              for e in json.loads(line) if e.get('type') == 'training_stats_scalar']
    assert [(e['metric'], e['variant'], e['iter'], e['value']) for e in events] == [
        ('loss', 'loss', 1, 0.5), ('loss', 'loss', 2, 0.125)]


def test_visualizer_builds_a_service_backend_from_its_config(tmp_path):
    vis = Visualizer('services', vis_backends=[dict(type='DVCLiveVisBackend')],
                     save_dir=str(tmp_path))
    backend = vis.get_backend('DVCLiveVisBackend')
    assert isinstance(backend, DVCLiveVisBackend)
    assert backend._save_dir == str(tmp_path / 'vis_data')
