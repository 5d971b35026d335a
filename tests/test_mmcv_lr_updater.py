"""minimm.mmcv's LR updater hooks against MMCV 1.7.2: its reference values, and its closed forms
(written out here independently) for every policy, every warm-up and both by_epoch modes."""
import pytest

from minimm.mmcv import HOOKS, OneCycleLrUpdaterHook
from mmcv_probe import cos_anneal, cyclic_closed_form, make_optimizer, record, step_closed_form

E, B = 3, 4  # 3 epochs of 4 batches: 12 iterations, as MMCV's reference run

# MMCV 1.7.2's lr of iterations 0..11, rounded to 6 decimals ("x*n" is n repeats).
REFERENCE = [
    (dict(policy='step', step=[1, 2], gamma=0.1, warmup='linear', warmup_iters=3,
          warmup_ratio=0.1), '.01 .04 .07 .1 .01 .01 .01 .01 .001 .001 .001 .001'),
    (dict(policy='step', step=2, gamma=0.5, min_lr=0.02, by_epoch=False),
     '.1 .1 .05 .05 .025 .025 .02 .02 .02 .02 .02 .02'),
    (dict(policy='exp', gamma=0.9, by_epoch=False, warmup='exp', warmup_iters=3,
          warmup_ratio=0.1),
     '.01 .01939 .037597 .0729 .06561 .059049 .053144 .04783 .043047 .038742 .034868 .031381'),
    (dict(policy='poly', power=2, min_lr=0.01, warmup='constant', warmup_iters=1,
          warmup_by_epoch=True, warmup_ratio=0.5), '.05*8 .02*4'),
    (dict(policy='inv', gamma=0.1, power=0.5, by_epoch=False),
     '.1 .095346 .091287 .087706 .084515 .08165 .079057 .076696 .074536 .072548 .070711 .069007'),
    (dict(policy='CosineAnnealing', min_lr_ratio=0.1, by_epoch=False),
     '.1 .098467 .093971 .08682 .0775 .066647 .055 .043353 .0325 .02318 .016029 .011533'),
    (dict(policy='CosineAnnealing', min_lr=0), '.1*4 .075*4 .025*4'),
    (dict(policy='FlatCosineAnnealing', start_percent=0.5, min_lr=0.001, by_epoch=False),
     '.1*7 .093368 .07525 .0505 .02575 .007632'),
    (dict(policy='CosineRestart', periods=[4, 8], restart_weights=[1, 0.5], min_lr=0.01,
          by_epoch=False),
     '.1 .08682 .055 .02318 .055 .053287 .04841 .04111 .0325 .02389 .01659 .011713'),
    (dict(policy='cyclic', target_ratio=(10, 1e-4), cyclic_times=2, step_ratio_up=0.4,
          gamma=0.5),
     '.1 .55 1 .853555 .500005 .146455 .1 .325 .55 .469456 .275005 .080554'),
    (dict(policy='OneCycle', max_lr=1.0, pct_start=0.25, three_phase=True),
     '.04 .52 1 .52 .04 .03802 .032471 .024452 .015552 .007533 .001984 4e-06'),
    (dict(policy='LinearAnnealing', min_lr=0), '.1*4 .066667*4 .033333*4'),
]


def expand(text):
    values = []
    for item in text.split():
        value, _, n = item.partition('*')
        values += [float(value)] * int(n or 1)
    return values


def round6(values):
    return [round(v, 6) for v in values]


@pytest.mark.parametrize('cfg,expected', REFERENCE, ids=[c['policy'] for c, _ in REFERENCE])
def test_lr_matches_mmcv_reference_values(cfg, expected):
    lrs, _ = record(lr_config=dict(cfg))
    assert round6(lrs) == expand(expected)


# ---- MMCV's closed forms, written from its documentation, independent of minimm's code ----
def regular_lr(policy, kw, base, p, P, it, max_iters):
    """MMCV's get_lr for ``policy`` at progress ``p`` of ``P`` (``it`` of ``max_iters``)."""
    target = kw.get('min_lr') if kw.get('min_lr_ratio') is None else base * kw['min_lr_ratio']
    if policy == 'fixed':
        return base
    if policy == 'step':
        return step_closed_form(base, p, kw['step'], kw.get('gamma', 0.1), kw.get('min_lr'))
    if policy == 'exp':
        return base * kw['gamma'] ** p
    if policy == 'poly':
        m = kw.get('min_lr', 0.)
        return (base - m) * (1 - p / P) ** kw.get('power', 1.) + m
    if policy == 'inv':
        return base * (1 + kw['gamma'] * p) ** -kw.get('power', 1.)
    if policy == 'CosineAnnealing':
        return cos_anneal(base, target, p / P)
    if policy == 'LinearAnnealing':
        return base + (target - base) * p / P
    if policy == 'FlatCosineAnnealing':
        start = round(P * kw['start_percent'])
        return base if p < start else cos_anneal(base, target, (p - start) / (P - start))
    if policy == 'CosineRestart':
        ends = [sum(kw['periods'][:i + 1]) for i in range(len(kw['periods']))]
        i = next(i for i, end in enumerate(ends) if p < end)
        start = ends[i - 1] if i else 0
        return cos_anneal(base, target, min((p - start) / kw['periods'][i], 1),
                          kw['restart_weights'][i])
    if policy == 'cyclic':
        return cyclic_closed_form(base, it, max_iters, kw['target_ratio'], kw['cyclic_times'],
                                  kw['step_ratio_up'], kw['gamma'])
    raise AssertionError(policy)


def warmup_lr(kind, reg, it, W, ratio):
    if kind == 'constant':
        return reg * ratio
    if kind == 'linear':
        return reg * (1 - (1 - it / W) * (1 - ratio))
    return reg * ratio ** (1 - it / W)


def expected_lrs(policy, kw, by_epoch, warmup=None, W=0, ratio=0.1, base=0.1):
    lrs = []
    for it in range(E * B):
        p, P = (it // B, E) if by_epoch else (it, E * B)
        reg = regular_lr(policy, kw, base, p, P, it, E * B)
        lrs.append(warmup_lr(warmup, reg, it, W, ratio) if warmup and it < W else reg)
    return lrs


POLICIES = [
    ('fixed', {}), ('step', dict(step=2, gamma=0.5)), ('step', dict(step=[1, 5, 9], gamma=0.3)),
    ('step', dict(step=1, gamma=0.2, min_lr=0.007)), ('exp', dict(gamma=0.8)),
    ('poly', dict(power=1.5, min_lr=0.003)), ('inv', dict(gamma=0.3, power=0.75)),
    ('CosineAnnealing', dict(min_lr=0.002)), ('CosineAnnealing', dict(min_lr_ratio=0.05)),
    ('LinearAnnealing', dict(min_lr_ratio=0.2)),
    ('FlatCosineAnnealing', dict(start_percent=0.3, min_lr_ratio=0.1)),
    ('CosineRestart', dict(periods=[1, 2], restart_weights=[1, 0.7], min_lr=0.01)),
]


@pytest.mark.parametrize('warmup', [None, 'constant', 'linear', 'exp'])
@pytest.mark.parametrize('by_epoch', [True, False])
@pytest.mark.parametrize('policy,kw', POLICIES, ids=[f'{p}{i}' for i, (p, _) in
                                                     enumerate(POLICIES)])
def test_every_policy_and_warmup_in_both_modes_follows_mmcv_closed_forms(policy, kw, by_epoch,
                                                                          warmup):
    if policy == 'CosineRestart' and not by_epoch:
        kw = dict(kw, periods=[4, 8])  # the periods count iterations instead of epochs
    warm = dict(warmup=warmup, warmup_iters=5, warmup_ratio=0.25) if warmup else {}
    lrs, _ = record(lr_config=dict(policy=policy, by_epoch=by_epoch, **kw, **warm))
    assert lrs == pytest.approx(expected_lrs(policy, kw, by_epoch, warmup, 5, 0.25), rel=1e-12)


@pytest.mark.parametrize('gamma,times,up', [(1, 1, 0.4), (0.5, 3, 0.25), (0.8, 2, 0.)])
def test_cyclic_follows_mmcv_closed_form(gamma, times, up):
    kw = dict(target_ratio=(8, 1e-3), cyclic_times=times, step_ratio_up=up, gamma=gamma)
    lrs, _ = record(lr_config=dict(policy='cyclic', **kw))
    assert lrs == pytest.approx(expected_lrs('cyclic', kw, False), rel=1e-12)


def one_cycle(it, T, max_lr, pct, div, final_div, three_phase, strategy):
    base = max_lr / div
    anneal = cos_anneal if strategy == 'cos' else (lambda a, b, f: a + (b - a) * f)
    ends = [pct * T - 1, 2 * pct * T - 2, T - 1] if three_phase else [pct * T - 1, T - 1]
    mults = [(1, div), (div, 1), (1, 1 / final_div)] if three_phase else \
        [(1, div), (div, 1 / final_div)]
    start = 0
    for end, (a, b) in zip(ends, mults):
        if it <= end:
            return anneal(base * a, base * b, (it - start) / (end - start))
        start = end


@pytest.mark.parametrize('three_phase', [False, True])
@pytest.mark.parametrize('strategy', ['cos', 'linear'])
@pytest.mark.parametrize('total_steps', [None, 20])
def test_one_cycle_follows_mmcv_closed_form(three_phase, strategy, total_steps):
    cfg = dict(policy='OneCycle', max_lr=0.6, pct_start=0.35, anneal_strategy=strategy,
               div_factor=10, final_div_factor=100, three_phase=three_phase,
               total_steps=total_steps)
    lrs, _ = record(lr_config=cfg)
    T = total_steps or E * B
    assert lrs == pytest.approx([one_cycle(i, T, 0.6, 0.35, 10, 100, three_phase, strategy)
                                 for i in range(E * B)], rel=1e-12)


def test_flat_cosine_start_rounds_half_to_even():
    # 4 iterations, start_percent 0.625: the flat part ends at round(2.5) == 2 (Python's
    # rounding), not 3.
    lrs, _ = record(lr_config=dict(policy='FlatCosineAnnealing', start_percent=0.625, min_lr=0.,
                                   by_epoch=False), max_epochs=1)
    assert lrs == pytest.approx([0.1, 0.1, 0.1, 0.05])


def test_warmup_by_epoch_counts_epochs_of_the_loader():
    lrs, _ = record(lr_config=dict(policy='fixed', warmup='linear', warmup_iters=2,
                                   warmup_by_epoch=True, warmup_ratio=0.2))
    assert lrs == pytest.approx(expected_lrs('fixed', {}, True, 'linear', 2 * B, 0.2), rel=1e-12)


def test_every_optimizer_of_a_dict_is_updated():
    (_, a), (_, b) = make_optimizer(lr=0.1), make_optimizer(kind='adam', lr=0.05)
    lrs, _ = record(lr_config=dict(policy='step', step=[1], warmup='constant', warmup_iters=2),
                    optimizer=dict(a=a, b=b), all_groups=True)
    assert [lr['a'][0] for lr in lrs] == pytest.approx(
        expected_lrs('step', dict(step=[1]), True, 'constant', 2, 0.1))
    assert [lr['b'][0] for lr in lrs] == pytest.approx(
        expected_lrs('step', dict(step=[1]), True, 'constant', 2, 0.1, base=0.05))


def test_one_cycle_max_lr_per_optimizer_name_and_per_group():
    (_, a), (_, b) = make_optimizer(), make_optimizer()
    lrs, _ = record(lr_config=dict(policy='OneCycle', max_lr=dict(a=[1.0], b=[0.5])),
                    optimizer=dict(a=a, b=b), all_groups=True)
    assert lrs[0] == dict(a=[pytest.approx(1.0 / 25)], b=[pytest.approx(0.5 / 25)])
    # A single optimizer is looked up by its class name, as MMCV does; as there, a dict holds a
    # list per optimizer (a bare number is not spread over the groups).
    lrs, _ = record(lr_config=dict(policy='OneCycle', max_lr=dict(SGD=[0.5])))
    assert lrs[0] == pytest.approx(0.5 / 25)
    with pytest.raises(KeyError, match='SGD is not found'):
        record(lr_config=dict(policy='OneCycle', max_lr=dict(Adam=[0.5])))


def test_a_resumed_optimizer_keeps_its_initial_lr_as_base():
    model, optimizer = make_optimizer()
    optimizer.param_groups[0]['initial_lr'] = 0.4  # as left by the first run's before_run
    lrs, _ = record(lr_config=dict(policy='step', step=1, gamma=0.5), optimizer=optimizer)
    assert lrs == [0.4] * B + [0.2] * B + [0.1] * B


def test_iter_based_runner_quirks():
    # by_epoch=True never reaches before_train_epoch on IterBasedRunner: the lr never changes,
    # and warm-up writes nothing (its regular lr list is empty).
    lrs, _ = record(lr_config=dict(policy='step', step=1, by_epoch=True, warmup='linear',
                                   warmup_iters=3), by_iter=True)
    assert lrs == [0.1] * (E * B)
    lrs, _ = record(lr_config=dict(policy='step', step=4, gamma=0.5), by_iter=True)
    assert lrs == [0.1] * 4 + [0.05] * 4 + [0.025] * 4
    with pytest.raises(AssertionError):
        record(lr_config=dict(policy='fixed', warmup='linear', warmup_iters=1,
                              warmup_by_epoch=True), by_iter=True)


@pytest.mark.parametrize('cfg,error,match', [
    (dict(type='FixedLrUpdaterHook', warmup='cosine'), ValueError,
     '"cosine" is not a supported type for warming up, valid types are "constant", "linear" '
     'and "exp"'),
    (dict(type='FixedLrUpdaterHook', warmup='linear', warmup_iters=0), AssertionError, None),
    (dict(type='FixedLrUpdaterHook', warmup='linear', warmup_iters=2, warmup_ratio=0),
     AssertionError, None),
    (dict(type='StepLrUpdaterHook', step='2'), TypeError, '"step" must be a list or integer'),
    (dict(type='StepLrUpdaterHook', step=[2, 0]), AssertionError, None),
    (dict(type='CosineAnnealingLrUpdaterHook'), AssertionError, None),
    (dict(type='CosineAnnealingLrUpdaterHook', min_lr=0, min_lr_ratio=0.1), AssertionError, None),
    (dict(type='FlatCosineAnnealingLrUpdaterHook', start_percent=1, min_lr=0), ValueError,
     'expected float between 0 and 1 start_percent'),
    (dict(type='CosineRestartLrUpdaterHook', periods=[2, 3], min_lr=0), AssertionError, None),
    (dict(type='CyclicLrUpdaterHook', target_ratio=[10, 1e-4]), ValueError,
     'target_ratio should be either float or tuple'),
    (dict(type='CyclicLrUpdaterHook', by_epoch=True), AssertionError, None),
    (dict(type='CyclicLrUpdaterHook', gamma=0), AssertionError, None),
    (dict(type='CyclicLrUpdaterHook', anneal_strategy='exp'), ValueError, 'anneal_strategy'),
    (dict(type='OneCycleLrUpdaterHook', max_lr=1., by_epoch=True), AssertionError, None),
    (dict(type='OneCycleLrUpdaterHook', max_lr='1'), ValueError, 'max_lr'),
    (dict(type='OneCycleLrUpdaterHook', max_lr=1., total_steps=10.), ValueError, 'total_steps'),
    (dict(type='OneCycleLrUpdaterHook', max_lr=1., pct_start=1), ValueError, 'pct_start'),
])
def test_bad_arguments_fail_early_as_in_mmcv(cfg, error, match):
    with pytest.raises(error, match=match and match.replace('(', r'\(')):
        HOOKS.build(cfg)


def test_bad_schedules_fail_at_run_time():
    with pytest.raises(ValueError, match='The total steps must be greater than or equal'):
        record(lr_config=dict(policy='OneCycle', max_lr=1., total_steps=11))
    with pytest.raises(ValueError, match=r'Current iteration 4 exceeds cumulative_periods \[4\]'):
        record(lr_config=dict(policy='CosineRestart', periods=[4], min_lr=0, by_epoch=False))
    with pytest.raises(ValueError, match='expected 1 values for SGD, got 2'):
        record(lr_config=dict(policy='OneCycle', max_lr=[1., 2.]))
    # lower-case multi-word policies are title-cased into a name MMCV does not have
    with pytest.raises(KeyError, match='FlatcosineannealingLrUpdaterHook is not in the hook'):
        record(lr_config=dict(policy='flatcosineannealing', min_lr=0))


def test_updater_hooks_are_registered_under_mmcv_names_but_bases_are_not():
    for name in ('Fixed', 'Step', 'Exp', 'Poly', 'Inv', 'CosineAnnealing', 'FlatCosineAnnealing',
                 'CosineRestart', 'Cyclic', 'OneCycle', 'LinearAnnealing'):
        assert HOOKS.get(f'{name}LrUpdaterHook').__name__ == f'{name}LrUpdaterHook'
    assert HOOKS.get('LrUpdaterHook') is None
    assert isinstance(HOOKS.build(dict(type='OneCycleLrUpdaterHook', max_lr=1.)),
                      OneCycleLrUpdaterHook)


def test_updater_files_import_downwards_and_expose_mmcvs_names():
    # Each updater file imports only the files listed before it (no import cycle), and every
    # name MMCV's lr_updater module exposes is importable from minimm's.
    import ast
    import pathlib

    import minimm.mmcv.hooks.lr_updater as lr_updater
    order = ['hook', 'schedule', 'updater', 'lr_updater_cyclic', 'lr_updater',
             'momentum_updater_cyclic', 'momentum_updater']
    folder = pathlib.Path(lr_updater.__file__).parent
    for index, name in enumerate(order[1:], 1):
        tree = ast.parse((folder / f'{name}.py').read_text())
        imported = {node.module for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.level == 1}
        assert imported <= set(order[:index]), (name, imported - set(order[:index]))
    for name in ('LrUpdaterHook', 'CyclicLrUpdaterHook', 'OneCycleLrUpdaterHook', 'annealing_cos',
                 'annealing_linear', 'format_param', 'get_position_from_periods'):
        assert hasattr(lr_updater, name), name
