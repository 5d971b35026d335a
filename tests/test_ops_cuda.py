"""The CUDA kernels: native within the stated bound of the fallback, no host synchronisation in a
plan step, one launch per step, CUDA graphs, side streams, misaligned views, opcheck, layouts,
tied tensors and device mismatches.

Skipped without a GPU with native CUDA kernels; tests/gpu_check.sh runs them on a GPU machine."""
import pytest
import torch
from torch.library import opcheck

from minimm.ops import EMAPlan, PackPlan, backend_info, ema_update_, ema_update_ref, pack, pack_ref, unpack_, \
    unpack_ref
from test_ops_ema import assert_within_fallback_bound, magnitude
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
    scales = [magnitude(e, s) for e, s in zip(ema, src)]
    w = torch.tensor(0.3, device=CUDA) if weight == 'tensor' else weight
    ema_update_ref(expected, src, w)
    ema_update_(ema, src, w)
    for got, want, scale in zip(ema, expected, scales):
        assert_within_fallback_bound(got, want, scale)


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
    for got, want in zip(runs['native'][0], runs['ref'][0]):
        assert_within_fallback_bound(got, want, magnitude(got, want) + 5, updates=5)


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
    for got, want in zip(ema, ref_ema):
        assert_within_fallback_bound(got, want, magnitude(got, want) + 1, updates=5)


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
    plan = EMAPlan([tied, tied.view(3)], [torch.ones(3, device=CUDA)] * 2, rule='ema', momentum=0.5)
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


def captured_plan(src):
    """A plan averaging `src` into zeros with momentum 0.5, one eager step done (steps 1 -> 2),
    then one step captured in the returned graph."""
    ema = torch.zeros_like(src)
    plan = EMAPlan([ema], [src], rule='ema', momentum=0.5)
    steps = torch.ones((), dtype=torch.long, device=CUDA)
    plan.step(steps)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plan.step(steps)
    return plan, ema, steps, graph


def test_a_refresh_after_a_capture_warns_and_the_graph_keeps_its_memory():
    """A re-pointed tensor: refresh() rebuilds and warns that the graph must be captured again
    (not an error, and only for a rebuild after a capture); the old graph keeps writing the memory
    it captured, which the graph itself keeps alive; eager steps follow the new tensor."""
    src = torch.nn.Parameter(torch.ones(4, device=CUDA))
    plan, ema, steps, graph = captured_plan(src)
    with torch.cuda.graph(torch.cuda.CUDAGraph()):  # a second capture of the same table
        plan.step(steps)
    graph.replay()
    src.data = torch.full((4,), 3.0, device=CUDA)
    with pytest.warns(UserWarning, match='capture it again'):
        assert plan.refresh()
    plan.step(steps)
    torch.cuda.synchronize()
    assert int(steps) == 4 and torch.equal(ema, torch.full((4,), 1.875, device=CUDA))  # 0.5, 0.75, 1.875
    assert not plan.refresh()  # nothing moved: no rebuild, no warning


def test_a_captured_counter_stays_alive():
    """The counter's memory is kept by the plan once a step was captured: a replay after the
    caller dropped it never writes into a tensor allocated later."""
    plan, ema, steps, graph = captured_plan(torch.ones(4, device=CUDA))
    del steps
    later = [torch.zeros((), dtype=torch.long, device=CUDA) for _ in range(8)]
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    assert all(int(t) == 0 for t in later)


FLOAT_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def misaligned(n, dtype, offset, seed):
    """n values starting `offset` elements into a fresh allocation: not 16-byte aligned."""
    base = torch.zeros(n + offset, dtype=dtype, device=CUDA)
    view = base[offset:]
    view.copy_(make((n,), dtype, seed))
    return view


@pytest.mark.parametrize('ema_dtype', FLOAT_DTYPES + [torch.int64, torch.uint8])
@pytest.mark.parametrize('src_dtype', FLOAT_DTYPES)
def test_misaligned_views_of_every_dtype(ema_dtype, src_dtype):
    """`torch.zeros(n + 3)[3:]` and friends, EMA and source offset differently, through the list
    op, the plan (averaging, and a mirrored pair) and pack/unpack into slices."""
    if not ema_dtype.is_floating_point:
        src_dtype = ema_dtype
    sizes = [1, 7, 33, 4099, 70001]
    ema = [misaligned(n, ema_dtype, 3, i) for i, n in enumerate(sizes)]
    src = [misaligned(n, src_dtype, 1 + i % 2, 100 + i) for i, n in enumerate(sizes)]
    expected = [t.clone() for t in ema]
    scales = [magnitude(e, s) for e, s in zip(ema, src)]
    ema_update_ref(expected, src, 0.25)
    ema_update_(ema, src, 0.25)
    for got, want, scale in zip(ema, expected, scales):
        assert_within_fallback_bound(got, want, scale)
    mirror = [misaligned(n, ema_dtype, 5, 200 + i) for i, n in enumerate(sizes)]
    plan = EMAPlan([], [], mirror, src, rule='ema', momentum=0.25)
    plan.step(torch.zeros((), dtype=torch.long, device=CUDA))
    acc = torch.float64 if ema_dtype == torch.float64 else torch.float32
    for m, s in zip(mirror, src):  # a floating copy goes through the accumulate type, as the twins' do
        assert torch.equal(m, s.to(acc).to(m.dtype) if m.is_floating_point() else s)
    flats = pack(src)
    assert all(torch.equal(a, b) for a, b in zip(flats, pack_ref(src)))
    targets, want = [misaligned(n, src_dtype, 3, 0) for n in sizes], [torch.empty(n, dtype=src_dtype) for n in sizes]
    unpack_(flats, targets, 0.5)
    unpack_ref([f.cpu() for f in flats], want, 0.5)
    assert all(torch.equal(a.cpu(), b) for a, b in zip(targets, want))


def test_a_mixed_dtype_mirrored_pair():
    """An fp16 averaged copy mirroring fp32 buffers: the cast, not a byte copy."""
    mirror_ema, mirror_src = [torch.zeros(1000, dtype=torch.float16, device=CUDA)], [make((1000,), torch.float32, 3)]
    plan = EMAPlan([], [], mirror_ema, mirror_src)
    plan.step(torch.zeros((), dtype=torch.long, device=CUDA))
    assert torch.equal(mirror_ema[0], mirror_src[0].half())


def test_a_step_on_a_side_stream_waits_for_that_stream():
    """The kernel runs on the current stream: behind a long _sleep on a side stream, it must
    see the values that stream writes after sleeping (on the legacy default stream it would not)."""
    ema, src = [torch.zeros(1 << 20, device=CUDA)], [torch.zeros(1 << 20, device=CUDA)]
    plan = EMAPlan(ema, src, rule='ema', momentum=0.5)
    steps = torch.ones((), dtype=torch.long, device=CUDA)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)
        src[0].fill_(2.0)
        plan.step(steps)
    torch.cuda.synchronize()
    assert torch.equal(ema[0], torch.ones(1 << 20, device=CUDA)) and int(steps) == 2


def test_a_step_returns_while_the_gpu_is_busy():
    """No raw synchronisation anywhere in a step (set_sync_debug_mode only sees PyTorch's own):
    queued behind a long _sleep, the step returns and the stream is still busy."""
    ema, src = random_lists(5, 300)
    plan = EMAPlan(ema, src, rule='anneal', momentum=0.01, gamma=4.0)
    steps = torch.zeros((), dtype=torch.long, device=CUDA)
    plan.step(steps)  # the first step uploads the table
    torch.cuda.synchronize()
    torch.cuda._sleep(2_000_000_000)  # about a second
    for _ in range(3):
        plan.step(steps)
    still_busy = not torch.cuda.current_stream().query()
    torch.cuda.synchronize()
    assert still_busy and int(steps) == 4


def test_one_launch_per_kind_of_pair_and_one_increment_per_plan_step():
    """However many tensors: one launch per kind of pair present (here the 7 floating pairs of
    PAIRS, and byte copies for the integers and the mirror), then the counter's increment."""
    ema, src = random_lists(6, 3000)
    plan = EMAPlan(ema, src, [torch.zeros(7, device=CUDA)], [torch.ones(7, device=CUDA)], rule='swa')
    steps = torch.zeros((), dtype=torch.long, device=CUDA)
    plan.step(steps)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(4):
            plan.step(steps)
        torch.cuda.synchronize()
    kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    assert sum('ema_kernel<16>' in name for name in kernels) == 4, kernels  # the byte copies
    assert sum('ema_kernel' in name for name in kernels) == 4 * 8
    assert sum('increment_kernel' in name for name in kernels) == 4 and len(kernels) == 4 * 9
    assert int(steps) == 5


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason='one GPU')
def test_a_plan_on_the_second_gpu():
    device = torch.device('cuda', 1)
    ema, src = [torch.zeros(5000, device=device)], [torch.ones(5000, device=device)]
    plan = EMAPlan(ema, src, rule='ema', momentum=0.5)
    steps = torch.ones((), dtype=torch.long, device=device)
    plan.step(steps)
    flats = pack(src)
    torch.cuda.synchronize(device)
    assert torch.equal(ema[0], torch.full((5000,), 0.5, device=device)) and int(steps) == 2
    assert flats[0].device == device and torch.equal(flats[0][:5000], src[0])
