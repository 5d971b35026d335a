"""Every bad value named before work is wasted (issue 32): the options of every built-in hook and
loop, schedulers, optimizer, optimizer wrapper and dataloaders, in both config styles; checkpoints
that do not fit; non-finite losses and metrics; a real MMEngine 0.10.7 checkpoint."""
import inspect
import math
import os
import os.path as osp

import pytest
import torch
from torch.utils.data import DataLoader

from minimm.checkpoint import load_checkpoint_file
from minimm.cli import DEMO_CONFIG, command_line
from minimm.logging.history_buffer import HistoryBuffer
from minimm.registry import HOOKS, LOOPS
from minimm.runner import Runner
from toy import ScriptedMetric, ToyDataset, ToyModel, toy_loader, toy_loader_cfg, toy_runner

pytestmark = pytest.mark.ops_backend  # toy_runner's model trains through the ops

# The oracle, written by hand from MMEngine 0.10's signatures: each built-in hook's and loop's
# options that are booleans, numbers or sequences. test_the_table_lists_every_option keeps it
# whole as hooks change.
OPTIONS = {
    'CheckpointHook': dict(interval='number', by_epoch='bool', save_optimizer='bool',
                           save_param_scheduler='bool', max_keep_ckpts='number',
                           save_last='bool', save_begin='number'),
    'EMAHook': dict(strict_load='bool', begin_iter='number', begin_epoch='number'),
    'EarlyStoppingHook': dict(min_delta='number', strict='bool', check_finite='bool',
                              patience='number', stopping_threshold='number'),
    'EmptyCacheHook': dict(before_epoch='bool', after_epoch='bool', after_iter='bool'),
    'LoggerHook': dict(interval='number', ignore_last='bool', interval_exp_name='number',
                       keep_local='bool', log_metric_by_epoch='bool'),
    'ProfilerHook': dict(by_epoch='bool', profile_times='number', activity_with_cpu='bool',
                         activity_with_cuda='bool', record_shapes='bool', profile_memory='bool',
                         with_stack='bool', with_flops='bool'),
    'DistSamplerSeedHook': {}, 'EMAOnlyCheckpointHook': {}, 'IterTimerHook': {},
    'ParamSchedulerHook': {}, 'RawWeightsEvalHook': {}, 'RuntimeInfoHook': {},
    'PostHocEMAHook': dict(sigma_rels='sequence', snapshot_interval='number',
                           update_buffers='bool'),
    'SyncBuffersHook': {},
    'EpochBasedTrainLoop': dict(val_begin='number', val_interval='number', max_epochs='number',
                                dynamic_intervals='sequence'),
    'IterBasedTrainLoop': dict(val_begin='number', val_interval='number', max_iters='number',
                               dynamic_intervals='sequence'),
    'ValLoop': dict(fp16='bool'), 'TestLoop': dict(fp16='bool'),
}
BAD = dict(bool='no', number='3', sequence=3)
ALLOWED = dict(bool='must be True or False', number='must be a number',
               sequence='must be a list or a tuple')
REQUIRED = dict(EarlyStoppingHook=dict(monitor='toy/acc'))


def _built_in(registry):
    return {name: cls for name, cls in registry.module_dict.items()
            if cls.__module__.startswith('minimm.')}


def test_the_table_lists_every_option():
    for name, cls in {**_built_in(HOOKS), **_built_in(LOOPS)}.items():
        assert name in OPTIONS, f'{name} is missing from OPTIONS'
        signature = inspect.signature(cls.__init__).parameters.values()
        typed = {p.name for p in signature
                 if isinstance(p.default, (bool, int, float)) and p.name != 'priority'}
        if name.endswith('TrainLoop'):  # the loop's own counter only
            typed -= {'max_iters' if name.startswith('Epoch') else 'max_epochs'}
        assert typed <= set(OPTIONS[name]), (name, typed - set(OPTIONS[name]))


def _runner_with(tmp_path, name, key, value):
    """A Runner config with ``name`` (a hook or loop) given ``key=value``."""
    kwargs = dict(model=ToyModel(), work_dir=str(tmp_path), train_dataloader=toy_loader_cfg(),
                  optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
                  train_cfg=dict(by_epoch=True, max_epochs=1), val_dataloader=toy_loader_cfg(),
                  val_cfg=dict(), val_evaluator=ScriptedMetric([1.0]))
    if name in HOOKS.module_dict:
        kwargs['custom_hooks'] = [dict(type=name, **REQUIRED.get(name, {}), **{key: value})]
    elif name == 'ValLoop':
        kwargs['val_cfg'] = {key: value}
    elif name == 'TestLoop':
        kwargs.update(test_dataloader=toy_loader_cfg(), test_cfg={key: value},
                      test_evaluator=ScriptedMetric([1.0]))
    else:
        kwargs['train_cfg'] = dict(type=name, **{key: value},
                                   **({} if key.startswith('max_') else
                                      {'max_epochs' if name.startswith('Epoch') else
                                       'max_iters': 1}))
    return Runner(**kwargs)


def _own_refusal(cls, key, value):
    """The error ``cls`` raises for ``key=value`` when it checks that option itself, else None."""
    if key not in getattr(cls, 'checked_in_init', ()):
        return None
    try:
        cls(**{key: value})
    except (TypeError, ValueError) as error:
        return error
    return None


CASES = [(name, key, kind) for name, options in OPTIONS.items() for key, kind in options.items()]


@pytest.mark.parametrize('name,key,kind', CASES, ids=[f'{n}.{k}' for n, k, _ in CASES])
def test_a_bad_option_of_a_built_in_hook_or_loop_is_named_at_start(tmp_path, name, key, kind):
    cls = {**HOOKS.module_dict, **LOOPS.module_dict}[name]
    own = _own_refusal(cls, key, BAD[kind])
    if own is not None:
        # The class refuses it itself: one message, its own, whether built in Python or from
        # a config (there with where it is).
        with pytest.raises(type(own)) as info:
            _runner_with(tmp_path, name, key, BAD[kind])
        assert str(info.value) == f'custom_hooks[0]: {own}'
        return
    with pytest.raises(ValueError) as info:
        _runner_with(tmp_path, name, key, BAD[kind])
    message = str(info.value)
    allowed = ALLOWED[kind] if key not in ('max_epochs', 'max_iters', 'val_begin',
                                           'val_interval') else 'must be an integer'
    assert f'{key}={BAD[kind]!r}' in message and allowed in message, message


@pytest.mark.parametrize('name,key,message', [
    ('CheckpointHook', 'interval', r'custom_hooks\[0\]: interval=0: must not be 0'),
    ('LoggerHook', 'interval', r'custom_hooks\[0\]: interval must be greater than 0, got 0'),
    ('LoggerHook', 'interval_exp_name',
     r'custom_hooks\[0\]: interval_exp_name must be greater than 0, got 0'),
    ('EpochBasedTrainLoop', 'val_interval', 'val_interval=0: must be an integer >= 1')])
def test_an_interval_of_zero_is_refused(tmp_path, name, key, message):
    with pytest.raises(ValueError, match=message):
        _runner_with(tmp_path, name, key, 0)


@pytest.mark.parametrize('name,key,value', [
    ('LoggerHook', 'interval', '3'), ('LoggerHook', 'ignore_last', 'no'),
    ('LoggerHook', 'interval', 0), ('PostHocEMAHook', 'snapshot_interval', 0),
    ('CheckpointHook', 'interval', 0)])
def test_one_mistake_has_one_message_in_python_and_in_a_config(tmp_path, name, key, value):
    # The oracle: what the class says when built directly; a config says the same, with where.
    with pytest.raises((TypeError, ValueError)) as own:
        HOOKS.get(name)(**{key: value})
    with pytest.raises(type(own.value)) as info:
        _runner_with(tmp_path, name, key, value)
    assert str(info.value) == f'custom_hooks[0]: {own.value}'


@pytest.mark.parametrize('value', [True, False, 0, 1])
def test_what_mmengine_accepts_as_a_boolean_is_accepted(tmp_path, value):
    _runner_with(tmp_path, 'CheckpointHook', 'by_epoch', value)
    _runner_with(tmp_path, 'ValLoop', 'fp16', value)


@pytest.mark.parametrize('where,entry,message', [
    ('param_scheduler', dict(type='LinearLR', by_epoch='no'),
     "param_scheduler[0].by_epoch='no': must be True or False (a non-empty string is true"),
    ('param_scheduler', dict(type='MultiStepLR', milestones=1),
     'param_scheduler[0].milestones=1: must be a list or a tuple (an option of MultiStepLR)'),
    ('param_scheduler', dict(type='StepLR', step_size=1, gamma='0.1'),
     "param_scheduler[0].gamma='0.1': must be a number (it is a string: write 0.1 without"),
    ('optimizer', dict(type='SGD', lr='0.1'),
     "optim_wrapper.optimizer.lr='0.1': must be a number (it is a string: write 0.1 without"),
    ('clip_grad', dict(max_norm='x'), "optim_wrapper.clip_grad.max_norm='x': must be a number"),
    ('wrapper', dict(accumulative_counts='2'),
     "optim_wrapper.accumulative_counts='2': must be a number"),
    ('loader', dict(batch_size='32'),
     "train_dataloader.batch_size='32': must be a number (it is a string: write 32 without"),
    ('loader', dict(num_workers='2'), "train_dataloader.num_workers='2': must be a number"),
    ('sampler', dict(type='DefaultSampler', shuffle='False'),
     "train_dataloader.sampler.shuffle='False': must be True or False"),
    ('train_cfg', dict(by_epoch='yes', max_epochs=1), "train_cfg.by_epoch='yes': must be True"),
])
def test_schedulers_optimizer_and_dataloader_options_are_named(tmp_path, where, entry, message):
    kwargs = dict(optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)))
    if where == 'param_scheduler':
        kwargs['param_scheduler'] = [entry]
    elif where == 'optimizer':
        kwargs['optim_wrapper'] = dict(optimizer=entry)
    elif where == 'clip_grad':
        kwargs['optim_wrapper']['clip_grad'] = entry
    elif where == 'wrapper':
        kwargs['optim_wrapper'].update(entry)
    elif where == 'loader':
        kwargs['train_dataloader'] = dict(toy_loader_cfg(), **entry)
    elif where == 'sampler':
        kwargs['train_dataloader'] = dict(toy_loader_cfg(), sampler=entry)
    with pytest.raises(ValueError) as info:
        if where == 'train_cfg':
            Runner(model=ToyModel(), work_dir=str(tmp_path), train_dataloader=toy_loader_cfg(),
                   train_cfg=entry, **kwargs)
        else:
            toy_runner(tmp_path, max_=1, val=False, **kwargs)
    assert message in str(info.value)


def test_a_config_file_with_numbers_as_strings_fails_before_training(tmp_path, capsys):
    config = tmp_path / 'cfg.py'
    config.write_text(f"_base_ = ['{DEMO_CONFIG}']\n"
                      "param_scheduler = [dict(type='MultiStepLR', milestones=[1], "
                      "gamma='0.1')]\n")
    assert command_line(['train', str(config), '--work-dir', str(tmp_path / 'w')]) == 1
    out, err = capsys.readouterr()
    assert err.startswith("minimm: error: param_scheduler[0].gamma='0.1': must be a number")
    assert len(out.splitlines()) <= 3 and 'Config:' not in out
    assert not any(name.endswith('.pth') for name in os.listdir(tmp_path / 'w'))


@pytest.mark.parametrize('kwargs,message', [
    (dict(default_hooks=dict(checkpoint=dict(interval=2))),
     "default_hooks.checkpoint={'interval': 2}: a hook config must contain the key \"type\", "
     "as in dict(type='CheckpointHook', ...) (an entry of default_hooks replaces the default"),
    (dict(custom_hooks=[dict(type='EMAHook'), dict(priority='LOW')]),
     "custom_hooks[1]={'priority': 'LOW'}: a hook config must contain the key \"type\""),
])
def test_a_hook_config_without_a_type_is_named_at_start(tmp_path, kwargs, message):
    # Without the check the registry raised it while hooks were registered, naming neither key.
    with pytest.raises(KeyError) as info:
        toy_runner(tmp_path, max_=1, val=False, **kwargs)
    assert message in info.value.args[0]
    assert not [name for _, _, names in os.walk(tmp_path) for name in names]  # before any log


# ------------------------------------------------------------------ checkpoints
def test_testing_another_models_checkpoint_is_an_error_not_a_number(tmp_path):
    torch.save({'meta': {}, 'state_dict': {'fc.weight': torch.zeros(3, 3)}}, tmp_path / 'o.pth')
    runner = toy_runner(tmp_path / 'w', max_=1, val=False, load_from=str(tmp_path / 'o.pth'),
                        test_dataloader=toy_loader(8, 4), test_cfg=dict(),
                        test_evaluator=ScriptedMetric([1.0]))
    with pytest.raises(ValueError, match=r"holds none of the weights of the model \(ToyModel\): "
                                         r'none of its keys \(fc.weight\)'):
        runner.test()


def test_a_bare_state_dict_is_tested_with_ema_and_refused_for_resume(tmp_path):
    torch.save(ToyModel().state_dict(), tmp_path / 'bare.pth')
    tested = toy_runner(tmp_path / 't', max_=1, val=False, load_from=str(tmp_path / 'bare.pth'),
                        custom_hooks=[dict(type='EMAHook')], test_dataloader=toy_loader(8, 4),
                        test_cfg=dict(), test_evaluator=ScriptedMetric([42.0]))
    assert tested.test() == {'toy/acc': 42.0, 'toy/loss': 1.0}
    resumed = toy_runner(tmp_path / 'r', max_=1, val=False, resume=str(tmp_path / 'bare.pth'),
                         custom_hooks=[dict(type='EMAHook')])
    with pytest.raises(ValueError, match="cannot resume from .*bare.pth': it holds weights only"):
        resumed.train()


def test_resuming_another_models_checkpoint_is_named_before_the_optimizer(tmp_path):
    toy_runner(tmp_path / 'a', max_=1, val=False).train()
    checkpoint = torch.load(tmp_path / 'a' / 'epoch_1.pth', weights_only=True)
    checkpoint['state_dict']['linear.weight'] = torch.zeros(3, 4)
    torch.save(checkpoint, tmp_path / 'other.pth')
    runner = toy_runner(tmp_path / 'b', max_=2, val=False, resume=str(tmp_path / 'other.pth'))
    with pytest.raises(ValueError, match=r'cannot resume from checkpoint .*other.pth.: 1 of its '
                                         r'weights have another shape than in the model '
                                         r'\(ToyModel\): linear.weight \[3, 4\] \(model: \[2, 4\]\)'):
        runner.train()


MMENGINE_FILE = osp.join(osp.dirname(__file__), 'data', 'mmengine_0.10.7_toy.pth')


def test_a_real_mmengine_checkpoint_reads_and_resumes_when_trusted(tmp_path):
    checkpoint = load_checkpoint_file(MMENGINE_FILE, trusted=True)
    assert checkpoint['meta']['mmengine_version'] == '0.10.7'
    loss = checkpoint['message_hub']['log_scalars']['train/loss']
    assert isinstance(loss, HistoryBuffer) and len(loss.data[0]) == 3
    runner = toy_runner(tmp_path, max_=2, val=False, optim_wrapper=dict(
        optimizer=dict(type='SGD', lr=0.1, momentum=0.9)),
        load_from=dict(path=MMENGINE_FILE, trusted=True), resume=True)
    runner.train()
    assert (runner.epoch, runner.iter) == (2, 6)
    assert runner.message_hub.get_info('last_ckpt') == str(tmp_path / 'epoch_2.pth')


# ------------------------------------------------------------------ non-finite values
def test_the_first_non_finite_loss_is_named_once(tmp_path):
    dataset = ToyDataset(12)
    dataset.x[5, 0] = math.nan  # in the second batch: iteration 2
    runner = toy_runner(tmp_path, max_=2, val=False,
                        train_dataloader=DataLoader(dataset, batch_size=4),
                        default_hooks=dict(logger=dict(type='LoggerHook', interval=2)))
    runner.train()
    with open(osp.join(runner.log_dir, f'{runner.timestamp}.log')) as f:
        log = f.read()
    losses = runner.message_hub.get_scalar('train/loss').data[0]
    first = next(i for i, value in enumerate(losses) if not math.isfinite(value)) + 1
    assert first == 2 and log.count('at iteration') == 1
    assert f'train/loss is {losses[first - 1]} at iteration {first}: training goes on' in log


def test_a_non_finite_metric_is_never_the_best(tmp_path):
    runner = toy_runner(tmp_path, max_=3, val=False, val_dataloader=toy_loader(8, 4),
                        val_cfg=dict(), val_evaluator=ScriptedMetric([50.0, math.inf, 60.0]),
                        default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=1,
                                                           save_best='toy/acc')))
    runner.train()
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith('best')) == [
        'best_toy_acc_epoch_3.pth']
    assert runner.message_hub.get_info('best_score') == 60.0


# ------------------------------------------------------------------ the MMCV 1.x config style
def _mmcv_config(tmp_path, extra):
    from test_runner_checks import MMCV_CONFIG
    config = tmp_path / 'mmcv_cfg.py'
    config.write_text(f"_base_ = ['{MMCV_CONFIG}']\nrunner = dict(max_epochs=1)\n"
                      "data = dict(samples_per_gpu=512)\n" + extra)
    return str(config)


@pytest.mark.parametrize('extra,message', [
    ("custom_hooks = [dict(type='EMAHook', momentum=2, priority=49)]\n",
     'EMAHook: momentum=2 must be between 0 and 1'),
    ("custom_hooks = [dict(type='EMAHook', momentum='0.1')]\n",
     "custom_hooks[0].momentum='0.1': must be a number"),
    ("lr_config = dict(policy='stepp')\n",
     "lr_config.policy='stepp': SteppLrUpdaterHook is not in the mmcv::hook registry. Did you "
     "mean 'Step'?"),
    ("checkpoint_config = dict(interval=1, max_keep_ckpt=2)\n",
     "checkpoint_config has unknown keys ['max_keep_ckpt'] (did you mean 'max_keep_ckpts'"),
    ("checkpoint_config = dict(interval=0)\n", 'checkpoint_config: interval=0: must not be 0'),
    ("checkpoint_config = dict(by_epoch='no')\n",
     "checkpoint_config.by_epoch='no': must be True or False"),
    ("log_config = dict(interval='10')\n", "log_config.interval='10': must be a number"),
    ("evaluation = dict(interval=0)\n", 'interval must be a positive number, but got 0'),
    ("optimizer_config = dict(grad_clip=None, detect_anomalous_params='yes')\n",
     "optimizer_config.detect_anomalous_params='yes': must be True or False"),
])
def test_mmcv_config_mistakes_are_named_before_the_first_epoch(tmp_path, capsys, extra, message):
    config = _mmcv_config(tmp_path, extra)
    assert command_line(['train', config, '--work-dir', str(tmp_path / 'w')]) == 1
    out, err = capsys.readouterr()
    assert err.startswith('minimm: error: ') and message in err.splitlines()[0], err
    assert 'Epoch [1]' not in out and not os.path.exists(tmp_path / 'w' / 'epoch_1.pth')


def test_minimm_test_runs_an_mmcv_config(tmp_path, capsys):
    config = _mmcv_config(tmp_path, '')
    assert command_line(['train', config, '--work-dir', str(tmp_path)]) == 0
    capsys.readouterr()
    assert command_line(['test', config, '--checkpoint', str(tmp_path / 'epoch_1.pth')]) == 0
    # (after the load's report: the file also holds MMCV EMAHook's ema_* buffers)
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("{'accuracy': ")
