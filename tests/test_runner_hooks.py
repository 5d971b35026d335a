"""Runner hooks: priority ordering (defaults interleaved with custom hooks), registration rules,
get_hooks_info, and the exact hook-call sequence of epoch- and iteration-based training."""
import pytest

from minimm.hooks import Hook
from minimm.registry import HOOKS
from toy import RecordHook, no_default_hooks, toy_runner


@HOOKS.register_module(force=True)
class NamedHook(Hook):
    def __init__(self, name='x'):
        self.name = name

    def before_run(self, runner):
        pass


def _names(runner):
    return [getattr(h, 'name', type(h).__name__) for h in runner.hooks]


def test_default_and_custom_hooks_interleave_by_priority(tmp_path):
    custom = [dict(type='NamedHook', name='A'),                       # NORMAL (class default)
              dict(type='NamedHook', name='B', priority=49),
              dict(type='NamedHook', name='C', priority='HIGHEST'),
              dict(type='NamedHook', name='D', priority='lowest'),
              dict(type='NamedHook', name='E', priority='BELOW_NORMAL')]
    runner = toy_runner(tmp_path, custom_hooks=custom)
    assert _names(runner) == ['C', 'RuntimeInfoHook', 'B', 'IterTimerHook',
                              'DistSamplerSeedHook', 'A', 'LoggerHook', 'E',
                              'ParamSchedulerHook', 'CheckpointHook', 'D']
    # The caller's dicts are not mutated (MMEngine pops 'priority' out of them).
    assert custom[1] == dict(type='NamedHook', name='B', priority=49)


def test_default_hooks_override_and_remove(tmp_path):
    runner = toy_runner(tmp_path, default_hooks=dict(
        logger=None, checkpoint=dict(type='CheckpointHook', interval=2),
        extra=dict(type='NamedHook', name='extra', priority='VERY_LOW')))
    assert _names(runner) == ['RuntimeInfoHook', 'IterTimerHook', 'DistSamplerSeedHook',
                              'ParamSchedulerHook', 'CheckpointHook', 'extra']
    assert runner.hooks[-2].interval == 2


def test_priority_sources_and_validation(tmp_path):
    runner = toy_runner(tmp_path, default_hooks=no_default_hooks())
    assert runner.hooks == []
    cfg = dict(type='NamedHook', name='cfg', priority='LOW')
    runner.register_hook(cfg, priority=20)       # the argument beats the config
    hook = NamedHook('attr')
    hook.priority = 30
    runner.register_hook(hook)                   # the attribute when nothing else is given
    runner.register_hook(dict(type='NamedHook', name='cfg2', priority='LOW'))
    assert _names(runner) == ['cfg', 'attr', 'cfg2']
    assert runner.hooks[0].priority == 20 and runner.hooks[2].priority == 'LOW'
    # Bad priorities fail at registration, even for the first hook, before anything is built.
    empty = toy_runner(tmp_path / 'b', default_hooks=no_default_hooks())
    with pytest.raises(KeyError, match='BOGUS'):
        empty.register_hook(dict(type='NamedHook', priority='BOGUS'))
    with pytest.raises(ValueError, match='between 0 and 100'):
        empty.register_hook(dict(type='NamedHook'), priority=101)
    bad = NamedHook()
    bad.priority = 'nope'
    with pytest.raises(KeyError, match='nope'):
        empty.register_hook(bad)
    assert empty.hooks == []
    with pytest.raises(TypeError, match='Hook or dict'):
        empty.register_hook(object())


def test_get_hooks_info_format(tmp_path):
    runner = toy_runner(tmp_path, custom_hooks=[dict(type='NamedHook', priority=49)])
    info = runner.get_hooks_info()
    blocks = info.split('\n -------------------- ')
    assert blocks[0] == ('before_run:\n'
                         f'({"VERY_HIGH":<12}) {"RuntimeInfoHook":<35}\n'
                         f'({"49":<12}) {"NamedHook":<35}\n'  # as MMEngine shows it
                         f'({"BELOW_NORMAL":<12}) {"LoggerHook":<35}')
    stages = [b.strip().split(':')[0] for b in blocks if b.strip()]
    assert stages == [s for s in Hook.stages if s in stages]   # Hook.stages order


def test_get_hooks_info_shows_priority_as_written(tmp_path):
    """As MMEngine: a name is shown as written, a number by its level name when it has one."""
    runner = toy_runner(tmp_path, default_hooks=no_default_hooks(),
                        custom_hooks=[dict(type='NamedHook', priority=p) for p in ('lowest', 50, 'Above_Normal')])
    assert runner.get_hooks_info() == ('before_run:\n'
                                       f'({"Above_Normal":<12}) {"NamedHook":<35}\n'
                                       f'({"NORMAL":<12}) {"NamedHook":<35}\n'
                                       f'({"lowest":<12}) {"NamedHook":<35}'
                                       '\n -------------------- ')


def test_call_hook_supports_custom_names(tmp_path):
    class Custom(Hook):
        def __init__(self):
            self.seen = []

        def my_stage(self, runner, value):
            self.seen.append(value)

    custom = Custom()
    runner = toy_runner(tmp_path, custom_hooks=[custom])
    runner.call_hook('my_stage', value=3)
    assert custom.seen == [3]
    with pytest.raises(TypeError, match='in .*Custom'):
        runner.call_hook('my_stage', wrong=1)


def test_a_stage_assigned_on_an_instance_is_called(tmp_path):
    # MMEngine's call_hook calls getattr(hook, stage) on every hook, so a stage set on an
    # instance whose class does not override it runs too.
    calls = []
    hook = Hook()
    hook.after_train_epoch = lambda runner: calls.append(runner.epoch)
    hook.before_val_iter = lambda runner, batch_idx, data_batch=None: calls.append(batch_idx)
    runner = toy_runner(tmp_path, max_=2, custom_hooks=[hook],
                        default_hooks=dict(checkpoint=None))
    runner.train()
    assert calls == [0, 0, 1, 1, 0, 1]  # epoch 0, its 2 val batches, epoch 1, its 2 val batches


# The 12 stages that funnel into 4 methods, with the mode each passes (MMEngine's hook.py).
FUNNELLED = [
    ('before_train_epoch', '_before_epoch', 'train'), ('before_val_epoch', '_before_epoch', 'val'),
    ('before_test_epoch', '_before_epoch', 'test'), ('after_train_epoch', '_after_epoch', 'train'),
    ('after_val_epoch', '_after_epoch', 'val'), ('after_test_epoch', '_after_epoch', 'test'),
    ('before_train_iter', '_before_iter', 'train'), ('before_val_iter', '_before_iter', 'val'),
    ('before_test_iter', '_before_iter', 'test'), ('after_train_iter', '_after_iter', 'train'),
    ('after_val_iter', '_after_iter', 'val'), ('after_test_iter', '_after_iter', 'test'),
]


class _Funnels(Hook):
    """Overrides only the four funnels and records (funnel, mode) for each call."""

    def __init__(self):
        self.calls = []

    def _before_epoch(self, runner, mode='train'):
        self.calls.append(('_before_epoch', mode))

    def _after_epoch(self, runner, mode='train'):
        self.calls.append(('_after_epoch', mode))

    def _before_iter(self, runner, batch_idx, data_batch=None, mode='train'):
        self.calls.append(('_before_iter', mode))

    def _after_iter(self, runner, batch_idx, data_batch=None, outputs=None, mode='train'):
        self.calls.append(('_after_iter', mode))


@pytest.mark.parametrize('stage, funnel, mode', FUNNELLED)
def test_every_funnelled_stage_passes_its_mode(stage, funnel, mode):
    hook = _Funnels()
    kwargs = dict(batch_idx=0) if stage.endswith('_iter') else {}
    getattr(hook, stage)(None, **kwargs)
    assert hook.calls == [(funnel, mode)]


def test_the_runner_dispatches_all_twelve_funnelled_stages(tmp_path):
    from toy import ToyMetric, toy_loader
    hook = _Funnels()
    runner = toy_runner(tmp_path, max_=1, custom_hooks=[hook],
                        default_hooks=dict(checkpoint=None), test_dataloader=toy_loader(8, 4),
                        test_cfg=dict(), test_evaluator=ToyMetric())
    runner.train()
    runner.test()
    assert set(hook.get_triggered_stages()) == {stage for stage, _, _ in FUNNELLED}
    assert set(hook.calls) == {(funnel, mode) for _, funnel, mode in FUNNELLED}


def test_editing_runner_hooks_refreshes_dispatch(tmp_path):
    """Dispatch reads ``runner.hooks`` at each call: every edit of the list shows at once."""
    class Counter(Hook):
        def __init__(self):
            self.calls = 0

        def before_train_epoch(self, runner):
            self.calls += 1

    runner = toy_runner(tmp_path)
    runner.call_hook('before_train_epoch')       # computes the stage's hook list
    first, second = Counter(), Counter()
    runner.hooks.append(first)
    runner.hooks.insert(0, second)
    runner.call_hook('before_train_epoch')
    assert (first.calls, second.calls) == (1, 1)
    runner.hooks.remove(first)
    runner.hooks[0] = first
    del runner.hooks[-1]
    runner.call_hook('before_train_epoch')
    assert (first.calls, second.calls) == (2, 1)
    runner.hooks.clear()
    runner.call_hook('before_train_epoch')
    assert (first.calls, second.calls) == (2, 1)


def _expected_epoch_sequence():
    seq = [('before_run', 0, 0, None), ('before_train', 0, 0, None)]
    it = 0
    for epoch in range(2):
        seq.append(('before_train_epoch', epoch, it, None))
        for batch_idx in range(3):
            seq += [('before_train_iter', epoch, it, batch_idx),
                    ('after_train_iter', epoch, it, batch_idx)]
            it += 1
        # CheckpointHook (VERY_LOW) saves inside after_train_epoch, before RecordHook (LOWEST).
        seq += [('before_save_checkpoint', epoch, it, None), ('after_train_epoch', epoch, it, None),
                ('before_val', epoch + 1, it, None), ('before_val_epoch', epoch + 1, it, None)]
        for batch_idx in range(2):
            seq += [('before_val_iter', epoch + 1, it, batch_idx),
                    ('after_val_iter', epoch + 1, it, batch_idx)]
        seq += [('after_val_epoch', epoch + 1, it, None), ('after_val', epoch + 1, it, None)]
    return seq + [('after_train', 2, 6, None), ('after_run', 2, 6, None)]


def test_epoch_based_call_sequence(tmp_path):
    record = RecordHook()
    runner = toy_runner(tmp_path, custom_hooks=[record])
    runner.train()
    assert record.calls == _expected_epoch_sequence()


def test_iter_based_call_sequence(tmp_path):
    record = RecordHook()
    runner = toy_runner(tmp_path, by_epoch=False, max_=6, custom_hooks=[record],
                        default_hooks=dict(checkpoint=dict(type='CheckpointHook', by_epoch=False,
                                                           interval=3)))
    runner.train()
    expected = [('before_run', 0, 0, None), ('before_train', 0, 0, None),
                ('before_train_epoch', 0, 0, None)]
    for it in range(6):
        expected.append(('before_train_iter', 0, it, it))
        if it in (2, 5):
            expected.append(('before_save_checkpoint', 0, it, None))
        expected.append(('after_train_iter', 0, it, it))
        if it in (2, 5):
            expected += [('before_val', 0, it + 1, None), ('before_val_epoch', 0, it + 1, None),
                         ('before_val_iter', 0, it + 1, 0), ('after_val_iter', 0, it + 1, 0),
                         ('before_val_iter', 0, it + 1, 1), ('after_val_iter', 0, it + 1, 1),
                         ('after_val_epoch', 0, it + 1, None), ('after_val', 0, it + 1, None)]
    expected += [('after_train_epoch', 0, 6, None), ('after_train', 0, 6, None),
                 ('after_run', 0, 6, None)]
    assert record.calls == expected


def test_val_and_test_alone(tmp_path):
    from toy import ToyMetric, toy_loader
    record = RecordHook()
    runner = toy_runner(tmp_path, custom_hooks=[record], test_dataloader=toy_loader(4, 4),
                        test_cfg=dict(), test_evaluator=[ToyMetric()])
    metrics = runner.test()
    assert set(metrics) == {'toy/acc'}
    assert [c[0] for c in record.calls] == ['before_run', 'before_test', 'before_test_epoch',
                                            'before_test_iter', 'after_test_iter',
                                            'after_test_epoch', 'after_test', 'after_run']


def test_mismatched_train_arguments(tmp_path):
    from minimm.runner import Runner
    from toy import ToyModel, toy_loader
    with pytest.raises(ValueError, match='train_dataloader, train_cfg, optim_wrapper'):
        Runner(ToyModel(), str(tmp_path), train_dataloader=toy_loader(), train_cfg=None)


def test_counters_in_a_val_run_come_from_the_train_cfg(tmp_path):
    """As MMEngine: reading runner.max_epochs (or epoch, iter...) builds the train loop from
    train_cfg, so a hook of a val()-only run sees the configured length, not 0."""
    seen = []

    class Peek(Hook):
        def before_val(self, runner):
            seen.append((runner.epoch, runner.iter, runner.max_epochs, runner.max_iters))

    runner = toy_runner(tmp_path, max_=2, custom_hooks=[Peek()])
    runner.val()
    assert seen == [(0, 0, 2, 6)]
