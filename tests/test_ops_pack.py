"""pack / unpack_ / PackPlan: layout, the fused scale, integer rounding, native == reference."""
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minimm.ops import PackPlan, pack, pack_ref, unpack_, unpack_ref

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.uint8]


def make(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
    return torch.randint(0, 200, shape, generator=g).to(dtype)


def run_pack(backend, tensors):
    return pack_ref(tensors) if backend == 'ref' else pack(tensors)


def run_unpack(backend, flats, tensors, scale):
    (unpack_ref if backend == 'ref' else unpack_)(flats, tensors, scale)


def test_layout_is_one_flat_tensor_per_dtype_in_first_seen_order(backend):
    a, b, c, d = torch.arange(3.), torch.arange(2), torch.arange(4.).view(2, 2), torch.tensor(7)
    flats = run_pack(backend, [a, b, c, d])
    assert [f.dtype for f in flats] == [torch.float32, torch.int64]
    assert flats[0].tolist() == [0, 1, 2, 0, 1, 2, 3]
    assert flats[1].tolist() == [0, 1, 7]


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
    with pytest.raises((ValueError, RuntimeError), match='bool'):
        run_unpack(backend, [torch.ones(2, dtype=torch.bool)], [flag], 0.5)


def test_unpack_checks_the_flat_tensors(backend):
    with pytest.raises((ValueError, RuntimeError), match='flat'):
        run_unpack(backend, [torch.zeros(3)], [torch.zeros(2)], 1.0)
    with pytest.raises((ValueError, RuntimeError), match='flat'):
        run_unpack(backend, [torch.zeros(2), torch.zeros(1)], [torch.zeros(2)], 1.0)


def test_empty_list(backend):
    assert run_pack(backend, []) == []
    run_unpack(backend, [], [], 0.5)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(specs=st.lists(st.tuples(st.lists(st.integers(0, 40), max_size=3).map(tuple), st.sampled_from(DTYPES)),
                      min_size=1, max_size=15),
       scale=st.sampled_from([1.0, 0.5, 0.25, 1 / 3]), seed=st.integers(0, 2**16))
def test_round_trip_and_native_equals_reference(backend, specs, scale, seed):
    """Random mixes of shapes (0-dim, empty) and dtypes: pack + unpack_ restores the tensors, scaled
    as the closed form says; the native kernels equal the twins bit for bit."""
    tensors = [make(shape, dtype, seed + i) for i, (shape, dtype) in enumerate(specs)]
    flats = run_pack(backend, tensors)
    got = [torch.empty_like(t) for t in tensors]
    run_unpack(backend, flats, got, scale)
    for g, t in zip(got, tensors):
        if scale == 1.0:
            assert torch.equal(g, t)
        elif t.is_floating_point():
            torch.testing.assert_close(g.double(), t.double() * scale, rtol=1e-2, atol=1e-3)
        else:
            assert torch.all((g.double() - t.double() * scale).abs() <= 0.5)
    if backend == 'native':
        expected = pack_ref(tensors)
        assert all(f.dtype == e.dtype and torch.equal(f, e) for f, e in zip(flats, expected))
        want = [torch.empty_like(t) for t in tensors]
        unpack_ref(expected, want, scale)
        assert all(torch.equal(g, w) for g, w in zip(got, want))


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
    plan.flats[0].data = torch.full((7,), 2.0)  # a fresh float buffer in place of the packed one
    plan.unpack_(1.5)
    assert torch.equal(tensors[0], torch.full((3,), 3.0)) and torch.equal(tensors[2], torch.full((4,), 3.0))
    assert torch.equal(tensors[1], torch.tensor([0, 2]))  # 1.5 * [0, 1] rounded to nearest, ties to even


def test_plan_rejects_non_contiguous():
    with pytest.raises(ValueError, match='contiguous'):
        PackPlan([torch.zeros(3, 4).t()])
