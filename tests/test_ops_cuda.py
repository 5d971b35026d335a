"""The CUDA kernels: native == reference, no host synchronisation in a plan step, CUDA graphs.

Skipped without a GPU with native CUDA kernels; tests/gpu_check.sh runs them on a GPU machine."""
import pytest
import torch

from minimm.ops import EMAPlan, PackPlan, backend_info, ema_update_, ema_update_ref, pack, pack_ref, unpack_, \
    unpack_ref

if not torch.cuda.is_available():
    pytest.skip('no CUDA device', allow_module_level=True)
if backend_info()['cuda']['backend'] != 'native':
    pytest.skip(f"no native CUDA kernels: {backend_info()['cuda']['reason']}", allow_module_level=True)

CUDA = torch.device('cuda')
PAIRS = [(torch.float32, torch.float32), (torch.float64, torch.float64), (torch.float16, torch.float16),
         (torch.bfloat16, torch.bfloat16), (torch.float32, torch.float16), (torch.float32, torch.bfloat16),
         (torch.float16, torch.float32), (torch.int64, torch.int64), (torch.uint8, torch.uint8)]


def make(shape, dtype, seed):
    g = torch.Generator(device=CUDA).manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g, device=CUDA, dtype=torch.float32).to(dtype)
    return torch.randint(0, 100, shape, generator=g, device=CUDA).to(dtype)


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
