"""ema_update_ and EMAPlan: closed forms and MMEngine's per-tensor lerp_ loop as oracles for both
backends, the native kernels within the stated bound of the fallback (MMEngine's lerp_), and the
input checks."""
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minimm.ops import EMAPlan, averaging_weight, ema_update_, ema_update_ref
from minimm.ops.ema import FALLBACK_ULPS
from toy import random_tensor

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
# (ema dtype, source dtype) pairs the averaged models meet: same dtype, and an fp32 EMA of a
# mixed-precision model.
PAIRS = [(d, d) for d in FLOATS] + [(torch.float32, torch.float16), (torch.float32, torch.bfloat16),
                                    (torch.float64, torch.float32), (torch.float16, torch.float32)]
TOL = {torch.float32: 1e-6, torch.float64: 1e-12, torch.float16: 1e-3, torch.bfloat16: 8e-3}


def assert_within_fallback_bound(got, want, scale, updates=1):
    """The bound minimm/ops/ema.py states between the kernels and the fallback: per update,
    FALLBACK_ULPS units in the last place of the accumulate type, plus one unit of an fp16/bf16
    EMA's dtype, relative to ``scale`` (the largest magnitude the update saw); integers equal."""
    if not got.is_floating_point():
        assert torch.equal(got, want)
        return
    acc = torch.float64 if got.dtype == torch.float64 else torch.float32
    per_update = FALLBACK_ULPS * torch.finfo(acc).eps
    if got.dtype in (torch.float16, torch.bfloat16):
        per_update += torch.finfo(got.dtype).eps
    tiny = torch.finfo(got.dtype).tiny * torch.finfo(got.dtype).eps  # the spacing of subnormal results
    bound = updates * (per_update * scale.double().abs() + tiny)
    diff = (got.double() - want.double()).abs()
    assert bool((diff <= bound).all()), f'{got.dtype}: difference {float(diff.max())} > bound {float(bound.max())}'


def magnitude(*tensors):
    """max(|t|) elementwise over tensors of one shape, in double."""
    return torch.stack([t.double().abs() for t in tensors]).amax(0)


def update(backend, ema, src, weight):
    (ema_update_ref if backend == 'ref' else ema_update_)(ema, src, weight)


def tensors(shapes, dtype, seed):
    return [random_tensor(s, dtype, seed * 1000 + i) for i, s in enumerate(shapes)]


@pytest.mark.parametrize('ema_dtype,src_dtype', PAIRS)
def test_closed_form(backend, ema_dtype, src_dtype):
    shapes = [(), (1,), (7,), (3, 5), (1000, 3), (4, 1, 2, 33)]
    ema, src = tensors(shapes, ema_dtype, 1), tensors(shapes, src_dtype, 2)
    expected = [e.double() + 0.3 * (s.double() - e.double()) for e, s in zip(ema, src)]
    update(backend, ema, src, 0.3)
    for e, x in zip(ema, expected):
        assert e.dtype == ema_dtype
        torch.testing.assert_close(e.double(), x, rtol=TOL[ema_dtype], atol=TOL[ema_dtype])


@pytest.mark.parametrize('dtype', [torch.int64, torch.int32, torch.uint8, torch.bool])
def test_integer_tensors_are_copied(backend, dtype):
    ema, src = tensors([(5,), (2, 3)], dtype, 1), tensors([(5,), (2, 3)], dtype, 2)
    update(backend, ema, src, 0.3)
    assert all(torch.equal(e, s) for e, s in zip(ema, src))


def test_weight_as_tensor_equals_weight_as_float(backend):
    a, b = tensors([(100,), (3,)], torch.float32, 1), tensors([(100,), (3,)], torch.float32, 2)
    a2 = [t.clone() for t in a]
    update(backend, a, b, 0.125)
    update(backend, a2, b, torch.tensor(0.125, dtype=torch.float64))
    assert all(torch.equal(x, y) for x, y in zip(a, a2))


def test_empty_lists(backend):
    update(backend, [], [], 0.5)


def shape_lists():
    shape = st.lists(st.integers(0, 70), min_size=0, max_size=3).map(tuple)
    return st.lists(st.tuples(shape, st.sampled_from(PAIRS + [(torch.int64, torch.int64)])), min_size=1,
                    max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(specs=shape_lists(), weight=st.floats(0.0, 1.0), seed=st.integers(0, 2**16))
def test_native_equals_reference(native, specs, weight, seed):
    """Random mixes of shapes (0-dim, empty, odd sizes) and dtype pairs: within the bound."""
    ema = [tensors([shape], e, seed + i)[0] for i, (shape, (e, _)) in enumerate(specs)]
    src = [tensors([shape], s, seed + 100 + i)[0] for i, (shape, (_, s)) in enumerate(specs)]
    expected = [t.clone() for t in ema]
    scale = [magnitude(e, s) for e, s in zip(ema, src)]
    ema_update_ref(expected, src, weight)
    ema_update_(ema, src, weight)
    for got, want, m in zip(ema, expected, scale):
        assert_within_fallback_bound(got, want, m)


def test_the_bound_is_tight_enough_to_catch_a_wrong_weight(native):
    """The bound is a few units in the last place: a kernel using another weight fails it."""
    ema, src = tensors([(1000,)], torch.float32, 1), tensors([(1000,)], torch.float32, 2)
    expected = [ema[0].clone()]
    ema_update_ref(expected, src, 0.3)
    ema_update_(ema, src, 0.3 * (1 + 1e-5))
    with pytest.raises(AssertionError, match='bound'):
        assert_within_fallback_bound(ema[0], expected[0], magnitude(ema[0], src[0]))


def test_thousands_of_tensors_and_large_ones(backend):
    """More tensors than one CUDA launch table holds, and tensors spanning many chunks."""
    shapes = [(i % 37 + 1,) for i in range(3000)] + [(300001,), (65536 * 3 + 5,)]
    ema, src = tensors(shapes, torch.float32, 1), tensors(shapes, torch.float32, 2)
    expected = [e.double() + 0.01 * (s.double() - e.double()) for e, s in zip(ema, src)]
    update(backend, ema, src, 0.01)
    torch.testing.assert_close(torch.cat([e.double() for e in ema]), torch.cat(expected), rtol=1e-6, atol=1e-6)


def test_channels_last_pairs(backend):
    ema, src = (t.to(memory_format=torch.channels_last) for t in tensors([(2, 3, 4, 5)] * 2, torch.float32, 1))
    expected = ema.double() + 0.5 * (src.double() - ema.double())
    update(backend, [ema], [src], 0.5)
    assert ema.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(ema.double(), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize('ema,src,message', [
    ([torch.zeros(2)], [], 'got 1'),
    ([torch.zeros(2)], [torch.zeros(3)], 'shapes'),
    ([torch.zeros(2, dtype=torch.long)], [torch.zeros(2)], 'dtypes'),
    ([torch.zeros(2)], [torch.zeros(2, device='meta')], 'share a device'),
    ([torch.zeros(2, device='meta')], [torch.zeros(2)], 'share a device'),
    ([torch.zeros(2, dtype=torch.complex64)], [torch.zeros(2, dtype=torch.complex64)], 'complex'),
])
def test_bad_input_is_the_same_value_error_on_every_backend(backend, ema, src, message):
    """Device mismatches included (a meta tensor beside a CPU one reaches the fake kernel, which
    checks like the twin): one error type, before any kernel runs."""
    with pytest.raises(ValueError, match=message):
        update(backend, ema, src, 0.5)


def test_a_weight_tensor_on_another_device_is_an_error():
    with pytest.raises(ValueError, match='weight tensor is on meta'):
        ema_update_([torch.zeros(2)], [torch.ones(2)], torch.tensor(0.5, device='meta'))


@pytest.mark.parametrize('make_pair', [
    lambda: (torch.zeros(4, 3), torch.arange(12.).view(3, 4).t()),      # a transposed source
    lambda: (torch.zeros(4, 6)[:, ::2], torch.arange(12.).view(4, 3)),  # a strided EMA
    lambda: (torch.zeros(2, 3, 4, 5).to(memory_format=torch.channels_last), torch.arange(120.).view(2, 3, 4, 5)),
], ids=['transposed', 'strided', 'channels_last'])
def test_any_layout_gives_the_closed_form(backend, make_pair):
    """The list op stages pairs that are not dense with equal strides through contiguous copies."""
    ema, src = make_pair()
    expected = 0.5 * src
    update(backend, [ema], [src], 0.5)
    assert torch.equal(ema, expected)


# ---- EMAPlan ------------------------------------------------------------------------------

@pytest.mark.parametrize('rule,momentum,gamma,interval', [
    ('ema', 0.1, 100.0, 1), ('ema', 0.3, 100.0, 3), ('anneal', 0.01, 4.0, 1), ('anneal', 0.2, 3.0, 2),
    ('swa', 0.0, 100.0, 1), ('swa', 0.0, 100.0, 2), ('power', 0.0, 6.94, 1), ('power', 0.0, 0.5, 2)])
def test_plan_follows_mmengine_update_parameters(backend, rule, momentum, gamma, interval):
    """The plan against MMEngine's update_parameters written out: copy on call 0, average on
    calls interval, 2*interval, ..., mirror every call, count every call."""
    shapes = [(3, 4), (), (17,)]
    ema, src = tensors(shapes, torch.float32, 1), tensors(shapes, torch.float32, 2)
    count_ema, count_src = [torch.zeros(1, dtype=torch.long)], [torch.zeros(1, dtype=torch.long)]
    mirror_ema, mirror_src = [torch.zeros(5)], [torch.zeros(5)]
    expected = [t.double() for t in ema]
    plan = EMAPlan(ema + count_ema, src + count_src, mirror_ema, mirror_src, rule=rule, momentum=momentum,
                   gamma=gamma, interval=interval, backend=backend)
    steps = torch.tensor(0)
    for call in range(7):
        for t in src + count_src + mirror_src:
            t.add_(1)
        if call == 0:
            expected = [s.double() for s in src]
        elif call % interval == 0:
            w = averaging_weight(rule, call, momentum, gamma, interval)
            expected = [x + w * (s.double() - x) for x, s in zip(expected, src)]
        plan.step(steps)
        assert int(steps) == call + 1
        for got, want in zip(ema, expected):
            torch.testing.assert_close(got.double(), want, rtol=1e-6, atol=1e-6)
        assert torch.equal(mirror_ema[0], mirror_src[0])
        last_averaged = call - call % interval
        assert int(count_ema[0]) == last_averaged + 1  # integers are copied on averaging calls


@pytest.mark.parametrize('rule', ['ema', 'anneal', 'swa', 'power'])
def test_plan_native_equals_reference(native, rule):
    shapes = [(33,), (), (8, 9), (5000,)]
    runs = {}
    for name in ('ref', 'native'):
        ema = tensors(shapes, torch.float32, 1) + tensors([(4,)], torch.float16, 3)
        src = tensors(shapes, torch.float32, 2) + tensors([(4,)], torch.float16, 4)
        plan = EMAPlan(ema, src, rule=rule, momentum=0.05, gamma=7.0, interval=2, backend=name)
        steps = torch.tensor(0)
        for _ in range(6):
            for s in src:
                s.mul_(0.9).add_(0.1)
            plan.step(steps)
        runs[name] = ema
    for got, want in zip(runs['native'], runs['ref']):
        assert_within_fallback_bound(got, want, magnitude(got, want) + 1, updates=6)


# Per dtype: how far MMEngine's lerp_ (which may fuse a multiply-add, and rounds differently for
# weights >= 0.5) and minimm's three separately rounded operations may drift apart after the
# calls of the test below, relative to values of order 1: a few units in the last place per call.
LERP_TOL = {torch.float64: 1e-14, torch.float32: 1e-6, torch.bfloat16: 0.05}


@pytest.mark.parametrize('dtype', list(LERP_TOL))
@pytest.mark.parametrize('rule,interval', [('ema', 1), ('anneal', 2), ('swa', 1)])
def test_plan_follows_mmengine_lerp_loop(backend, dtype, rule, interval):
    """The independent oracle: MMEngine's update_parameters as written there, a Python loop with
    copy_ on call 0 and lerp_ on every interval-th call, on copies of the same tensors."""
    shapes = [(3, 4), (), (257,)]
    ema, src = tensors(shapes, dtype, 1), tensors(shapes, dtype, 2)
    oracle = [t.clone() for t in ema]
    plan = EMAPlan(ema, src, rule=rule, momentum=0.1, gamma=3.0, interval=interval, backend=backend)
    steps = torch.tensor(0)
    for call in range(6):
        for t in src:
            t.mul_(0.5).add_(0.25)
        plan.step(steps)
        for o, s in zip(oracle, src):
            if call == 0:
                o.copy_(s)
            elif call % interval == 0:
                o.lerp_(s, averaging_weight(rule, call, 0.1, 3.0, interval))
    for got, want in zip(ema, oracle):
        torch.testing.assert_close(got, want, rtol=LERP_TOL[dtype], atol=LERP_TOL[dtype])


def test_plan_updates_a_tensor_listed_twice_once(backend):
    """Two names for one tied weight: one update, 0 -> 0.5 with momentum 0.5 (not 0.75)."""
    tied, src = torch.zeros(3), torch.ones(3)
    plan = EMAPlan([tied, tied.view(3)], [src, src], rule='ema', momentum=0.5, backend=backend)
    assert len(plan.ema) == 1
    steps = torch.tensor(1)
    plan.step(steps)
    assert tied.tolist() == [0.5, 0.5, 0.5]


def test_plan_rejects_mismatched_layouts_on_every_backend(backend):
    """A plan walks each pair as one dense block: other layouts are one ValueError everywhere, at
    construction and when refresh() finds a tensor re-pointed to another layout."""
    with pytest.raises(ValueError, match='not dense with equal strides'):
        EMAPlan([torch.zeros(4, 3)], [torch.zeros(3, 4).t()], backend=backend)
    src = torch.nn.Parameter(torch.zeros(4, 3))
    plan = EMAPlan([torch.zeros(4, 3)], [src], backend=backend)
    plan.step(torch.tensor(0))
    src.data = torch.zeros(3, 4).t()
    with pytest.raises(ValueError, match='not dense with equal strides'):
        plan.refresh()


def test_plan_step_checks_the_counter(backend):
    plan = EMAPlan([torch.zeros(2)], [torch.ones(2)], backend=backend)
    for steps, message in [(torch.tensor(0, device='meta'), 'on meta'), (torch.tensor(0.0), 'int64')]:
        with pytest.raises(ValueError, match=message):
            plan.step(steps)


def test_plan_follows_reassigned_data(backend):
    """`param.data = x` (what Module.to/half do) re-points a tensor; the plan follows it."""
    ema, src = [torch.zeros(4)], [torch.nn.Parameter(torch.ones(4))]
    plan = EMAPlan(ema, src, rule='ema', momentum=0.5, backend=backend)
    steps = torch.tensor(0)
    plan.step(steps)
    src[0].data = torch.full((4,), 3.0)
    assert plan.refresh() == (backend == 'native')  # the native table is rebuilt
    plan.step(steps)
    assert torch.equal(ema[0], torch.full((4,), 2.0))


def test_plan_checks_its_input():
    with pytest.raises(ValueError, match='unknown rule'):
        EMAPlan([], [], rule='decay')
    with pytest.raises(ValueError, match='interval'):
        EMAPlan([], [], interval=0)
    with pytest.raises(ValueError, match='gamma'):
        EMAPlan([], [], rule='anneal', gamma=0)
    with pytest.raises(ValueError, match='shapes'):
        EMAPlan([torch.zeros(2)], [torch.zeros(3)])
    with pytest.raises(ValueError, match='share a device'):
        EMAPlan([torch.zeros(2)], [torch.zeros(2, device='meta')])


def test_averaging_weight_closed_forms():
    assert [round(averaging_weight('anneal', s, 0.01, 4), 3) for s in (1, 2, 3)] == [0.8, 0.667, 0.571]
    assert averaging_weight('anneal', 10**6, 0.01, 4) == 0.01
    assert [averaging_weight('swa', s, interval=2) for s in (2, 4, 6)] == [1 / 2, 1 / 3, 1 / 4]
    assert averaging_weight('ema', 5, 0.25) == 0.25


# ---- edge cases: memory shared by destinations, re-pointing that keeps the storage ----------

def test_the_list_op_rejects_a_tensor_listed_twice_and_overlapping_views(backend):
    """Destinations sharing memory would race inside one launch: a ValueError on every backend."""
    w = torch.zeros(4, 4)
    for ema in ([w, w], [w[0], w], [w[:, :2], w[1]]):
        with pytest.raises(ValueError, match='share memory'):
            update(backend, ema, [torch.ones_like(t) for t in ema], 0.5)
    update(backend, [w[:2], w[2:]], [torch.ones(2, 4)] * 2, 0.5)  # disjoint views are fine
    assert torch.equal(w, torch.full((4, 4), 0.5))


def test_a_plan_rejects_overlapping_views_and_keeps_one_of_two_names(backend):
    w = torch.zeros(4, 4)
    with pytest.raises(ValueError, match='share memory'):
        EMAPlan([w[0], w], [torch.ones(4), torch.ones(4, 4)], backend=backend)
    with pytest.raises(ValueError, match='share memory'):  # an averaged tensor mirrored too
        EMAPlan([w], [torch.ones(4, 4)], [w[1]], [torch.ones(4)], backend=backend)
    plan = EMAPlan([w, w.view(4, 4)], [torch.ones(4, 4)] * 2, momentum=0.5, backend=backend)
    assert len(plan.ema) == 1


@pytest.mark.parametrize('repoint,message', [
    (lambda p: p.t(), 'not dense with equal strides'),   # same storage, offset and numel; strides differ
    (lambda p: p.view(torch.int32), 'dtypes'),           # same storage, offset and numel; dtype differs
])
def test_the_native_plan_sees_a_repointing_that_keeps_the_storage(native, repoint, message):
    """The C++ staleness key includes dtype and strides: a view of the same memory is seen by the
    native class's own refresh(), checked, and refused when the pair no longer fits (with a key of
    storage, offset and numel it went unseen and was averaged as the old layout)."""
    src = torch.arange(9.0).view(3, 3)
    plan = torch.classes.minimm.EMAPlan([torch.zeros(3, 3)], [src], [], [], [1], [0.5], [1.0], [1])
    plan.step(torch.tensor(0))
    assert not plan.refresh()
    src.data = repoint(src.data)
    with pytest.raises(ValueError, match=message):
        plan.refresh()


def test_a_native_step_keeps_its_table_until_refresh(native):
    """The step does no per-tensor work: after `src.data = x` it still reads the old memory (which
    the plan keeps alive); refresh() finds the move and rebuilds, and finds nothing the next time."""
    src = torch.nn.Parameter(torch.ones(4))
    ema = torch.zeros(4)
    plan = EMAPlan([ema], [src], momentum=0.5, backend='native')
    steps = torch.tensor(1)
    plan.step(steps)
    src.data = torch.full((4,), 3.0)
    plan.step(steps)
    assert ema.tolist() == [0.75] * 4  # averaged from the old ones
    assert plan.refresh() and not plan.refresh()
    plan.step(steps)
    assert ema.tolist() == [1.875] * 4 and int(steps) == 4
