"""pack / unpack_ / PackPlan: the padded layout, the fused scale against closed forms, integer
rounding, tied tensors, any layout, native == reference."""
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minimm.ops import PackPlan, pack, pack_ref, unpack_, unpack_ref
from minimm.ops.pack import layout
from toy import random_tensor as make

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.uint8]


def run_pack(backend, tensors):
    return pack_ref(tensors) if backend == 'ref' else pack(tensors)


def run_unpack(backend, flats, tensors, scale):
    (unpack_ref if backend == 'ref' else unpack_)(flats, tensors, scale)


def test_layout_is_one_flat_tensor_per_dtype_in_first_seen_order(backend):
    """Each tensor starts at a multiple of 16 bytes (4 floats, 2 int64), the padding is zero."""
    a, b, c, d = torch.arange(3.) + 1, torch.arange(2) + 1, torch.arange(4.).view(2, 2) + 1, torch.tensor(7)
    flats = run_pack(backend, [a, b, c, d])
    assert [f.dtype for f in flats] == [torch.float32, torch.int64]
    assert flats[0].tolist() == [1, 2, 3, 0, 1, 2, 3, 4]
    assert flats[1].tolist() == [1, 2, 7]
    halves = run_pack(backend, [torch.ones(3, dtype=torch.half), torch.ones(1, dtype=torch.half)])[0]
    assert halves.tolist() == [1, 1, 1, 0, 0, 0, 0, 0, 1]


def test_every_slice_is_16_byte_aligned():
    tensors = [torch.ones(n, dtype=dtype) for n, dtype in [(1, torch.uint8), (3, torch.float16), (5, torch.uint8),
                                                             (0, torch.uint8), (7, torch.uint8)]]
    starts, total = layout([t for t in tensors if t.dtype == torch.uint8])
    assert starts == [0, 16, 32, 32] and total == 39
    assert layout([tensors[1]]) == ([0], 3)


def test_unpack_scales_floats_and_rounds_integers(backend):
    """The 'mean' after a SUM all-reduce of 2 ranks: floats halved, integers rounded to nearest
    (ties to even) instead of MMEngine's truncation (1 + 4 -> 2)."""
    mean, count = torch.zeros(3), torch.zeros(4, dtype=torch.long)
    summed = [torch.tensor([1., 3., -5.]), torch.tensor([5, 7, 3, -3])]
    run_unpack(backend, summed, [mean, count], 0.5)
    assert mean.tolist() == [0.5, 1.5, -2.5]
    assert count.tolist() == [2, 4, 2, -2]


def test_unpack_refuses_to_scale_bool(backend):
    flag = torch.zeros(2, dtype=torch.bool)
    run_unpack(backend, [torch.ones(2, dtype=torch.bool)], [flag], 1.0)
    assert flag.all()
    with pytest.raises(ValueError, match='bool'):
        run_unpack(backend, [torch.ones(2, dtype=torch.bool)], [flag], 0.5)


def test_unpack_checks_the_flat_tensors(backend):
    with pytest.raises(ValueError, match='flat'):
        run_unpack(backend, [torch.zeros(3)], [torch.zeros(2)], 1.0)
    with pytest.raises(ValueError, match='flat'):
        run_unpack(backend, [torch.zeros(2), torch.zeros(1)], [torch.zeros(2)], 1.0)


def test_empty_list(backend):
    assert run_pack(backend, []) == []
    run_unpack(backend, [], [], 0.5)


def specs_strategy():
    return st.lists(st.tuples(st.lists(st.integers(0, 40), max_size=3).map(tuple), st.sampled_from(DTYPES)),
                    min_size=1, max_size=15)


def assert_scaled(got, tensor, scale):
    """The closed form: floats are ``tensor * scale`` rounded once to their dtype (the scale is
    applied in float, or double for double: a few float roundings more, far below the dtype's
    own); integers are within 0.5 of it (rounded to nearest)."""
    exact = tensor.double() * scale
    if tensor.is_floating_point():
        info = torch.finfo(tensor.dtype)
        torch.testing.assert_close(got.double(), exact, rtol=info.eps, atol=info.tiny)
    else:
        assert torch.all((got.double() - exact).abs() <= 0.5)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(specs=specs_strategy(), scale=st.sampled_from([1.0, 0.5, 0.25, 1 / 3]), seed=st.integers(0, 2**16))
def test_round_trip_gives_the_closed_form(backend, specs, scale, seed):
    """Random mixes of shapes (0-dim, empty) and dtypes: pack + unpack_ restores the tensors
    exactly, or scaled as the closed form says."""
    tensors = [make(shape, dtype, seed + i) for i, (shape, dtype) in enumerate(specs)]
    flats = run_pack(backend, tensors)
    got = [torch.empty_like(t) for t in tensors]
    run_unpack(backend, flats, got, scale)
    for g, t in zip(got, tensors):
        if scale == 1.0:
            assert torch.equal(g, t)
        else:
            assert_scaled(g, t, scale)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(specs=specs_strategy(), scale=st.sampled_from([1.0, 0.5, 1 / 3]), seed=st.integers(0, 2**16))
def test_native_equals_reference(native, specs, scale, seed):
    tensors = [make(shape, dtype, seed + i) for i, (shape, dtype) in enumerate(specs)]
    flats, expected = pack(tensors), pack_ref(tensors)
    assert all(f.dtype == e.dtype and torch.equal(f, e) for f, e in zip(flats, expected))
    got, want = [torch.empty_like(t) for t in tensors], [torch.empty_like(t) for t in tensors]
    unpack_(flats, got, scale)
    unpack_ref(expected, want, scale)
    assert all(torch.equal(g, w) for g, w in zip(got, want))


def test_any_layout_round_trips(backend):
    """Transposed and channels_last tensors pack in row-major order and unpack in place."""
    t = torch.arange(12.).view(3, 4).t()
    c = torch.arange(120.).view(2, 3, 4, 5).to(memory_format=torch.channels_last)
    flats = run_pack(backend, [t, c])
    assert torch.equal(flats[0], torch.cat([t.reshape(-1), c.reshape(-1)]))
    targets = [torch.zeros(3, 4).t(), torch.zeros(2, 3, 4, 5).to(memory_format=torch.channels_last)]
    run_unpack(backend, flats, targets, 0.5)
    assert torch.equal(targets[0], t * 0.5) and torch.equal(targets[1], c * 0.5)
    assert targets[1].is_contiguous(memory_format=torch.channels_last)


def test_plan_packs_a_tensor_listed_twice_once(backend):
    tied = torch.arange(3.)
    plan = PackPlan([tied, torch.arange(2), tied], backend=backend)
    assert len(plan.tensors) == 2 and plan.pack()[0].tolist() == [0, 1, 2]


def test_plan_round_trip_and_reuse(backend):
    tensors = [make((i % 9 + 1,), DTYPES[i % 3], i) for i in range(2500)]
    plan = PackPlan(tensors, backend=backend)
    originals = [t.clone() for t in tensors]
    flats = plan.pack()
    assert flats is plan.flats
    assert all(torch.equal(f, e) for f, e in zip(flats, pack_ref(tensors)))
    for f in flats:
        f.mul_(2)
    plan.unpack_(0.5)
    assert all(torch.equal(t, o) for t, o in zip(tensors, originals))
    tensors[0].fill_(42)  # a second pack sees the new values
    assert plan.pack()[0][0] == 42
    tensors[1].data = torch.full_like(tensors[1], 7)  # and follows a re-pointed tensor
    plan.pack()
    plan.unpack_(2.0)
    assert torch.all(tensors[1] == 14)


def test_plan_follows_a_repointed_flat_buffer(backend):
    """The flat buffers are checked once per call (not per row): re-pointing one is still seen."""
    tensors = [torch.arange(3.0), torch.arange(2), torch.arange(4.0) + 10]
    plan = PackPlan(tensors, backend=backend)
    plan.pack()
    plan.flats[0].data = torch.full((8,), 2.0)  # a fresh float buffer in place of the packed one
    plan.unpack_(1.5)
    assert torch.equal(tensors[0], torch.full((3,), 3.0)) and torch.equal(tensors[2], torch.full((4,), 3.0))
    assert torch.equal(tensors[1], torch.tensor([0, 2]))  # 1.5 * [0, 1] rounded to nearest, ties to even


def test_plan_rejects_non_contiguous(backend):
    with pytest.raises(ValueError, match='contiguous'):
        PackPlan([torch.zeros(3, 4).t()], backend=backend)
