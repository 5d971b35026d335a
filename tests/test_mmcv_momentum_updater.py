"""minimm.mmcv's momentum updater hooks against MMCV 1.7.2: its reference values, and its closed
forms (written out here) for every policy, every (dividing) warm-up and both by_epoch modes."""
import pytest

from minimm.mmcv import HOOKS
from mmcv_probe import cos_anneal, cyclic_closed_form, make_optimizer, record, step_closed_form

E, B = 3, 4

# MMCV 1.7.2's momentum of iterations 0..11 (lr fixed), rounded to 6 decimals.
REFERENCE = [
    (dict(policy='step', step=[6], gamma=0.5, by_epoch=False, warmup='linear', warmup_iters=4,
          warmup_ratio=0.5), [1.8, 1.44, 1.2, 1.028571, .9, .9] + [.45] * 6),
    (dict(policy='CosineAnnealing', min_momentum_ratio=0.5), [.9] * 4 + [.7875] * 4 + [.5625] * 4),
    (dict(policy='cyclic', by_epoch=False),
     [.9, .886126, .852632, .819137, .805263, .808869, .819137, .834504, .852632, .870759,
      .886126, .896394]),
    (dict(policy='OneCycle', pct_start=0.25),
     [.95, .9, .85, .853015, .861698, .875, .891318, .908682, .925, .938302, .946985, .95]),
    (dict(policy='LinearAnnealing', min_momentum=0.5, by_epoch=False, warmup='exp',
          warmup_iters=3, warmup_ratio=0.9),
     [1, .929731, .86312, .8, .766667, .733333, .7, .666667, .633333, .6, .566667, .533333]),
]


@pytest.mark.parametrize('cfg,expected', REFERENCE, ids=[c['policy'] for c, _ in REFERENCE])
def test_momentum_matches_mmcv_reference_values(cfg, expected):
    _, momenta = record(momentum_config=dict(cfg))
    assert [round(m, 6) for m in momenta] == expected


def regular_momentum(policy, kw, base, p, P):
    target = kw.get('min_momentum') if kw.get('min_momentum_ratio') is None \
        else base * kw['min_momentum_ratio']
    if policy == 'step':
        return step_closed_form(base, p, kw['step'], kw.get('gamma', 0.5),
                                kw.get('min_momentum'))
    if policy == 'CosineAnnealing':
        return cos_anneal(base, target, p / P)
    return base + (target - base) * p / P  # LinearAnnealing


def expected_momenta(policy, kw, by_epoch, warmup=None, W=0, ratio=0.9, base=0.9):
    """MMCV's dividing warm-up: the regular momentum divided by the lr warm-up's factor."""
    momenta = []
    for it in range(E * B):
        p, P = (it // B, E) if by_epoch else (it, E * B)
        m = regular_momentum(policy, kw, base, p, P)
        if warmup and it < W:
            m /= {'constant': ratio, 'linear': 1 - (1 - it / W) * (1 - ratio),
                  'exp': ratio ** (1 - it / W)}[warmup]
        momenta.append(m)
    return momenta


POLICIES = [('step', dict(step=2)), ('step', dict(step=[1, 7], gamma=0.3, min_momentum=0.1)),
            ('CosineAnnealing', dict(min_momentum=0.3)),
            ('LinearAnnealing', dict(min_momentum_ratio=0.5))]


@pytest.mark.parametrize('warmup', [None, 'constant', 'linear', 'exp'])
@pytest.mark.parametrize('by_epoch', [True, False])
@pytest.mark.parametrize('policy,kw', POLICIES, ids=[f'{p}{i}' for i, (p, _) in
                                                     enumerate(POLICIES)])
def test_every_policy_and_warmup_in_both_modes_follows_mmcv_closed_forms(policy, kw, by_epoch,
                                                                          warmup):
    warm = dict(warmup=warmup, warmup_iters=5, warmup_ratio=0.6) if warmup else {}
    _, momenta = record(momentum_config=dict(policy=policy, by_epoch=by_epoch, **kw, **warm))
    assert momenta == pytest.approx(expected_momenta(policy, kw, by_epoch, warmup, 5, 0.6),
                                    rel=1e-12)


@pytest.mark.parametrize('gamma,times,up', [(0.5, 2, 0.4), (0.7, 3, 0.25)])
def test_cyclic_follows_mmcv_closed_form(gamma, times, up):
    kw = dict(target_ratio=(0.8, 1.05), cyclic_times=times, step_ratio_up=up, gamma=gamma)
    _, momenta = record(momentum_config=dict(policy='cyclic', **kw))
    assert momenta == pytest.approx([cyclic_closed_form(0.9, i, E * B, **kw)
                                     for i in range(E * B)], rel=1e-12)


def test_a_resumed_optimizer_keeps_its_initial_momentum_as_base():
    model, optimizer = make_optimizer()
    optimizer.param_groups[0]['initial_momentum'] = 0.8  # as left by the first run's before_run
    _, momenta = record(momentum_config=dict(policy='step', step=1), optimizer=optimizer)
    assert momenta == pytest.approx([0.8] * B + [0.4] * B + [0.2] * B)


def one_cycle_momentum(it, M, low, high, pct, three_phase):
    ends = [pct * M - 1, 2 * pct * M - 2, M - 1] if three_phase else [pct * M - 1, M - 1]
    pairs = [(high, low), (low, high), (high, high)] if three_phase else [(high, low), (low, high)]
    start = 0
    for i, (end, (a, b)) in enumerate(zip(ends, pairs)):
        if it <= end or i == len(ends) - 1:
            return cos_anneal(a, b, (it - start) / (end - start))
        start = end


@pytest.mark.parametrize('three_phase', [False, True])
def test_one_cycle_writes_its_bounds_in_the_groups_and_follows_the_closed_form(three_phase):
    model, optimizer = make_optimizer()
    _, momenta = record(momentum_config=dict(policy='OneCycle', base_momentum=0.8,
                                             max_momentum=0.97, pct_start=0.3,
                                             three_phase=three_phase), optimizer=optimizer)
    assert momenta == pytest.approx([one_cycle_momentum(i, E * B, 0.8, 0.97, 0.3, three_phase)
                                     for i in range(E * B)], rel=1e-12)
    group = optimizer.param_groups[0]
    assert (group['base_momentum'], group['max_momentum']) == (0.8, 0.97)


def test_adam_betas0_is_scheduled_and_betas1_kept():
    _, adam = make_optimizer(kind='adam')
    _, momenta = record(momentum_config=dict(policy='step', step=[1], warmup='constant',
                                             warmup_iters=2), optimizer=adam, max_epochs=2)
    assert momenta == pytest.approx([1.0, 1.0, 0.9, 0.9, 0.45, 0.45, 0.45, 0.45])
    assert adam.param_groups[0]['betas'] == (pytest.approx(0.45), 0.99)
    _, momenta = record(momentum_config=dict(policy='OneCycle', pct_start=0.25), optimizer=adam)
    assert momenta[0] == 0.95 and adam.param_groups[0]['betas'][1] == 0.99


def test_every_optimizer_of_a_dict_is_updated():
    (_, a), (_, b) = make_optimizer(), make_optimizer(kind='adam')
    _, momenta = record(momentum_config=dict(policy='CosineAnnealing', min_momentum=0.1),
                        optimizer=dict(a=a, b=b), all_groups=True)
    expected = expected_momenta('CosineAnnealing', dict(min_momentum=0.1), True)
    assert [m['a'][0] for m in momenta] == pytest.approx(expected)
    assert [m['b'][0] for m in momenta] == pytest.approx(expected)
    _, momenta = record(momentum_config=dict(policy='OneCycle', base_momentum=dict(a=[0.8], b=[0.7]),
                                             max_momentum=[0.9], pct_start=0.25),
                        optimizer=dict(a=a, b=b), all_groups=True)
    assert momenta[0] == dict(a=[0.9], b=[0.9])
    assert momenta[2] == dict(a=[pytest.approx(0.8)], b=[pytest.approx(0.7)])


@pytest.mark.parametrize('cfg,error,match', [
    (dict(type='StepMomentumUpdaterHook', step=1, warmup='cosine'), ValueError,
     'valid types are "constant" and "linear"'),
    (dict(type='StepMomentumUpdaterHook', step=1, warmup_by_epoch=True), TypeError,
     'warmup_by_epoch'),
    (dict(type='CosineAnnealingMomentumUpdaterHook'), AssertionError, None),
    (dict(type='CyclicMomentumUpdaterHook', target_ratio=[0.8, 1.]), ValueError, 'target_ratio'),
    (dict(type='OneCycleMomentumUpdaterHook', base_momentum=1), ValueError,
     'base_momentum must be the type among of float,list or dict'),
    (dict(type='OneCycleMomentumUpdaterHook', max_momentum=1), ValueError, 'max_momentum'),
    (dict(type='OneCycleMomentumUpdaterHook', by_epoch=True), AssertionError, None),
])
def test_bad_arguments_fail_early_as_in_mmcv(cfg, error, match):
    with pytest.raises(error, match=match):
        HOOKS.build(cfg)


def test_one_cycle_needs_an_optimizer_with_momentum():
    import torch
    optimizer = torch.optim.Adagrad(make_optimizer()[0].parameters())
    with pytest.raises(ValueError, match='optimizer must support momentum'):
        record(momentum_config=dict(policy='OneCycle'), optimizer=optimizer)


def test_momentum_updaters_are_registered_under_mmcv_names():
    for name in ('Step', 'CosineAnnealing', 'Cyclic', 'OneCycle', 'LinearAnnealing'):
        assert HOOKS.get(f'{name}MomentumUpdaterHook').__name__ == f'{name}MomentumUpdaterHook'
    assert HOOKS.get('MomentumUpdaterHook') is None
    import minimm.mmcv.hooks.momentum_updater as momentum_updater
    for name in ('MomentumUpdaterHook', 'CyclicMomentumUpdaterHook', 'OneCycleMomentumUpdaterHook',
                 'annealing_cos', 'annealing_linear'):
        assert hasattr(momentum_updater, name), name
