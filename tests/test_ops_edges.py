"""Edge cases of the ops that both backends refuse or handle alike: memory written by one pair
and read by another, scaling a dtype unpack_ cannot scale, a PackPlan changing its scale."""
import pytest
import torch

from minimm.ops import EMAPlan, PackPlan, ema_update_, ema_update_ref, pack_ref, unpack_, unpack_ref

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py


def update(backend, ema, src, weight):
    (ema_update_ref if backend == 'ref' else ema_update_)(ema, src, weight)


def test_a_destination_overlapping_another_pairs_source_is_refused(backend):
    w, other = torch.arange(10.0), torch.zeros(5)
    with pytest.raises(ValueError, match='destination 0 shares memory with source 1'):
        update(backend, [w[:5], other], [torch.ones(5), w[3:8]], 0.5)
    with pytest.raises(ValueError, match='destination 1 shares memory with source 0'):
        update(backend, [other, w[:5]], [w[4:9], torch.ones(5)], 0.5)
    with pytest.raises(ValueError, match='destination 0 shares memory with source 0'):  # its own, shifted
        update(backend, [w[:5]], [w[1:6]], 0.5)
    assert torch.equal(w, torch.arange(10.0))  # refused before anything ran


def test_a_pair_whose_source_is_its_destination_is_allowed(backend):
    w = torch.arange(4.0)
    update(backend, [w], [w], 0.5)
    assert torch.equal(w, torch.arange(4.0))


def test_a_plan_refuses_a_mirror_writing_an_averaged_source(backend):
    src = torch.ones(4)
    with pytest.raises(ValueError, match='destination 1 shares memory with source 0'):
        EMAPlan([torch.zeros(4)], [src], [src], [torch.zeros(4)], backend=backend)


@pytest.mark.parametrize('dtype', [torch.uint16, torch.uint32, torch.uint64, torch.float8_e4m3fn])
def test_unpack_refuses_to_scale_what_the_kernels_cannot_and_copies_it(backend, dtype):
    tensors = [torch.ones(3).to(dtype)]
    flats = pack_ref(tensors)
    run = unpack_ref if backend == 'ref' else unpack_
    with pytest.raises(ValueError, match='tensors cannot be scaled; only uint8, int8, int16, int32, int64, float16'):
        run(flats, tensors, 0.5)
    run(flats, tensors, 1.0)
    assert torch.equal(tensors[0].view(torch.uint8), flats[0][:3].view(torch.uint8))


def test_a_plan_unpacks_with_any_scale_and_exact_integers_at_scale_one(backend):
    big = torch.tensor([2 ** 60 + 1, -3], dtype=torch.int64)  # not a double: scale 1 must copy bytes
    values = torch.tensor([1.0, -6.0, 10.0])
    plan = PackPlan([values, big], backend=backend)
    plan.pack()
    for scale, want in ((0.5, [0.5, -3.0, 5.0]), (0.25, [0.25, -1.5, 2.5]), (1.0, [1.0, -6.0, 10.0])):
        plan.unpack_(scale)
        assert values.tolist() == want
    assert big.tolist() == [2 ** 60 + 1, -3]
    plan.unpack_(0.5)
    assert big.tolist() == [2 ** 59, -2]  # 2 ** 60 + 1 is 2 ** 60 as a double; -1.5 to even
