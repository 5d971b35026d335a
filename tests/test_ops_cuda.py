"""The CUDA kernels: native == reference, no host synchronisation in a plan step, CUDA graphs,
opcheck, layouts, tied tensors and device mismatches.

Skipped without a GPU with native CUDA kernels; tests/gpu_check.sh runs them on a GPU machine."""
import pytest
import torch
from torch.library import opcheck

from minimm.ops import EMAPlan, PackPlan, backend_info, ema_update_, ema_update_ref, pack, pack_ref, unpack_, \
    unpack_ref
from test_ops_schema import opcheck_cases
from toy import random_tensor

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py

if not torch.cuda.is_available():
    pytest.skip('no CUDA device', allow_module_level=True)
if backend_info()['cuda']['backend'] != 'native':
    pytest.skip(f"no native CUDA kernels: {backend_info()['cuda']['reason']}", allow_module_level=True)

CUDA = torch.device('cuda')
PAIRS = [(torch.float32, torch.float32), (torch.float64, torch.float64), (torch.float16, torch.float16),
         (torch.bfloat16, torch.bfloat16), (torch.float32, torch.float16), (torch.float32, torch.bfloat16),
         (torch.float16, torch.float32), (torch.int64, torch.int64), (torch.uint8, torch.uint8)]


def make(shape, dtype, seed):
    return random_tensor(shape, dtype, seed, CUDA)


def random_lists(seed, count):
    g = torch.Generator().manual_seed(seed)
    sizes = [int(x) for x in torch.randint(0, 3000, (count,), generator=g)] + [0, 1, 65536 * 2 + 3, 1_000_003]
    pairs = [PAIRS[int(i)] for i in torch.randint(0, len(PAIRS), (len(sizes),), generator=g)]
    ema = [make((n,), e, seed + i) for i, (n, (e, _)) in enumerate(zip(sizes, pairs))]
    src = [make((n,), s, seed + 5000 + i) for i, (n, (_, s)) in enumerate(zip(sizes, pairs))]
    return ema + [make((), torch.float32, 1)], src + [make((), torch.float32, 2)]


@pytest.mark.parametrize('seed,count', [(0, 5), (1, 100), (2, 3000)])
@pytest.mark.parametrize('weight', [0.0002, 0.7, 'tensor'])
def test_ema_update_equals_reference(seed, count, weight):
    ema, src = random_lists(seed, count)
    expected = [t.clone() for t in ema]
    w = torch.tensor(0.3, device=CUDA) if weight == 'tensor' else weight
    ema_update_ref(expected, src, w)
    ema_update_(ema, src, w)
    assert all(torch.equal(a, b) for a, b in zip(ema, expected))


@pytest.mark.parametrize('rule', ['ema', 'anneal', 'swa'])
def test_plan_equals_reference_without_host_sync(rule):
    runs = {}
    for backend in ('ref', 'native'):
        ema, src = random_lists(3, 200)
        mirror_ema, mirror_src = [make((7,), torch.float32, 9)], [make((7,), torch.float32, 10)]
        plan = EMAPlan(ema, src, mirror_ema, mirror_src, rule=rule, momentum=0.01, gamma=4.0, interval=2,
                       backend=backend)
        steps = torch.zeros((), dtype=torch.long, device=CUDA)
        for _ in range(5):
            for s in src:
                s.add_(1)
            if backend == 'native':
                torch.cuda.set_sync_debug_mode('error')
            try:
                plan.step(steps)
            finally:
                torch.cuda.set_sync_debug_mode('default')
        runs[backend] = (ema, int(steps))
    assert runs['ref'][1] == runs['native'][1] == 5
    assert all(torch.equal(a, b) for a, b in zip(runs['ref'][0], runs['native'][0]))


def test_plan_step_replays_in_a_cuda_graph():
    ema, src = random_lists(4, 50)
    ref_ema = [t.clone() for t in ema]
    plan = EMAPlan(ema, src, rule='anneal', momentum=0.01, gamma=4.0)
    ref_plan = EMAPlan(ref_ema, src, rule='anneal', momentum=0.01, gamma=4.0, backend='ref')
    steps, ref_steps = (torch.zeros((), dtype=torch.long, device=CUDA) for _ in range(2))
    plan.step(steps)  # warm up outside the graph (builds the launch tables)
    ref_plan.step(ref_steps)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # captures on a side stream, the current one inside the block
        plan.step(steps)
    for _ in range(4):
        graph.replay()  # each replay reads the counter, anneals the weight and increments
    for _ in range(4):
        ref_plan.step(ref_steps)
    torch.cuda.synchronize()
    assert int(steps) == int(ref_steps) == 5
    assert all(torch.equal(a, b) for a, b in zip(ema, ref_ema))


@pytest.mark.parametrize('scale', [1.0, 0.5, 1 / 3])
def test_pack_and_unpack_equal_reference(scale):
    tensors = [make((n,), dtype, i) for i, (n, dtype) in enumerate(
        [(5, torch.float32), (0, torch.float32), (3, torch.int64), (70000, torch.float16), (1, torch.bfloat16),
         (9, torch.float64), (4, torch.int32), (1000, torch.float32)] * 40)]
    flats, expected = pack(tensors), pack_ref(tensors)
    assert all(torch.equal(a, b) for a, b in zip(flats, expected))
    got, want = [torch.empty_like(t) for t in tensors], [torch.empty_like(t) for t in tensors]
    unpack_(flats, got, scale)
    unpack_ref(expected, want, scale)
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    plan = PackPlan(tensors)
    assert all(torch.equal(a, b) for a, b in zip(plan.pack(), expected))
    plan.unpack_(scale)
    assert all(torch.equal(a, b) for a, b in zip(tensors, want))


def test_opcheck_the_list_ops_on_cuda():
    for op, args in opcheck_cases('cuda'):
        assert set(opcheck(op, args).values()) == {'SUCCESS'}, op


def test_pack_slices_are_16_byte_aligned_and_padding_is_zero():
    tensors = [make((n,), torch.float16, n) for n in (3, 1, 9, 8)]
    (flat,) = pack(tensors)
    assert flat.data_ptr() % 16 == 0 and flat.numel() == 8 + 8 + 16 + 8
    assert torch.equal(flat[3:8].cpu(), torch.zeros(5, dtype=torch.float16))
    assert torch.equal(flat, pack_ref(tensors)[0])


def test_any_layout_and_tied_tensors():
    ema = torch.zeros(4, 6, device=CUDA)[:, ::2]
    src = torch.arange(12.0, device=CUDA).view(3, 4).t()
    ema_update_([ema], [src], 0.5)
    assert torch.equal(ema, src * 0.5)
    tied = torch.zeros(3, device=CUDA)
    plan = EMAPlan([tied, tied], [torch.ones(3, device=CUDA)] * 2, rule='ema', momentum=0.5)
    plan.step(torch.ones((), dtype=torch.long, device=CUDA))
    assert tied.tolist() == [0.5] * 3
    targets = [torch.zeros(3, 4, device=CUDA).t()]
    unpack_(pack([src]), targets, 0.5)
    assert torch.equal(targets[0], src * 0.5)


def test_device_mismatches_are_value_errors_before_any_kernel():
    with pytest.raises(ValueError, match='weight tensor is on cuda'):
        ema_update_([torch.zeros(2)], [torch.ones(2)], torch.tensor(0.5, device=CUDA))
    with pytest.raises(ValueError, match='share a device'):
        ema_update_([torch.zeros(2, device=CUDA)], [torch.ones(2)], 0.5)
    with pytest.raises(ValueError, match='share a device'):
        torch.ops.minimm.ema_update_([torch.zeros(2)], [torch.ones(2, device=CUDA)], None, 0.5)
    plan = EMAPlan([torch.zeros(2, device=CUDA)], [torch.ones(2, device=CUDA)])
    with pytest.raises(ValueError, match='int64 tensor on cuda'):
        plan.step(torch.tensor(0))


def test_a_replayed_graph_after_a_moved_tensor_fails_loudly_at_the_next_step():
    src = torch.nn.Parameter(torch.ones(4, device=CUDA))
    ema = torch.zeros(4, device=CUDA)
    plan = EMAPlan([ema], [src], rule='ema', momentum=0.5)
    steps = torch.ones((), dtype=torch.long, device=CUDA)
    plan.step(steps)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plan.step(steps)
    graph.replay()
    src.data = torch.full((4,), 3.0, device=CUDA)
    with pytest.raises(RuntimeError, match='capture the graph again'):
        plan.step(steps)
    plan.step(steps)  # said once: the plan follows the new tensor from here
    torch.cuda.synchronize()
    assert int(steps) == 4 and torch.equal(ema, torch.full((4,), 1.875, device=CUDA))  # 0.5, 0.75, 1.875
