"""The CUDA kernels equal, bit for bit: the CPU kernels on the same inputs (every dtype pair a plan
supports, every dtype unpack_ scales), and their own eager runs when replayed from a CUDA graph.
Then the edge cases of the CUDA host code: a table used on two streams, a captured PackPlan after a
rebuild, list ops under capture, a new unpack scale.

Skipped without a GPU with native CUDA kernels; tests/gpu_check.sh runs them on a GPU machine."""
import pytest
import torch

from minimm.ops import EMAPlan, PackPlan, backend_info, ema_update_, pack, unpack_
from toy import random_tensor

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py

if not torch.cuda.is_available():
    pytest.skip('no CUDA device', allow_module_level=True)
if backend_info()['cuda']['backend'] != 'native' or backend_info()['cpu']['backend'] != 'native':
    pytest.skip(f"no native kernels on both devices: {backend_info()}", allow_module_level=True)

CUDA = torch.device('cuda')
FLOAT_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
FLOAT_PAIRS = [(e, s) for e in FLOAT_DTYPES for s in FLOAT_DTYPES]
SIZES = (1, 33, 4099, 70_001)  # a scalar tail, a partial vector, several chunks


def cpu_and_cuda(dtype, seed):
    tensors = [random_tensor((n,), dtype, seed + n) for n in SIZES]
    return tensors, [t.to(CUDA) for t in tensors]


def assert_equal(cpu_tensors, cuda_tensors):
    for want, got in zip(cpu_tensors, cuda_tensors):
        assert torch.equal(got.cpu(), want), f'{want.dtype}: {float((got.cpu().double() - want.double()).abs().max())}'


@pytest.mark.parametrize('ema_dtype,src_dtype', FLOAT_PAIRS + [(torch.int64, torch.int64), (torch.uint8, torch.uint8)])
@pytest.mark.parametrize('rule', ['ema', 'anneal', 'swa'])
def test_cpu_native_equals_cuda_native_plan(ema_dtype, src_dtype, rule):
    """Copy, averaging and skipped calls (interval 2) of a plan with a mirrored cast pair."""
    results = []
    for device in ('cpu', 'cuda'):
        ema, src = (pair[device == 'cuda'] for pair in (cpu_and_cuda(ema_dtype, 1), cpu_and_cuda(src_dtype, 2)))
        mirror_ema, mirror_src = [torch.zeros(5, device=device)], [torch.arange(5.0, device=device).half()]
        plan = EMAPlan(ema, src, mirror_ema, mirror_src, rule=rule, momentum=0.3, gamma=3.0, interval=2,
                       backend='native')
        steps = torch.zeros((), dtype=torch.long, device=device)
        for k in range(5):
            for t, new in zip(src, cpu_and_cuda(src_dtype, 10 + k)[device == 'cuda']):
                t.copy_(new)
            plan.step(steps)
        results.append(ema + mirror_ema + [steps])
    assert_equal(*results)


@pytest.mark.parametrize('ema_dtype,src_dtype', FLOAT_PAIRS)
def test_cpu_native_equals_cuda_native_list_op(ema_dtype, src_dtype):
    (ema_cpu, ema_cuda), (src_cpu, src_cuda) = cpu_and_cuda(ema_dtype, 3), cpu_and_cuda(src_dtype, 4)
    ema_update_(ema_cpu, src_cpu, 0.7)
    ema_update_(ema_cuda, src_cuda, torch.tensor(0.7, dtype=torch.float64, device=CUDA))  # read by the kernel
    assert_equal(ema_cpu, ema_cuda)


@pytest.mark.parametrize('dtype', [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64] + FLOAT_DTYPES)
def test_cpu_native_equals_cuda_native_pack_and_scaled_unpack(dtype):
    cpu, cuda = cpu_and_cuda(dtype, 5)
    flats = [pack(cpu), pack(cuda)]
    assert_equal(flats[0], flats[1])
    unpack_(flats[0], cpu, 1 / 3)
    unpack_(flats[1], cuda, 1 / 3)
    assert_equal(cpu, cuda)


def plan_pair(rule):
    """Two plans on equal copies of the same inputs, and their counters."""
    ema, src = cpu_and_cuda(torch.float32, 6)[1], cpu_and_cuda(torch.bfloat16, 7)[1]
    other = [t.clone() for t in ema]
    plans = [EMAPlan(e, src, rule=rule, momentum=0.2, gamma=2.0, interval=2) for e in (ema, other)]
    return plans, (ema, other), src, [torch.zeros((), dtype=torch.long, device=CUDA) for _ in range(2)]


@pytest.mark.parametrize('rule', ['ema', 'anneal', 'swa'])
def test_a_graph_replay_equals_the_eager_step(rule):
    (eager, captured), (eager_ema, captured_ema), src, (eager_steps, captured_steps) = plan_pair(rule)
    eager.step(eager_steps)
    captured.step(captured_steps)  # the first step uploads the table, outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured.step(captured_steps)
    for k in range(6):
        for t, new in zip(src, cpu_and_cuda(torch.bfloat16, 20 + k)[1]):
            t.copy_(new)
        eager.step(eager_steps)
        graph.replay()
    torch.cuda.synchronize()
    assert int(eager_steps) == int(captured_steps) == 7
    assert all(torch.equal(a, b) for a, b in zip(eager_ema, captured_ema))


def test_a_pack_plan_graph_replay_equals_eager_and_survives_a_rebuild():
    tensors = cpu_and_cuda(torch.float32, 8)[1] + cpu_and_cuda(torch.int64, 9)[1]
    plan = PackPlan(tensors)
    plan.pack()
    plan.unpack_(0.5)  # uploads the three tables outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plan.pack()
        plan.unpack_(0.5)
    expected = [t.clone() for t in tensors]
    for t in expected:
        t.copy_(t.double().mul(0.5).round() if not t.is_floating_point() else t * 0.5)
    graph.replay()
    torch.cuda.synchronize()
    assert all(torch.equal(t, e) for t, e in zip(tensors, expected))
    moved = tensors[0].data.clone()
    tensors[0].data = moved  # the next run rebuilds the tables; the graph keeps its captured memory
    with pytest.warns(UserWarning, match='capture it again'):
        plan.pack()
    for _ in range(3):
        graph.replay()  # reads and writes only memory the plan keeps alive (memcheck would see)
    torch.cuda.synchronize()


def test_a_table_used_on_two_streams_is_not_reused_by_the_first_while_the_second_runs():
    """The table is uploaded on a side stream, then used on the default stream behind a long
    kernel; a rebuild frees it meanwhile, and the side stream allocates and fills memory of the
    same size. Without record_stream that memory is the table, which the queued step then reads."""
    src = torch.nn.Parameter(torch.full((4096,), 2.0, device=CUDA))
    ema = torch.zeros(4096, device=CUDA)
    plan = EMAPlan([ema], [src], momentum=0.5)
    steps = torch.ones((), dtype=torch.long, device=CUDA)  # average from the start
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        plan.step(steps)  # uploads the table on the side stream
    torch.cuda.synchronize()
    torch.cuda._sleep(100_000_000)  # keeps the default stream busy
    plan.step(steps)  # queued on the default stream
    src.data = torch.full((4096,), 4.0, device=CUDA)
    assert plan.refresh()  # frees the old table now
    with torch.cuda.stream(side):
        junk = [torch.full((512,), 255, dtype=torch.uint8, device=CUDA) for _ in range(64)]
    torch.cuda.synchronize()
    assert torch.equal(ema, torch.full((4096,), 1.5, device=CUDA)) and int(steps) == 3
    del junk


def test_the_list_ops_cannot_be_captured_and_say_what_can():
    ema, src = [torch.zeros(4, device=CUDA)], [torch.ones(4, device=CUDA)]
    ema_update_(ema, src, 0.5)
    pack(src)
    for call, hint in ((lambda: ema_update_(ema, src, 0.5), 'Capture the step of an EMAPlan'),
                       (lambda: pack(src), 'of a PackPlan')):
        with pytest.raises(RuntimeError, match=hint):
            with torch.cuda.graph(torch.cuda.CUDAGraph()):
                call()


def test_a_new_unpack_scale_uploads_nothing():
    tensors = cpu_and_cuda(torch.float32, 11)[1]
    plan = PackPlan(tensors)
    plan.pack()
    plan.unpack_(0.5)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        plan.unpack_(0.25)
        torch.cuda.synchronize()
    copies = [e.name for e in prof.events() if 'Memcpy' in e.name]
    assert not copies, copies
    assert torch.equal(tensors[0], cpu_and_cuda(torch.float32, 11)[1][0] * 0.25)
