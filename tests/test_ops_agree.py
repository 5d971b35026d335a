"""Property-based: the native ops and their PyTorch twins on random shapes, dtypes and strides
either agree bit for bit or raise the same error type.

Each example builds the same tensors twice (same seeds, same layouts: contiguous, transposed,
every other element, channels_last, expanded with stride 0), runs the native op on one set and
the twin on the other, and compares outcomes. Mismatched shapes and dtypes are drawn too, so the
error paths are compared as well as the results.
"""
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minimm.ops import EMAPlan, ema_update_, ema_update_ref, pack, pack_ref, unpack_, unpack_ref
from toy import random_tensor

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.uint8]
LAYOUTS = ['contiguous', 'transposed', 'strided', 'channels_last', 'expanded']
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def with_layout(values, layout):
    """``values`` (contiguous) in ``layout``; layouts that do not apply to the shape leave it."""
    shape = values.shape
    if layout == 'transposed' and values.dim() >= 2:
        return values.transpose(0, 1).contiguous().transpose(0, 1)
    if layout == 'strided' and values.dim() >= 1:
        wide = values.new_zeros(*shape[:-1], 2 * shape[-1])
        wide[..., ::2] = values
        return wide[..., ::2]
    if layout == 'channels_last' and values.dim() == 4:
        return values.to(memory_format=torch.channels_last)
    if layout == 'expanded' and values.dim() >= 1 and shape[-1] > 1:
        return values[..., :1].expand(shape)
    return values


def tensor_spec():
    shape = st.lists(st.integers(0, 5), min_size=0, max_size=4).map(tuple)
    return st.tuples(shape, st.sampled_from(DTYPES), st.sampled_from(LAYOUTS))


def build(spec, seed):
    shape, dtype, layout = spec
    return with_layout(random_tensor(shape, dtype, seed), layout)


def outcome(fn):
    """(result, None) or (None, the exception's type)."""
    try:
        return fn(), None
    except Exception as error:  # the type is what is compared
        return None, type(error)


def assert_same_outcome(native_run, ref_run):
    (got, native_error), (want, ref_error) = outcome(native_run), outcome(ref_run)
    assert native_error == ref_error
    if native_error is None:
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and a.stride() == b.stride()
            torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)


def pairs():
    """(ema spec, src spec) pairs: mostly of one shape, sometimes another shape or dtype."""
    same_shape = tensor_spec().flatmap(lambda e: st.tuples(
        st.just(e), st.tuples(st.just(e[0]), st.sampled_from([e[1]] * 3 + DTYPES), st.sampled_from(LAYOUTS))))
    return st.lists(st.one_of(same_shape, st.tuples(tensor_spec(), tensor_spec())), min_size=1, max_size=5)


@SETTINGS
@given(specs=pairs(), weight=st.floats(0.0, 1.0), seed=st.integers(0, 2**16))
def test_ema_update(native, specs, weight, seed):
    def run(op):
        ema = [build(e, seed + i) for i, (e, _) in enumerate(specs)]
        src = [build(s, seed + 100 + i) for i, (_, s) in enumerate(specs)]
        op(ema, src, weight)
        return ema

    assert_same_outcome(lambda: run(ema_update_), lambda: run(ema_update_ref))


@SETTINGS
@given(specs=pairs(), seed=st.integers(0, 2**16))
def test_ema_plan_step(native, specs, seed):
    def run(backend):
        ema = [build(e, seed + i) for i, (e, _) in enumerate(specs)]
        src = [build(s, seed + 100 + i) for i, (_, s) in enumerate(specs)]
        plan = EMAPlan(ema, src, rule='ema', momentum=0.25, backend=backend)
        plan.step(torch.tensor(1))  # an averaging call
        return ema

    assert_same_outcome(lambda: run('native'), lambda: run('ref'))


@SETTINGS
@given(specs=st.lists(tensor_spec(), min_size=1, max_size=6), scale=st.sampled_from([1.0, 0.5, 1 / 3]),
       seed=st.integers(0, 2**16))
def test_pack_and_unpack(native, specs, scale, seed):
    def run(pack_op, unpack_op):
        tensors = [build(spec, seed + i) for i, spec in enumerate(specs)]
        flats = pack_op(tensors)
        targets = [build(spec, seed + 100 + i) for i, spec in enumerate(specs)]
        unpack_op(flats, targets, scale)
        return flats + targets

    assert_same_outcome(lambda: run(pack, unpack_), lambda: run(pack_ref, unpack_ref))
