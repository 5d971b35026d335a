"""ParamSchedulerHook with a minimal fake runner (the real Runner is tested elsewhere)."""
from types import SimpleNamespace

import pytest
import torch

from minimm.hooks import ParamSchedulerHook
from minimm.optim import LinearLR, MultiStepLR, OptimWrapper, ReduceOnPlateauLR, StepLR
from minimm.registry import HOOKS


def make_wrapper(lr=0.1):
    return OptimWrapper(torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=lr))


def make_runner(param_schedulers, with_train_loop=True):
    return SimpleNamespace(param_schedulers=param_schedulers, train_loop_built=with_train_loop)


def test_registered_with_low_priority_and_its_stages():
    hook = HOOKS.build(dict(type='ParamSchedulerHook'))
    assert isinstance(hook, ParamSchedulerHook) and hook.priority == 'LOW'
    assert hook.get_triggered_stages() == ['after_train_iter', 'after_train_epoch',
                                           'after_val_epoch']


def test_iter_schedulers_step_after_iters_and_epoch_schedulers_after_epochs():
    """Two epochs of three iterations: a 4-iteration warm-up and a decay at epoch 1."""
    wrapper = make_wrapper()
    warmup = LinearLR(wrapper, start_factor=0.25, by_epoch=False, end=4)
    decay = MultiStepLR(wrapper, milestones=[1], gamma=0.5, by_epoch=True)
    runner = make_runner([warmup, decay])
    hook = ParamSchedulerHook()
    lrs = []
    for _ in range(2):
        for batch_idx in range(3):
            lrs.append(wrapper.get_lr()['lr'][0])
            hook.after_train_iter(runner, batch_idx)
        hook.after_train_epoch(runner)
    # Warm-up factors 0.25, 0.5, 0.75, 1.0 over iterations 0..3; epoch 1 halves everything.
    assert lrs == pytest.approx([0.025, 0.05, 0.075, 0.05, 0.05, 0.05])
    assert (warmup._global_step, decay._global_step) == (6, 2)


def test_dict_of_lists_and_none():
    first, second = make_wrapper(), make_wrapper()
    schedulers = {'generator': [StepLR(first, step_size=1, by_epoch=False)],
                  'discriminator': [StepLR(second, step_size=1, by_epoch=True)]}
    hook = ParamSchedulerHook()
    hook.after_train_iter(make_runner(schedulers), 0)
    hook.after_train_epoch(make_runner(schedulers))
    assert first.get_lr()['lr'] == pytest.approx([0.01])
    assert second.get_lr()['lr'] == pytest.approx([0.01])

    runner = make_runner(None)
    hook.after_train_iter(runner, 0)
    hook.after_train_epoch(runner)
    hook.after_val_epoch(runner, metrics=dict(loss=1.0))


@pytest.mark.parametrize('stage', ['after_train_iter', 'after_train_epoch', 'after_val_epoch'])
def test_other_types_are_a_type_error(stage):
    runner = make_runner((StepLR(make_wrapper(), step_size=1),))
    kwargs = dict(batch_idx=0) if stage == 'after_train_iter' else {}
    if stage == 'after_val_epoch':
        kwargs = dict(metrics=dict(loss=1.0))
    with pytest.raises(TypeError, match='should be list of ParamScheduler'):
        getattr(ParamSchedulerHook(), stage)(runner, **kwargs)


def test_after_val_epoch_feeds_metrics_to_plateau_schedulers_only():
    wrapper = make_wrapper()
    plateau = ReduceOnPlateauLR(wrapper, monitor='loss', patience=0, factor=0.5)
    step = StepLR(wrapper, step_size=1, gamma=0.1)
    runner = make_runner([plateau, step])
    hook = ParamSchedulerHook()
    hook.after_val_epoch(runner, metrics=dict(loss=1.0))  # first value: the best so far
    hook.after_val_epoch(runner, metrics=dict(loss=1.0))  # no improvement, patience 0: halve
    assert wrapper.get_lr()['lr'] == pytest.approx([0.05])
    assert step._global_step == 0  # StepLR has no need_val_args: untouched by validation
    hook.after_val_epoch(runner, metrics=None)  # no metrics: nothing to do
    assert plateau.last_step == 1


def test_after_val_epoch_skips_without_train_loop_or_built_schedulers():
    wrapper = make_wrapper()
    plateau = ReduceOnPlateauLR(wrapper, monitor='loss', patience=0, factor=0.5)
    hook = ParamSchedulerHook()
    for runner in (make_runner([plateau], with_train_loop=False),
                   make_runner([plateau, dict(type='StepLR', step_size=1)])):
        hook.after_val_epoch(runner, metrics=dict(loss=1.0))
    assert plateau.last_step == -1 and wrapper.get_lr()['lr'] == [0.1]
