"""Hooks that declare what they read and write, and the order checker (``minimm/dataflow.py``).

The headline case is issue 43's: the demo config with ``EMAHook(priority='LOWEST')``, after
CheckpointHook (VERY_LOW). ``minimm hooks --strict`` flags it, and a real run shows the finding is a
bug: the best checkpoint it saves, tested, does not give the accuracy its validation reported,
while the demo's priority 49 does. The oracle is the Runner's own ``test()`` on the saved file.
"""
import copy
import glob
import os.path as osp
import sys

import pytest

from minimm.cli import DEMO_CONFIG, main
from minimm.config import Config
from minimm.dataflow import check, declared_flows, overlap
from minimm.hooks import Hook
from minimm.hooks_cli import mmcv_hooks, mmengine_hooks
from minimm.registry import HOOKS
from minimm.runner import Runner

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
MMCV_CONFIG = osp.join(REPO, 'minimm', 'configs', 'digits_mmcv1.py')
pytestmark = pytest.mark.ops_backend  # EMAHook runs in two tests: both op backends train them

SHIPPED = sorted(glob.glob(osp.join(REPO, 'minimm', 'configs', '*.py')) +
                 glob.glob(osp.join(REPO, 'tutorials', 'minidet', 'configs', '*.py')))


def warnings_of(hooks, stages=Hook.stages):
    return [f for f in check(hooks, stages) if f.level == 'warning']


def hooks_cli(args, capsys):
    """``minimm hooks ARGS``: its exit status and what it printed."""
    try:
        main(['hooks'] + args)
        status = 0
    except SystemExit as stop:
        status = stop.code
    return status, capsys.readouterr().out


# ---------------------------------------------------------------- the EMA-after-checkpoint bug
def test_ema_after_checkpoint_is_flagged(capsys):
    status, out = hooks_cli([DEMO_CONFIG, '--strict', '--cfg-options',
                             'custom_hooks.0.priority=LOWEST'], capsys)
    assert status == 1
    finding = next(line for line in out.splitlines() if line.startswith('warning: after_val_epoch'))
    assert 'CheckpointHook (VERY_LOW=90)' in finding and 'EMAHook (LOWEST=100)' in finding
    assert 'fix: give EMAHook a priority below 90' in out
    status, out = hooks_cli([DEMO_CONFIG, '--strict'], capsys)  # the demo's own priority, 49
    assert status == 0 and out.rstrip().endswith('No findings.')


def _train_then_test_best(tmp_path, priority):
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.train_cfg.max_epochs = 1
    cfg.custom_hooks[0]['priority'] = priority
    cfg.work_dir = str(tmp_path / f'train_{priority}')
    cfg.check_hooks = 'off'  # the run the checker warns about, trained anyway
    runner = Runner.from_cfg(cfg)
    runner.train()
    validated = runner.message_hub.get_info('best_score')
    test_cfg = copy.deepcopy(cfg)
    test_cfg.load_from = runner.message_hub.get_info('best_ckpt')
    test_cfg.work_dir = str(tmp_path / f'test_{priority}')
    tested = Runner.from_cfg(test_cfg).test()['accuracy/top1']
    return validated, tested


def test_the_flagged_order_saves_a_best_checkpoint_that_does_not_reproduce(tmp_path):
    validated, tested = _train_then_test_best(tmp_path, 'LOWEST')
    assert tested != pytest.approx(validated)  # it holds the raw weights, not the validated EMA
    validated, tested = _train_then_test_best(tmp_path, 49)
    assert tested == pytest.approx(validated)


def test_runner_check_hooks_modes(tmp_path, capsys):
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.custom_hooks[0]['priority'] = 'LOWEST'
    with pytest.raises(ValueError, match=r'EMAHook \(LOWEST=100\)'):
        Runner.from_cfg(dict(cfg, work_dir=str(tmp_path / 'e'), check_hooks='error'))
    capsys.readouterr()
    Runner.from_cfg(dict(cfg, work_dir=str(tmp_path / 'w')))  # 'warn', the default
    assert 'hook order: after_val_epoch: CheckpointHook' in capsys.readouterr().out
    Runner.from_cfg(dict(cfg, work_dir=str(tmp_path / 'o'), check_hooks='off'))
    assert 'hook order' not in capsys.readouterr().out
    with pytest.raises(ValueError, match="check_hooks='loud': must be one of 'warn', 'error'"):
        Runner(model=dict(type='DigitsCNN'), work_dir=str(tmp_path / 'b'), check_hooks='loud')


@pytest.mark.parametrize('config, option', [(DEMO_CONFIG, 'custom_hooks.0.priority=LOWEST'),
                                            (MMCV_CONFIG, 'custom_hooks.0.priority=NORMAL')],
                         ids=['mmengine', 'mmcv'])
def test_train_check_hooks_error_stops_before_training(config, option, tmp_path):
    with pytest.raises(ValueError, match=r'CheckpointHook .* EMAHook'):
        main(['train', config, '--work-dir', str(tmp_path), '--check-hooks', 'error',
              '--cfg-options', option])
    assert glob.glob(str(tmp_path / '*.pth')) == []


# ---------------------------------------------------------------- the other kinds of finding
class AddMetric(Hook):
    """A user's hook that adds the metric CheckpointHook's ``save_best`` reads."""
    priority = 'LOWEST'
    dataflow = {'after_val_epoch': 'model -> metrics:my_acc'}

    def after_val_epoch(self, runner, metrics=None):
        metrics['my_acc'] = 1.0


def test_checkpoint_before_the_metric_it_keeps_the_best_of():
    checkpoint = dict(type='CheckpointHook', interval=1, save_best='my_acc')
    hooks, _ = mmengine_hooks(dict(default_hooks=dict(checkpoint=checkpoint),
                                   custom_hooks=[AddMetric()]))
    found = [f for f in warnings_of(hooks) if 'after_val_epoch' in f.text]
    assert len(found) == 1
    assert 'CheckpointHook (VERY_LOW=90) reads metrics:my_acc' in found[0].text
    assert 'before AddMetric (LOWEST=100) writes metrics:my_acc' in found[0].text
    # RuntimeInfoHook (VERY_HIGH) records the metrics: the fix is to run before all readers.
    assert found[0].fix == 'give AddMetric a priority below 10 (e.g. 9)'
    fixed = AddMetric()
    fixed.priority = 9
    hooks, _ = mmengine_hooks(dict(default_hooks=dict(checkpoint=checkpoint),
                                   custom_hooks=[fixed]))
    assert warnings_of(hooks) == []


class WriteStats(Hook):
    dataflow = {'after_train_epoch': 'model -> file:stats.txt'}

    def after_train_epoch(self, runner):
        with open(osp.join(runner.work_dir, 'stats.txt'), 'w') as f:  # on every rank
            f.write(str(runner.epoch))


def test_a_file_written_on_every_rank_is_flagged_when_declared():
    hooks, _ = mmengine_hooks(dict(custom_hooks=[WriteStats()]))
    [found] = warnings_of(hooks)
    assert found.text.startswith('after_train_epoch: WriteStats (NORMAL=50) writes '
                                 'file:stats.txt on every rank')
    assert 'if is_main_process():' in found.fix
    guarded = WriteStats()
    guarded.dataflow = {'after_train_epoch': 'model -> file:stats.txt(rank0)'}
    undeclared = WriteStats()
    undeclared.dataflow = None
    for hook in (guarded, undeclared):
        hooks, _ = mmengine_hooks(dict(custom_hooks=[hook]))
        assert warnings_of(hooks) == []
    notes = [f.text for f in check(hooks, Hook.stages) if f.level == 'info']
    assert 'WriteStats (NORMAL=50) declares no dataflow: its stages are not checked' in notes


class LocalStatistics(Hook):
    priority = 'HIGH'
    dataflow = {'after_train_iter': 'model -> model.buffers(local)'}

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        pass


def test_a_rank_local_value_reaching_a_checkpoint_is_flagged():
    hooks, _ = mmengine_hooks(dict(custom_hooks=[LocalStatistics(), dict(type='EMAHook')]))
    texts = [f.text for f in warnings_of(hooks)]
    assert ('after_train_iter: CheckpointHook (VERY_LOW=90) writes file:*.pth from model, which '
            'differs per rank') in texts
    # EMAHook copies the buffers into its average, which goes into every checkpoint.
    assert ('before_save_checkpoint: EMAHook (NORMAL=50) writes checkpoint:state_dict from ema, '
            'which differs per rank') in texts


def test_a_bad_declaration_fails_naming_it():
    bad = WriteStats()
    bad.dataflow = {'after_train_epoch': 'model -> file:x(everywhere)'}
    with pytest.raises(ValueError, match=r"WriteStats.dataflow\['after_train_epoch'\]: unknown "
                                         r"mark \(everywhere\)"):
        declared_flows(bad)
    bad.dataflow = {'after_train_epok': '-> lr'}
    with pytest.raises(ValueError, match="names 'after_train_epok', which is no stage"):
        declared_flows(bad)


# ---------------------------------------------------------------- MMCV 1.x
def test_mmcv_ema_at_normal_after_checkpoint_is_flagged(capsys):
    # mmcv#689: at NORMAL, registered after CheckpointHook (NORMAL), EMAHook swaps its average
    # in only after the epoch's checkpoint was written with the raw weights.
    status, out = hooks_cli([MMCV_CONFIG, '--strict', '--cfg-options',
                             'custom_hooks.0.priority=NORMAL'], capsys)
    assert status == 1
    assert ('warning: after_train_epoch: CheckpointHook (NORMAL=50) reads model, before EMAHook '
            '(NORMAL=50) swaps the EMA weights later in the stage') in out
    assert 'fix: give EMAHook a priority below 50 (e.g. 49)' in out
    status, out = hooks_cli([MMCV_CONFIG, '--strict', '--cfg-options',
                             'custom_hooks.0.priority=HIGH'], capsys)  # before the step
    assert status == 1 and 'EMAHook (HIGH=30) reads model.params, before OptimizerHook' in out


def test_mmcv_runner_check_hooks(tmp_path):
    sys.path.insert(0, osp.dirname(osp.abspath(__file__)))
    from mmcv_toy import loader, make_runner
    from minimm.mmcv import EMAHook
    runner = make_runner(tmp_path, max_epochs=1)
    runner.register_training_hooks(lr_config=None, optimizer_config=dict(grad_clip=None),
                                   checkpoint_config=dict(interval=1))
    runner.register_hook(EMAHook(), priority='NORMAL')
    runner.check_hooks = 'error'
    with pytest.raises(ValueError, match=r'CheckpointHook \(NORMAL=50\) reads model'):
        runner.run([loader()], [('train', 1)])
    runner.check_hooks = 'sometimes'
    with pytest.raises(ValueError, match="check_hooks='sometimes': must be one of"):
        runner.run([loader()], [('train', 1)])


# ---------------------------------------------------------------- no finding where none is due
@pytest.mark.parametrize('config', SHIPPED, ids=osp.basename)
def test_shipped_configs_have_no_findings(config, capsys, monkeypatch):
    monkeypatch.syspath_prepend(osp.join(REPO, 'tutorials', 'minidet'))
    status, out = hooks_cli([config, '--strict'], capsys)
    assert status == 0, out


MMENGINE_EXTRAS = [
    [dict(type='EMAHook')], [dict(type='EMAHook'), dict(type='EMAOnlyCheckpointHook')],
    [dict(type='EMAHook'), dict(type='RawWeightsEvalHook')],
    [dict(type='EarlyStoppingHook', monitor='accuracy/top1')], [dict(type='SyncBuffersHook')],
    [dict(type='EmptyCacheHook')], [dict(type='ProfilerHook', json_trace_path='trace.json')],
    [dict(type='PostHocEMAHook')], [dict(type='SyncBuffersHook'), dict(type='EMAHook')],
]


@pytest.mark.parametrize('extra', MMENGINE_EXTRAS, ids=lambda hooks: '+'.join(
    hook['type'] for hook in hooks))
def test_builtin_hooks_at_their_default_priorities_have_no_warnings(extra):
    checkpoint = dict(type='CheckpointHook', interval=1, save_best='auto')
    hooks, _ = mmengine_hooks(dict(default_hooks=dict(checkpoint=checkpoint), custom_hooks=extra))
    assert warnings_of(hooks) == []


@pytest.mark.parametrize('change', [
    dict(custom_hooks=[dict(type='EmptyCacheHook')]),
    dict(custom_hooks=[dict(type='DistSamplerSeedHook')]),
    dict(custom_hooks=[dict(type='ProfilerHook', json_trace_path='trace.json')]),
    dict(optimizer_config=dict(type='GradientCumulativeOptimizerHook', cumulative_iters=2)),
    dict(fp16=dict(loss_scale=512.0)),
    dict(momentum_config=dict(policy='CosineAnnealing', min_momentum_ratio=0.5)),
], ids=lambda change: str(change)[:40])
def test_mmcv_builtin_hooks_have_no_warnings(change):
    cfg = Config.fromfile(MMCV_CONFIG)  # with its EMAHook at 49, as MMDetection's configs
    for key, value in change.items():
        cfg[key] = value
    hooks, stages = mmcv_hooks(cfg)
    assert warnings_of(hooks, stages) == []


def test_mmcv_sync_buffers_at_normal_is_flagged():
    # A custom hook's default, NORMAL, puts it after CheckpointHook (NORMAL, registered first):
    # the epoch's checkpoint keeps each rank's own buffers. MMDetection's YOLOX configs pin their
    # buffer-syncing hook at 48 for this reason.
    cfg = Config.fromfile(MMCV_CONFIG)
    cfg.custom_hooks = [dict(type='SyncBuffersHook')]
    [found] = warnings_of(*mmcv_hooks(cfg))
    assert found.text == ('after_train_epoch: CheckpointHook (NORMAL=50) reads model, before '
                          'SyncBuffersHook (NORMAL=50) writes model.buffers later in the stage')
    cfg = Config.fromfile(MMCV_CONFIG)  # registering changed the first one (MMCV pops keys)
    cfg.custom_hooks = [dict(type='SyncBuffersHook', priority=48)]
    assert warnings_of(*mmcv_hooks(cfg)) == []


def _builtin_hook_classes():
    from minimm.mmcv import HOOKS as MMCV_HOOKS
    found = []
    for registry in (HOOKS, MMCV_HOOKS):
        for name, cls in sorted(registry.module_dict.items()):
            if cls.__module__.startswith('minimm.') and name != 'ClosureHook':
                found.append(cls)
    return found


@pytest.mark.parametrize('cls', _builtin_hook_classes(), ids=lambda cls: cls.__module__.split(
    '.')[1] + '.' + cls.__name__)
def test_every_builtin_hook_declares_every_stage_it_implements(cls):
    hook = cls.__new__(cls)  # the class's declaration: no arguments needed
    flows = declared_flows(hook)
    assert flows is not None, f'{cls.__name__} declares no dataflow'
    missing = [stage for stage in hook.get_triggered_stages() if stage not in flows]
    assert missing == [], f'{cls.__name__} does not declare {missing}'


@pytest.mark.parametrize('a, b, meet', [
    ('model', 'model.params', True), ('message_hub', 'message_hub:train/loss', True),
    ('message_hub:train/*', 'message_hub:train/loss', True),
    ('message_hub:*/time', 'message_hub:train/*', True),  # both name train/time
    ('message_hub:best_*', 'message_hub:val/*', False), ('metrics:auto', 'metrics:acc', True),
    ('model.params', 'model.buffers', False), ('ema', 'model', False),
    ('file:*_ema.pth', 'file:best_*.pth', True), ('file:*.json', 'file:*.pth', False)])
def test_which_words_meet(a, b, meet):
    assert overlap(a, b) is meet and overlap(b, a) is meet
