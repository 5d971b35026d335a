"""Parameter schedulers against closed forms, windows, chaining, conversion and resuming.

Every expected value below is the schedule's closed formula written out in the test; the
schedulers compute the same numbers through their chainable (recursive) form.
"""
import io
import math

import pytest
import torch

from minimm.optim import (INF, ConstantLR, CosineAnnealingLR, CosineAnnealingMomentum,
                          CosineRestartLR, ExponentialLR, LinearLR, LinearMomentum, MultiStepLR,
                          OneCycleLR, OptimWrapper, PolyLR, ReduceOnPlateauLR,
                          ReduceOnPlateauMomentum, StepLR, StepMomentum, build_param_scheduler)
from minimm.registry import PARAM_SCHEDULERS

BASE = 0.1


def make_optimizer(kind='sgd', lr=BASE):
    params = torch.nn.Linear(2, 1).parameters()
    if kind == 'adam':
        return torch.optim.Adam(params, lr=lr, betas=(0.9, 0.999))
    return torch.optim.SGD(params, lr=lr, momentum=0.9)


def values_over(schedulers, optimizer, n, key='lr'):
    """The value in force at steps 0..n-1 (read before each step, as training would use it)."""
    out = []
    for _ in range(n):
        out.append(optimizer.param_groups[0][key])
        for scheduler in schedulers:
            scheduler.step()
    return out


def cosine(base, eta_min, t, period):
    return eta_min + (base - eta_min) * (1 + math.cos(math.pi * t / period)) / 2


def clamp(t, low, high):
    return min(max(t, low), high)


# (scheduler factory, closed form of the lr at global step g)
CLOSED_FORMS = {
    'ConstantLR': (lambda o: ConstantLR(o, factor=0.5, end=4),
                   lambda g: BASE * 0.5 if g < 3 else BASE),
    'LinearLR': (lambda o: LinearLR(o, start_factor=0.1, end=6),
                 lambda g: BASE * (0.1 + 0.9 * min(g, 5) / 5)),
    'LinearLR window': (lambda o: LinearLR(o, start_factor=0.1, end_factor=0.5, begin=2, end=9),
                        lambda g: BASE if g < 2 else BASE * (0.1 + 0.4 * min(g - 2, 6) / 6)),
    'StepLR': (lambda o: StepLR(o, step_size=3, gamma=0.5),
               lambda g: BASE * 0.5 ** (g // 3)),
    'MultiStepLR': (lambda o: MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3),
                    lambda g: BASE * 0.3 ** sum(m <= g for m in [2, 5, 5, 9])),
    'ExponentialLR window': (lambda o: ExponentialLR(o, gamma=0.9, begin=3, end=12),
                             lambda g: BASE * 0.9 ** clamp(g - 3, 0, 8)),
    'PolyLR': (lambda o: PolyLR(o, eta_min=0.001, power=2.0, end=15),
               lambda g: 0.001 + (BASE - 0.001) * (1 - min(g, 14) / 14) ** 2),
    # T_max shorter than the run: the cosine goes down and back up (SGDR without restarts).
    'CosineAnnealingLR periodic': (lambda o: CosineAnnealingLR(o, T_max=4, eta_min=0.01),
                                   lambda g: cosine(BASE, 0.01, g, 4)),
    'CosineAnnealingLR ratio window': (
        lambda o: CosineAnnealingLR(o, eta_min_ratio=0.1, begin=2, end=17),
        lambda g: BASE if g < 2 else cosine(BASE, BASE * 0.1, min(g - 2, 14), 15)),
    'CosineRestartLR': (
        lambda o: CosineRestartLR(o, periods=[3, 5, 4], restart_weights=[1, 0.5, 0.2],
                                  eta_min=0.001),
        lambda g: (cosine(BASE, 0.001, g, 3) if g < 3 else
                   cosine(BASE * 0.5, 0.001, g - 3, 5) if g < 8 else
                   cosine(BASE * 0.2, 0.001, min(g, 11) - 8, 4))),
}


@pytest.mark.parametrize('name', sorted(CLOSED_FORMS))
def test_closed_form(name):
    factory, closed_form = CLOSED_FORMS[name]
    optimizer = make_optimizer()
    scheduler = factory(optimizer)
    got = values_over([scheduler], optimizer, 20)
    assert got == pytest.approx([closed_form(g) for g in range(20)], rel=1e-12, abs=1e-15)
    assert scheduler.get_last_value() == [optimizer.param_groups[0]['lr']]


def one_cycle_closed_form(g, total, pct, eta_max, div, final_div, three_phase, linear):
    initial, top = eta_max / div, eta_max
    low = initial / final_div
    anneal = ((lambda a, b, p: a + (b - a) * p) if linear
              else (lambda a, b, p: b + (a - b) * (1 + math.cos(math.pi * p)) / 2))
    up_end = pct * total - 1
    if g <= up_end:
        return anneal(initial, top, g / up_end)
    if not three_phase:
        return anneal(top, low, (g - up_end) / (total - 1 - up_end))
    down_end = 2 * pct * total - 2
    if g <= down_end:
        return anneal(top, initial, (g - up_end) / (down_end - up_end))
    return anneal(initial, low, (g - down_end) / (total - 1 - down_end))


@pytest.mark.parametrize('three_phase,strategy,pct', [(False, 'cos', 0.3),
                                                      (True, 'linear', 0.25)])
def test_one_cycle_closed_form(three_phase, strategy, pct):
    optimizer = make_optimizer()
    scheduler = OneCycleLR(optimizer, eta_max=0.5, total_steps=20, pct_start=pct,
                           anneal_strategy=strategy, three_phase=three_phase)
    got = values_over([scheduler], optimizer, 20)
    expected = [one_cycle_closed_form(g, 20, pct, 0.5, 25., 1e4, three_phase,
                                      strategy == 'linear') for g in range(20)]
    assert got == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match='total steps is 20'):
        for _ in range(2):
            scheduler.step()


def test_one_cycle_total_steps_defaults_to_window():
    optimizer = make_optimizer()
    scheduler = OneCycleLR(optimizer, eta_max=0.5, begin=2, end=12)
    assert scheduler.total_steps == 10


@pytest.mark.parametrize('kind', ['sgd', 'adam'])
def test_momentum_scheduler_writes_momentum_and_betas(kind):
    optimizer = make_optimizer(kind)
    scheduler = CosineAnnealingMomentum(optimizer, T_max=5, eta_min=0.5)
    got = values_over([scheduler], optimizer, 8, key='momentum')
    assert got == pytest.approx([cosine(0.9, 0.5, g, 5) for g in range(8)], rel=1e-12)
    group = optimizer.param_groups[0]
    if kind == 'adam':
        assert group['betas'] == (group['momentum'], 0.999)


def test_momentum_scheduler_needs_momentum():
    optimizer = torch.optim.Adagrad(torch.nn.Linear(2, 1).parameters(), lr=0.1)
    with pytest.raises(ValueError, match='neither `momentum` nor `betas`'):
        StepMomentum(optimizer, step_size=2)


def test_chained_warmup_then_cosine_converted_to_iterations():
    """LinearLR for 5 iterations and an epoch-based cosine stepped per iteration multiply."""
    optimizer = make_optimizer()
    wrapper = OptimWrapper(optimizer)
    epoch_length, epochs = 7, 3
    warmup = build_param_scheduler(
        dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=5), wrapper,
        epoch_length=epoch_length)
    cosine_cfg = dict(type='CosineAnnealingLR', by_epoch=True, begin=0, end=epochs,
                      convert_to_iter_based=True)
    main = build_param_scheduler(cosine_cfg, wrapper, epoch_length=epoch_length)
    assert (main.by_epoch, main.T_max, main.end) == (False, 21, 21)
    assert cosine_cfg['convert_to_iter_based'] is True and 'optimizer' not in cosine_cfg

    got = values_over([warmup, main], optimizer, 21)
    expected = [BASE * (0.01 + 0.99 * min(t, 4) / 4) * (1 + math.cos(math.pi * t / 21)) / 2
                for t in range(21)]
    assert got == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize('cfg,attrs', [
    (dict(type='StepLR', step_size=2), dict(step_size=14)),
    (dict(type='MultiStepLR', milestones=[1, 3]), dict(milestones={7: 1, 21: 1})),
    (dict(type='CosineAnnealingLR', T_max=2), dict(T_max=14)),
    (dict(type='CosineRestartLR', periods=[1, 2], restart_weights=[1, 0.5], eta_min=0.),
     dict(periods=[7, 14], cumulative_periods=[7, 21])),
    (dict(type='OneCycleLR', eta_max=0.5, total_steps=2), dict(total_steps=14)),
    (dict(type='PolyLR', begin=0.5, end=3), dict(begin=3, end=21, total_iters=17)),
])
def test_convert_to_iter_based_scales_epoch_arguments(cfg, attrs):
    scheduler = build_param_scheduler(dict(cfg, convert_to_iter_based=True), make_optimizer(),
                                      epoch_length=7)
    assert scheduler.by_epoch is False
    for name, value in attrs.items():
        assert getattr(scheduler, name) == value


def test_convert_to_iter_based_errors():
    optimizer = make_optimizer()
    with pytest.raises(ValueError, match='epoch_length must be a positive integer'):
        build_param_scheduler(dict(type='StepLR', step_size=1, convert_to_iter_based=True),
                              optimizer)
    with pytest.raises(ValueError, match='only epoch-based'):
        build_param_scheduler(dict(type='StepLR', step_size=1, by_epoch=False,
                                   convert_to_iter_based=True), optimizer, epoch_length=3)
    with pytest.raises(TypeError, match='cannot be converted'):
        build_param_scheduler(dict(type='ReduceOnPlateauLR', convert_to_iter_based=True),
                              optimizer, epoch_length=3)


def test_build_rejects_bad_entries():
    with pytest.raises(KeyError, match="CosineLR is not in the mmengine::parameter scheduler registry"):
        build_param_scheduler(dict(type='CosineLR'), make_optimizer())
    with pytest.raises(TypeError, match='should be a dict'):
        build_param_scheduler(['LinearLR'], make_optimizer())


def test_window_validation_and_optimizer_type():
    with pytest.raises(ValueError, match='end should be larger than begin'):
        LinearLR(make_optimizer(), begin=3, end=3)
    with pytest.raises(TypeError, match='Optimizer or an OptimWrapper'):
        LinearLR(object())
    with pytest.raises(KeyError, match='initial_lr'):
        LinearLR(make_optimizer(), last_step=4)


def test_scheduler_before_begin_leaves_value_alone():
    optimizer = make_optimizer()
    LinearLR(optimizer, start_factor=0.5, begin=2, end=4)
    assert optimizer.param_groups[0]['lr'] == BASE  # construction is step 0, outside [2, 4)
    assert optimizer.param_groups[0]['initial_lr'] == BASE


ALL_SCHEDULERS = [
    lambda o: ConstantLR(o, end=5), lambda o: LinearLR(o, end=5),
    lambda o: StepLR(o, step_size=2), lambda o: MultiStepLR(o, milestones=[3, 6]),
    lambda o: ExponentialLR(o, gamma=0.8), lambda o: PolyLR(o, end=10),
    lambda o: CosineAnnealingLR(o, T_max=6), lambda o: OneCycleLR(o, eta_max=1., total_steps=12),
    lambda o: CosineRestartLR(o, periods=[4, 4], restart_weights=[1, 0.5], eta_min=0.),
    lambda o: LinearMomentum(o, end=5),
]


@pytest.mark.parametrize('factory', ALL_SCHEDULERS)
def test_state_dict_round_trip_mid_schedule(factory):
    """Resume from a checkpoint read with weights_only=True: the rest of the schedule matches."""
    reference_optimizer = make_optimizer()
    reference = factory(reference_optimizer)
    values_over([reference], reference_optimizer, 4)

    buffer = io.BytesIO()
    torch.save({'optimizer': reference_optimizer.state_dict(),
                'scheduler': reference.state_dict()}, buffer)
    buffer.seek(0)
    checkpoint = torch.load(buffer, weights_only=True)
    assert 'optimizer' not in checkpoint['scheduler']

    resumed_optimizer = make_optimizer()
    resumed = factory(resumed_optimizer)
    resumed_optimizer.load_state_dict(checkpoint['optimizer'])
    resumed.load_state_dict(checkpoint['scheduler'])
    key = 'momentum' if isinstance(reference, LinearMomentum) else 'lr'
    assert (values_over([resumed], resumed_optimizer, 8, key)
            == values_over([reference], reference_optimizer, 8, key))


def test_schedulers_drive_the_wrappers_extra_base_group():
    """With two param groups the wrapper's base group is scheduled too (get_lr()['base_lr'])."""
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD([{'params': [model.weight]},
                                 {'params': [model.bias], 'lr': 0.05}], lr=BASE)
    wrapper = OptimWrapper(optimizer)
    scheduler = StepLR(wrapper, step_size=1, gamma=0.5)
    scheduler.step()
    assert wrapper.get_lr() == {'base_lr': [BASE * 0.5], 'lr': [BASE * 0.5, 0.05 * 0.5]}


def test_all_names_registered():
    families = ['Constant', 'Linear', 'Step', 'MultiStep', 'Exponential', 'CosineAnnealing',
                'Poly', 'CosineRestart', 'ReduceOnPlateau']
    names = ([f + 'ParamScheduler' for f in families + ['OneCycle']]
             + [f + 'LR' for f in families + ['OneCycle']] + [f + 'Momentum' for f in families])
    assert all(name in PARAM_SCHEDULERS for name in names)


def test_reduce_on_plateau_less_rel_with_cooldown_and_min_value():
    optimizer = make_optimizer()
    scheduler = ReduceOnPlateauLR(optimizer, monitor='loss', patience=1, factor=0.5, cooldown=1,
                                  min_value=0.03)
    losses = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5]
    got = []
    for loss in losses:
        scheduler.step()  # the training epoch: only counts
        scheduler.step(dict(loss=loss))
        got.append(optimizer.param_groups[0]['lr'])
    # bad epochs: #2 -> 1, #3 -> 2 > patience: halve, cooldown 1; #4 ignored (cooldown);
    # #5 -> 1, #6 -> 2: halve to 0.025 -> floored at 0.03; #7 improves; #9 -> 2: 0.03 stays.
    assert got == pytest.approx([0.1, 0.1, 0.05, 0.05, 0.05, 0.03, 0.03, 0.03, 0.03, 0.03])
    assert scheduler.best == 0.5 and scheduler.get_last_value() == [0.03]


def test_reduce_on_plateau_greater_abs_window_and_errors():
    optimizer = make_optimizer()
    scheduler = ReduceOnPlateauMomentum(optimizer, monitor='acc', rule='greater',
                                        threshold_rule='abs', threshold=0.1, patience=0,
                                        begin=1, end=3)
    scheduler.step(dict(acc=0.5))  # global step 0 < begin: ignored
    assert scheduler.best == -INF
    scheduler.step()
    scheduler.step(dict(acc=0.5))  # best = 0.5
    scheduler.step(dict(acc=0.55))  # not better by 0.1: reduce at once (patience 0)
    assert optimizer.param_groups[0]['momentum'] == pytest.approx(0.09)
    scheduler.step()
    scheduler.step()
    scheduler.step(dict(acc=0.1))  # global step 3 == end: ignored
    assert optimizer.param_groups[0]['momentum'] == pytest.approx(0.09)
    with pytest.raises(KeyError, match="monitors 'acc'"):
        ReduceOnPlateauLR(make_optimizer(), monitor='acc').step(dict(loss=1.))
    with pytest.raises(TypeError, match='metrics type should be dict'):
        ReduceOnPlateauLR(make_optimizer()).step([1.0])
    with pytest.raises(ValueError, match='only supports by_epoch=True'):
        ReduceOnPlateauLR(make_optimizer(), by_epoch=False)


def test_state_dict_keys_in_mmengine_order():
    """A checkpoint's param_schedulers entries list their keys as MMEngine 0.10.7's do."""
    assert list(LinearLR(make_optimizer(), start_factor=0.1, end=4).state_dict()) == [
        'start_factor', 'end_factor', 'total_iters', 'param_name', 'begin', 'end', 'by_epoch',
        'base_values', 'last_step', '_global_step', 'verbose', '_last_value']
    assert list(ReduceOnPlateauLR(make_optimizer(), monitor='loss').state_dict()) == [
        'param_name', 'begin', 'end', 'by_epoch', 'last_step', '_global_step', 'verbose',
        'factor', 'min_values', 'patience', 'cooldown', 'cooldown_counter', 'rule_worse', 'best',
        'num_bad_epochs', 'eps', 'monitor', 'rule', 'threshold', 'threshold_rule', '_last_value']
    phases = OneCycleLR(make_optimizer(), eta_max=1., total_steps=10).state_dict()[
        '_schedule_phases']
    assert phases == [dict(end_step=2.0, start_lr='initial_lr', end_lr='max_lr'),
                      dict(end_step=9, start_lr='max_lr', end_lr='min_lr')]
