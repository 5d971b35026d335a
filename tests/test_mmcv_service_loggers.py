"""minimm.mmcv's service logger hooks with stand-in service packages: the calls MMCV 1.7's hooks
make on ``wandb``, ``mlflow``, ``clearml`` and ``pavi`` (no public package), with the values a
closed form gives."""
import logging
import os
import sys
import types

import pytest
import torch

from minimm.mmcv import EpochBasedRunner, IterBasedRunner, LoggerHook
from mmcv_toy import ToyModel, loader
from test_mmcv_logger import TRAIN, VAL, run


class FakeService(types.ModuleType):
    """A stand-in service package that records every call made on it, and on what it returns."""

    def __init__(self, name, calls):
        super().__init__(name)
        self.calls = calls

    def __getattr__(self, attr):
        if attr.startswith('__'):
            raise AttributeError(attr)
        return FakeCall(f'{self.__name__}.{attr}', self.calls)


class FakeCall:

    def __init__(self, path, calls):
        self.path, self.calls = path, calls

    def __getattr__(self, attr):
        return FakeCall(f'{self.path}.{attr}', self.calls)

    def __getitem__(self, key):
        return FakeCall(f'{self.path}[{key!r}]', self.calls)

    def __call__(self, *args, **kwargs):
        self.calls.append((self.path, args, kwargs))
        return FakeCall(f'{self.path}()', self.calls)


# What the toy run (3 train batches, logged at iteration 2; 2 val batches) gives at each step.
TAGS = {2: {'train/loss': pytest.approx((TRAIN[0] + TRAIN[1]) / 2), 'learning_rate': 0.1,
            'momentum': 0.9},
        4: {'val/loss': pytest.approx((VAL[0] + VAL[1]) / 2), 'learning_rate': 0.1,
            'momentum': 0.9}}


@pytest.mark.parametrize('hook_cfg, package, expected', [
    (dict(type='WandbLoggerHook', init_kwargs=dict(project='p'), log_artifact=False), 'wandb', [
        ('wandb.init', (), dict(project='p')),
        ('wandb.log', (TAGS[2], ), dict(step=2, commit=True)),
        ('wandb.log', (TAGS[4], ), dict(step=4, commit=True)),
        ('wandb.join', (), {})]),
    (dict(type='MlflowLoggerHook', exp_name='e', log_model=False), 'mlflow', [
        ('mlflow.set_experiment', ('e', ), {}),
        ('mlflow.log_metrics', (TAGS[2], ), dict(step=2)),
        ('mlflow.log_metrics', (TAGS[4], ), dict(step=4))]),
    (dict(type='ClearMLLoggerHook'), 'clearml', [
        ('clearml.Task.init', (), {}), ('clearml.Task.init().get_logger', (), {})] + [
        ('clearml.Task.init().get_logger().report_scalar', (tag, tag, value, step), {})
        for step in (2, 4) for tag, value in TAGS[step].items()]),
    (dict(type='NeptuneLoggerHook'), 'neptune.new', [('neptune.new.init', (), {})] + [
        (f'neptune.new.init()[{tag!r}].log', (value, ), dict(step=step))
        for step in (2, 4) for tag, value in TAGS[step].items()] + [
        ('neptune.new.init().stop', (), {})]),
    # without a step, Neptune numbers the points; the iteration is a series of its own (MMCV
    # raised here: it added 'global_step' to the dict it was iterating over)
    (dict(type='NeptuneLoggerHook', with_step=False), 'neptune.new', [
        ('neptune.new.init', (), {})] + [
        (f'neptune.new.init()[{tag!r}].log', (value, ), {})
        for step in (2, 4) for tag, value in {**TAGS[step], 'global_step': step}.items()] + [
        ('neptune.new.init().stop', (), {})]),
    # by epoch, DVCLive logs after train epochs only (nothing averaged there) and val epochs,
    # stepped by the epoch
    (dict(type='DvcliveLoggerHook', dir='d'), 'dvclive', [
        ('dvclive.Live', (), dict(dir='d')), ('dvclive.Live().set_step', (1, ), {})] + [
        ('dvclive.Live().log', (tag, value), {}) for tag, value in TAGS[4].items()]),
])
def test_service_hooks_call_their_package_as_mmcv_does(tmp_path, monkeypatch, hook_cfg, package,
                                                       expected):
    calls = []
    for name in (package, f'{package}.pytorch'):
        monkeypatch.setitem(sys.modules, name, FakeService(name, calls))
    monkeypatch.setitem(sys.modules, 'neptune', FakeService('neptune', calls))
    runner = run(tmp_path, [hook_cfg])
    hook = next(h for h in runner.hooks if isinstance(h, LoggerHook))
    # the package (DVCLive: its Live) is kept on the hook, where MMCV keeps it
    kept = getattr(hook, package.split('.')[0])
    assert kept.calls is calls
    assert calls == expected


def test_pavi_hook_works_with_whatever_pavi_module_is_importable(tmp_path, monkeypatch):
    # There is no public pavi package (SenseTime's internal service): a stand-in, as MMCV's
    # tests use, must be enough.
    calls = []

    class SummaryWriter:
        def __init__(self, **kwargs):
            calls.append(('init', kwargs))

        def add_scalars(self, mode, tags, step):
            calls.append(('add_scalars', mode, tags, step))

        def add_snapshot_file(self, tag, snapshot_file_path, iteration):
            calls.append(('add_snapshot_file', tag, os.path.basename(snapshot_file_path),
                          iteration))

        def close(self):
            calls.append(('close', ))

    monkeypatch.setitem(sys.modules, 'pavi', types.SimpleNamespace(SummaryWriter=SummaryWriter))
    model = ToyModel()
    runner = EpochBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1,
                                                               momentum=0.9),
                              work_dir=str(tmp_path / 'run7'), logger=logging.getLogger('t'),
                              max_epochs=3, meta=dict(exp_name='x'))
    runner.register_training_hooks(lr_config=None, checkpoint_config=dict(interval=1),
                                   log_config=dict(interval=3, hooks=[dict(
                                       type='PaviLoggerHook', add_last_ckpt=True,
                                       add_ckpt_kwargs=dict(active=True, start=1, interval=2))]))
    runner.run([loader(6, 2), loader(4, 2, seed=1)], [('train', 1), ('val', 1)])
    common = dict(learning_rate=0.1, momentum=0.9)
    assert calls[0] == ('init', dict(name='run7', model='ToyModel'))
    scalars = [c for c in calls if c[0] == 'add_scalars']
    # train: at iter 3, 6, 9 (interval 3 = one epoch); val: at the epoch (by_epoch)
    assert [(c[1], c[3]) for c in scalars] == [('train', 3), ('val', 1), ('train', 6), ('val', 2),
                                               ('train', 9), ('val', 3)]
    assert all(set(c[2]) == {'loss', *common} for c in scalars)
    assert scalars[1][2]['loss'] == pytest.approx((VAL[0] + VAL[1]) / 2)
    # checkpoints of epochs 1 and 3 (start 1, every 2), then latest.pth, resolved to its target
    assert [c[1:] for c in calls if c[0] == 'add_snapshot_file'] == [
        ('run7', 'epoch_1.pth', 1), ('run7', 'epoch_3.pth', 3), ('run7', 'epoch_3.pth', 3)]
    assert calls[-1] == ('close', )


def test_pavi_uploads_the_graph_with_the_dummy_forward_and_puts_forward_back(tmp_path,
                                                                             monkeypatch):
    # An IterBasedRunner: the hook takes the first batch from the DataLoader inside its
    # IterLoader. The graph is traced with forward(img, **dummy_forward_kwargs); when tracing
    # fails, the model keeps its own forward.
    graphs = []

    class SummaryWriter:
        def __init__(self, **kwargs):
            pass

        def add_graph(self, model, img, tag, opset_version):
            if tag.endswith('_3'):
                raise RuntimeError('tracing failed')
            graphs.append((tag, tuple(img.shape), opset_version, type(model(img))))

        def add_scalars(self, *args):
            pass

    monkeypatch.setitem(sys.modules, 'pavi', types.SimpleNamespace(SummaryWriter=SummaryWriter))
    model = ToyModel()
    runner = IterBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                             work_dir=str(tmp_path / 'g'), logger=logging.getLogger('t'),
                             max_iters=4)
    runner.register_training_hooks(lr_config=None, log_config=dict(interval=2, hooks=[dict(
        type='PaviLoggerHook', by_epoch=False, add_graph_kwargs=dict(
            active=True, start=1, interval=2, img_key='x', opset_version=13,
            dummy_forward_kwargs=dict(return_loss=False)))]))
    with pytest.raises(RuntimeError, match='tracing failed'):
        runner.run([loader(6, 2)], [('train', 1)])
    # step 1 (iter 0 + 1) is due, step 2 is not, step 3 fails; return_loss=False gives a list
    assert graphs == [('g_1', (2, 3), 13, list)]
    assert model.forward.__func__ is ToyModel.forward
