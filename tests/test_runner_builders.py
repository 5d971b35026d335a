"""The Runner's ``build_*`` methods and the root registries they build through, MMEngine's
private names other code reaches for, and three bugs (each test here failed on the code before)."""
import functools
import os.path as osp

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from minimm.config import Config, ConfigDict
from minimm.evaluator import Evaluator
from minimm.hooks import Hook
from minimm.logging import LogProcessor, Visualizer
from minimm.optim.scheduler import MultiStepLR
from minimm.registry import (EVALUATOR, FUNCTIONS, LOG_PROCESSORS, MODELS, OPTIMIZERS, RUNNERS,
                             VISUALIZERS, build_from_cfg)
from minimm.runner import Runner
from toy import ToyDataset, ToyMetric, ToyModel, toy_loader, toy_runner


class SyncBNModel(ToyModel):
    """The toy model with its BatchNorm layer a SyncBatchNorm."""

    def __init__(self):
        super().__init__()
        self.bn = nn.SyncBatchNorm(2)


def _cfg(tmp_path, **overrides):
    cfg = dict(
        model=dict(type='DigitsCNN'), work_dir=str(tmp_path),
        train_dataloader=dict(batch_size=64, num_batch_per_epoch=2,
                              dataset=dict(type='DigitsDataset', split='train'),
                              sampler=dict(type='DefaultSampler', shuffle=True),
                              collate_fn=dict(type='default_collate')),
        train_cfg=dict(by_epoch=True, max_epochs=2),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
        param_scheduler=dict(type='MultiStepLR', milestones=[1]),
        default_hooks=dict(logger=dict(type='LoggerHook', interval=1)),
        randomness=dict(seed=0))
    cfg.update(overrides)
    return Config(cfg)


@pytest.mark.parametrize('kind', [dict, ConfigDict, Config])
def test_build_from_cfg_takes_dict_configdict_and_config(kind):
    params = [torch.zeros(2, requires_grad=True)]
    optimizer = build_from_cfg(kind(dict(type='SGD', lr=0.5)), OPTIMIZERS,
                               default_args=dict(params=params))
    assert isinstance(optimizer, torch.optim.SGD) and optimizer.defaults['lr'] == 0.5
    with pytest.raises(TypeError, match='cfg should be a dict, ConfigDict or Config'):
        build_from_cfg('SGD', OPTIMIZERS)


def test_runners_build_honours_runner_type(tmp_path):
    @RUNNERS.register_module(force=True)
    class MyRunner(Runner):
        pass

    try:
        cfg = _cfg(tmp_path, runner_type='MyRunner')
        assert type(RUNNERS.build(cfg)) is MyRunner
        assert type(RUNNERS.build(_cfg(tmp_path))) is Runner
        with pytest.raises(KeyError, match="NoSuchRunner is not in the mmengine::runner registry"):
            RUNNERS.build(_cfg(tmp_path, runner_type='NoSuchRunner'))
    finally:
        RUNNERS.module_dict.pop('MyRunner')


def test_log_processor_type_defaults_to_log_processor(tmp_path):
    @LOG_PROCESSORS.register_module(force=True)
    class MyLogProcessor(LogProcessor):
        pass

    try:
        runner = Runner.from_cfg(_cfg(tmp_path, log_processor=dict(
            type='LogProcessor', window_size=50, by_epoch=True)))
        assert type(runner.log_processor) is LogProcessor and runner.log_processor.window_size == 50
        assert type(runner.build_log_processor(dict(window_size=3))) is LogProcessor
        assert type(runner.build_log_processor(dict(type='MyLogProcessor'))) is MyLogProcessor
        with pytest.raises(TypeError, match='log_processor should be'):
            runner.build_log_processor('LogProcessor')
    finally:
        LOG_PROCESSORS.module_dict.pop('MyLogProcessor')


def test_visualizer_type_is_built_and_an_unknown_one_is_a_registry_error(tmp_path):
    @VISUALIZERS.register_module(force=True)
    class MyVisualizer(Visualizer):
        pass

    try:
        runner = Runner.from_cfg(_cfg(tmp_path, visualizer=dict(
            type='MyVisualizer', vis_backends=[dict(type='LocalVisBackend')], name='vis')))
        assert type(runner.visualizer) is MyVisualizer
        assert MyVisualizer.get_current_instance() is runner.visualizer
        assert runner.visualizer.get_backend('LocalVisBackend') is not None
        with pytest.raises(KeyError, match="DetLocalVisualizer is not in the mmengine::visualizer "
                                           'registry'):
            Runner.from_cfg(_cfg(tmp_path, visualizer=dict(type='DetLocalVisualizer')))
    finally:
        VISUALIZERS.module_dict.pop('MyVisualizer')


def test_a_custom_evaluator_from_evaluator_is_used(tmp_path):
    @EVALUATOR.register_module(force=True)
    class MyEvaluator(Evaluator):
        pass

    try:
        runner = toy_runner(tmp_path, val=False)
        built = runner.build_evaluator(dict(type='MyEvaluator', metrics=[dict(type='Accuracy')]))
        assert type(built) is MyEvaluator and len(built.metrics) == 1
        assert type(runner.build_evaluator(dict(metrics=dict(type='Accuracy')))) is Evaluator
        assert type(runner.build_evaluator([dict(type='Accuracy')])) is Evaluator
        with pytest.raises(TypeError, match='evaluator should be'):
            runner.build_evaluator(ToyMetric())
        # and a run validates with it
        runner = toy_runner(tmp_path, val=False, val_dataloader=toy_loader(8, 4), val_cfg=dict(),
                            val_evaluator=dict(type='MyEvaluator', metrics=[ToyMetric()]))
        runner.train()
        assert type(runner.val_loop.evaluator) is MyEvaluator
    finally:
        EVALUATOR.module_dict.pop('MyEvaluator')


def test_logger_message_hub_and_visualizer_builders(tmp_path):
    runner = toy_runner(tmp_path, val=False, experiment_name='exp')
    assert runner.logger.instance_name == runner.experiment_name == runner._experiment_name
    assert runner.build_logger(name='other').instance_name == 'other'
    assert runner.build_message_hub(dict(name='hub')).instance_name == 'hub'
    assert runner.build_message_hub().instance_name == runner.experiment_name
    assert runner.build_visualizer(runner.visualizer) is runner.visualizer
    with pytest.raises(TypeError, match='message_hub should be'):
        runner.build_message_hub('hub')
    with pytest.raises(TypeError, match='visualizer should be'):
        runner.build_visualizer('vis')
    # the log file is where MMEngine puts it, found through MMEngine's private name
    assert runner._log_dir == runner.log_dir == osp.join(runner.work_dir, runner.timestamp)
    assert osp.isfile(osp.join(runner._log_dir, f'{runner.timestamp}.log'))


def test_loop_counters_are_read_only_properties_over_private_ones(tmp_path):
    runner = toy_runner(tmp_path, val=False)
    loop = runner.train_loop
    loop._epoch, loop._iter = 3, 7
    assert (runner.epoch, runner.iter, loop.epoch, loop.iter) == (3, 7, 3, 7)
    with pytest.raises(AttributeError):
        loop.epoch = 1
    assert (loop._max_epochs, loop._max_iters) == (loop.max_epochs, loop.max_iters) == (2, 6)
    assert runner._resume is False


def test_log_processor_private_helpers(tmp_path):
    runner = toy_runner(tmp_path)
    processor = LogProcessor(by_epoch=True)
    assert processor._get_cur_loop(runner, 'train') is runner.train_loop
    assert processor._get_cur_loop(runner, 'val') is runner.val_loop
    runner.train_loop._iter = 10
    assert processor._get_iter(runner, 1) == 2
    processor.by_epoch = False
    assert processor._get_iter(runner, 1) == 11


def test_resume_before_the_schedulers_are_built(tmp_path):
    """MMEngine's tests call ``runner.resume(path)`` right after building the runner; the
    schedulers were still configs, and resuming failed ('str' has no load_state_dict)."""
    Runner.from_cfg(_cfg(tmp_path / 'a')).train()
    path = str(tmp_path / 'a' / 'epoch_2.pth')
    runner = Runner.from_cfg(_cfg(tmp_path / 'b'))
    runner.resume(path)
    (scheduler,) = runner.param_schedulers
    assert isinstance(scheduler, MultiStepLR)
    saved = torch.load(path, weights_only=True)['param_schedulers'][0]
    assert scheduler.last_step == saved['last_step'] > 0  # a new scheduler has last_step 0
    assert (runner.epoch, runner.iter) == (2, 4)
    # the optimizer's lr is the one after the milestone, as saved: 0.1 * 0.1
    assert runner.optim_wrapper.get_lr()['lr'] == [pytest.approx(0.01)]
    # train() builds nothing twice
    runner.train()
    assert runner.param_schedulers[0] is scheduler


def _init_fn(worker_id, offset=0):
    torch.manual_seed(worker_id + offset)


def test_worker_init_fn_from_a_config_is_a_partial(tmp_path):
    FUNCTIONS.register_module(module=_init_fn, name='toy_init_fn', force=True)
    try:
        runner = toy_runner(tmp_path, val=False)
        cfg = dict(dataset=ToyDataset(), sampler=dict(type='DefaultSampler', shuffle=False),
                   batch_size=4, num_workers=0)
        loader = runner.build_dataloader(dict(cfg, worker_init_fn=dict(type='toy_init_fn')))
        assert isinstance(loader.worker_init_fn, functools.partial)
        assert loader.worker_init_fn.func is _init_fn and loader.worker_init_fn.keywords == {}
        loader = runner.build_dataloader(dict(cfg, worker_init_fn=dict(type='toy_init_fn',
                                                                       offset=3)))
        assert loader.worker_init_fn.keywords == dict(offset=3)
        loader = runner.build_dataloader(dict(cfg, collate_fn=dict(type='default_collate')))
        assert isinstance(loader.collate_fn, functools.partial)
        with pytest.raises(TypeError, match='collate_fn should be a dict or callable object'):
            runner.build_dataloader(dict(cfg, collate_fn='default_collate'))
        loader = runner.build_dataloader(dict(cfg, num_batch_per_epoch=2))
        assert len(loader.dataset) == 8 and len(loader) == 2
    finally:
        FUNCTIONS.module_dict.pop('toy_init_fn')


def test_syncbn_is_reverted_to_batchnorm_when_not_distributed(tmp_path):
    torch.manual_seed(0)
    model = SyncBNModel()
    bn_weight = model.bn.weight
    runner = Runner(model=model, work_dir=str(tmp_path))
    assert not isinstance(runner.model.bn, nn.SyncBatchNorm)
    assert isinstance(runner.model.bn, nn.modules.batchnorm._BatchNorm)
    assert runner.model.bn.weight is bn_weight  # the same parameter, nothing copied
    # it computes what BatchNorm computes, on a CPU without a process group
    x = torch.randn(6, 4)
    expected = F.batch_norm(model.linear(x), torch.zeros(2), torch.ones(2), bn_weight,
                            model.bn.bias, training=True)
    assert torch.allclose(runner.model(x), expected, atol=1e-6)
    # and so does a runner built from a config
    MODELS.register_module(module=SyncBNModel, force=True)
    try:
        built = Runner.from_cfg(_cfg(tmp_path, model=dict(type='SyncBNModel')))
        assert not isinstance(built.model.bn, nn.SyncBatchNorm)
    finally:
        MODELS.module_dict.pop('SyncBNModel')


def test_call_hook_looks_the_method_up_at_call_time(tmp_path):
    calls = []

    class Rebinding(Hook):
        def before_train_epoch(self, runner):
            calls.append(('class', runner.epoch))
            # from now on this instance is called through its new method
            self.before_train_epoch = lambda runner: calls.append(('rebound', runner.epoch))

    plain = Hook()  # a stage assigned on an instance whose class does not override it
    plain.after_train_iter = lambda runner, batch_idx, data_batch=None, outputs=None: \
        calls.append(('instance', batch_idx))
    runner = toy_runner(tmp_path, max_=3, val=False, custom_hooks=[Rebinding(), plain])
    runner.train()
    epochs = [c for c in calls if c[0] != 'instance']
    assert epochs == [('class', 0), ('rebound', 1), ('rebound', 2)]
    assert [c for c in calls if c[0] == 'instance'] == [('instance', i) for i in range(3)] * 3


def test_dynamic_intervals_change_val_interval(tmp_path):
    validated = []

    class RecordVal(Hook):
        def before_val(self, runner):
            validated.append(runner.epoch)

    runner = Runner(model=ToyModel(), work_dir=str(tmp_path), train_dataloader=toy_loader(12, 4),
                    train_cfg=dict(by_epoch=True, max_epochs=6, val_interval=3,
                                   dynamic_intervals=[(5, 1)]),
                    optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
                    val_dataloader=toy_loader(8, 4), val_cfg=dict(), val_evaluator=ToyMetric(),
                    custom_hooks=[RecordVal()])
    runner.train()
    # val_interval is 3 until the next epoch reaches milestone 5, then 1 (val_interval=3 alone
    # validates after epochs 3 and 6)
    assert validated == [3, 4, 5, 6]
