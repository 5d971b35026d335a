"""The CUDA kernels equal, bit for bit: the CPU kernels on the same inputs (every dtype pair a plan
supports, every dtype unpack_ scales, aligned and misaligned), and their own eager runs when
replayed from a captured graph; a plan rebuilt after a capture keeps what the old graph uses and
says to capture again. Then the edge cases only a GPU has: a table used on two streams, an
upload-free new unpack scale.

Each test runs on every device this process has: a GPU with native CUDA kernels
(tests/gpu_check.sh), and the emulated device (tests/cuda_emu, CI's emulated-device lane), which
runs the same csrc/*.cu text as host code. Skipped when there is neither."""
import warnings

import pytest
import torch

from cuda_emu.device import Emulated, available_devices
from minimm.ops import EMAPlan, EMATarget, ema_update_, pack, pack_ref, unpack_, unpack_ref
from toy import random_tensor

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py

DEVICES = available_devices()
if not DEVICES:
    pytest.skip('no GPU with native CUDA kernels and no emulated device (tests/cuda_emu)',
                allow_module_level=True)

FLOAT_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
FLOAT_PAIRS = [(e, s) for e in FLOAT_DTYPES for s in FLOAT_DTYPES]
INT_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
# A scalar tail, a partial vector, a chunk whose vectors do not fill a round of its block (3001:
# one thread's last vector is the chunk's last), several chunks.
SIZES = (1, 33, 3001, 4099, 70_001)


@pytest.fixture(params=DEVICES, ids=[d.name for d in DEVICES])
def device(request):
    if isinstance(request.param, Emulated):
        request.param.configure()
    return request.param


def host_and_device(device, dtype, seed, offset=0):
    """Tensors of SIZES on the host and equal copies on `device`; `offset` elements into their
    allocation (a misaligned start for 0 < offset < 16 / element size)."""
    host = [random_tensor((n + offset,), dtype, seed + n)[offset:] for n in SIZES]
    on_device = []
    for t in host:
        base = device.put(torch.zeros(t.numel() + offset, dtype=dtype))
        on_device.append(base[offset:])
        on_device[-1].copy_(device.put(t))
    return host, on_device


def assert_equal(want_tensors, got_tensors, device):
    for want, got in zip(want_tensors, got_tensors):
        got = device.host(got)
        difference = float((got.double() - want.double()).abs().max())
        assert torch.equal(got, want), f'{want.dtype}: {difference}'


@pytest.mark.parametrize('ema_dtype,src_dtype',
                         FLOAT_PAIRS + [(torch.int64, torch.int64), (torch.uint8, torch.uint8)])
@pytest.mark.parametrize('rule', ['ema', 'anneal', 'swa', 'power'])
def test_cpu_native_equals_the_device_plan(device, ema_dtype, src_dtype, rule):
    """Copy, averaging and skipped calls (interval 2, the last one skipped) of a plan with
    mirrored pairs."""
    results = []
    for on_device in (False, True):
        ema, src = (pair[on_device] for pair in (host_and_device(device, ema_dtype, 1),
                                                 host_and_device(device, src_dtype, 2)))
        mirror_ema = [torch.zeros(5), torch.zeros(3, dtype=torch.long)]  # a cast, a byte copy
        mirror_src = [torch.arange(5.0).half(), torch.arange(3)]
        kwargs = dict(rule=rule, momentum=0.3, gamma=3.0, interval=2)
        if on_device:
            mirror_ema = [device.put(t) for t in mirror_ema]
            mirror_src = [device.put(t) for t in mirror_src]
            plan, steps = device.plan(ema, src, mirror_ema, mirror_src, **kwargs), device.counter()
        else:
            plan = EMAPlan(ema, src, mirror_ema, mirror_src, backend='native', **kwargs)
            steps = torch.zeros((), dtype=torch.long)
        for k in range(6):
            for t, new in zip(src, host_and_device(device, src_dtype, 10 + k)[on_device]):
                t.copy_(new)
            for t in mirror_src:  # mirrored on every call, skipped ones too
                t.add_(1)
            plan.step(steps)
        results.append(ema + mirror_ema + [steps])
    assert_equal(*results, device)


# K copies of one source in one plan (PostHocEMAHook's), each with its rule, interval and counter.
COPIES = [('power', 0.0, 16.97, 1), ('power', 0.0, 6.94, 2), ('ema', 0.3, 100.0, 1),
          ('anneal', 0.2, 3.0, 3), ('swa', 0.0, 100.0, 1)]


@pytest.mark.parametrize('ema_dtype,src_dtype', FLOAT_PAIRS + [(torch.int64, torch.int64)])
@pytest.mark.parametrize('copies', [2, 5])
def test_cpu_native_equals_the_device_joint_plan(device, ema_dtype, src_dtype, copies):
    """A joint plan's K copies: the device's units (chunk, copy) against the CPU's chunk loop."""
    results = []
    for on_device in (False, True):
        src = host_and_device(device, src_dtype, 2)[on_device]
        targets, counters = [], []
        for k in range(copies):
            ema = host_and_device(device, ema_dtype, 1 + 7 * k)[on_device]
            mirror = [torch.zeros(5)]
            mirror = [device.put(t) for t in mirror] if on_device else mirror
            targets.append(EMATarget(ema, mirror, *COPIES[k]))
            start = torch.tensor(k % 2, dtype=torch.long)
            counters.append(device.put(start) if on_device else start)
        mirror_src = [torch.arange(5.0).half()]
        mirror_src = [device.put(t) for t in mirror_src] if on_device else mirror_src
        if on_device:
            plan = device.joint_plan(targets, src, mirror_src)
        else:
            plan = EMAPlan.joint(targets, src, mirror_src, backend='native')
        for step in range(4):
            for t, new in zip(src, host_and_device(device, src_dtype, 10 + step)[on_device]):
                t.copy_(new)
            plan.step(counters)
        results.append([t for target in targets for t in target.ema + target.mirror_ema] + counters)
    assert_equal(*results, device)


@pytest.mark.parametrize('offset', [0, 1, 3])
@pytest.mark.parametrize('ema_dtype,src_dtype', FLOAT_PAIRS)
def test_cpu_native_equals_the_device_list_op_aligned_or_not(device, ema_dtype, src_dtype, offset):
    """Misaligned views run the element loop; the weight is a tensor the kernel reads."""
    (ema_cpu, ema_dev), (src_cpu, src_dev) = (host_and_device(device, ema_dtype, 3, offset),
                                              host_and_device(device, src_dtype, 4, offset + 1))
    ema_update_(ema_cpu, src_cpu, 0.7)
    device.ema_update_(ema_dev, src_dev, device.put(torch.tensor(0.7, dtype=torch.float64)))
    assert_equal(ema_cpu, ema_dev, device)


@pytest.mark.parametrize('offset', [0, 1])
@pytest.mark.parametrize('ema_dtype,src_dtype', [
    (torch.float32, torch.float32), (torch.float32, torch.bfloat16), (torch.float16, torch.float16),
    (torch.float64, torch.float32)])
def test_a_plan_of_misaligned_views_equals_cpu_native(device, ema_dtype, src_dtype, offset):
    (ema_cpu, ema_dev), (src_cpu, src_dev) = (host_and_device(device, ema_dtype, 5, offset),
                                              host_and_device(device, src_dtype, 6, 2 * offset))
    byte_cpu, byte_dev = host_and_device(device, torch.int16, 7, offset)
    byte_src_cpu, byte_src_dev = host_and_device(device, torch.int16, 8, 0)
    plans = [EMAPlan(ema_cpu + byte_cpu, src_cpu + byte_src_cpu, momentum=0.25, backend='native'),
             device.plan(ema_dev + byte_dev, src_dev + byte_src_dev, momentum=0.25)]
    for plan, steps in zip(plans, (torch.zeros((), dtype=torch.long), device.counter())):
        for _ in range(3):
            plan.step(steps)
    assert_equal(ema_cpu + byte_cpu, ema_dev + byte_dev, device)


@pytest.mark.parametrize('scale', [1.0, 1 / 3, -2.5, 1e12])
@pytest.mark.parametrize('dtype', INT_DTYPES + FLOAT_DTYPES)
def test_cpu_native_and_the_twin_equal_the_device_pack_and_scaled_unpack(device, dtype, scale):
    """Out-of-range integer results (a negative scale of uint8, 1e12 of int32) are clamped alike."""
    cpu, on_device = host_and_device(device, dtype, 9, offset=1)
    twin = [t.clone() for t in cpu]
    flats = [pack(cpu), device.pack(on_device)]
    assert_equal(flats[0], flats[1], device)
    assert_equal(pack_ref(twin), flats[1], device)
    unpack_(flats[0], cpu, scale)
    device.unpack_(flats[1], on_device, scale)
    unpack_ref(pack_ref(twin), twin, scale)
    assert_equal(cpu, on_device, device)
    assert_equal(twin, on_device, device)


def test_integer_results_out_of_range_are_clamped(device):
    tensors = [device.put(torch.tensor([100, 3], dtype=torch.uint8)),
               device.put(torch.tensor([2**30, -2**30]))]
    device.unpack_(device.pack(tensors), tensors, -1.0)
    device.unpack_(device.pack(tensors[1:]), tensors[1:], 2.0**40)
    assert device.host(tensors[0]).tolist() == [0, 0]
    assert device.host(tensors[1]).tolist() == [-2**63, 2**63 - 1]


def plan_pair(device, rule):
    """Two plans on equal copies of the same inputs, and their counters."""
    ema = host_and_device(device, torch.float32, 6)[1]
    src = host_and_device(device, torch.bfloat16, 7)[1]
    other = [t.clone() for t in ema]
    plans = [device.plan(e, src, rule=rule, momentum=0.2, gamma=2.0, interval=2)
             for e in (ema, other)]
    return plans, (ema, other), src, [device.counter() for _ in range(2)]


@pytest.mark.parametrize('rule', ['ema', 'anneal', 'swa'])
def test_a_graph_replay_equals_the_eager_step(device, rule):
    plans, (eager_ema, captured_ema), src, (eager_steps, captured_steps) = plan_pair(device, rule)
    eager, captured = plans
    eager.step(eager_steps)
    captured.step(captured_steps)  # the first step uploads the table, outside the capture
    with device.capture() as graph:
        captured.step(captured_steps)
    for k in range(6):
        for t, new in zip(src, host_and_device(device, torch.bfloat16, 20 + k)[1]):
            t.copy_(new)
        eager.step(eager_steps)
        graph.replay()
    device.synchronize()
    assert int(eager_steps) == int(captured_steps) == 7
    assert all(torch.equal(a, b) for a, b in zip(eager_ema, captured_ema))


def test_a_plan_rebuilt_after_a_capture_keeps_the_old_graph_safe_and_two_tables_at_most(device):
    src = [device.put(torch.full((5000,), 2.0))]
    ema = [device.put(torch.zeros(5000))]
    plan, steps = device.plan(ema, src, momentum=0.5), device.counter(1)
    plan.step(steps)
    with device.capture() as old_graph:
        plan.step(steps)
    assert plan.captured
    first_storage = src[0].untyped_storage()
    for k in range(4):
        src[0].data = device.put(torch.full((5000,), 4.0 + k))  # the old source may now be freed...
        with pytest.warns(UserWarning, match='capture it again'):
            assert plan.refresh()
        old_graph.replay()  # ...but the graph still reads it: kept alive (ASan would see)
        plan.step(steps)    # uploads the new table
        with device.capture() as old_graph:
            plan.step(steps)
    device.synchronize()
    # Two captures later, the first table's memory is let go: no more than two tables are kept.
    assert torch._C._storage_Use_Count(first_storage._cdata) == 1
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        plan.step(steps)
        assert not plan.refresh()


def test_a_pack_plan_graph_replay_equals_eager_and_survives_a_rebuild(device):
    tensors = (host_and_device(device, torch.float32, 8)[1]
               + host_and_device(device, torch.int64, 9)[1])
    tensors = [t.clone() for t in tensors]  # contiguous from offset 0
    plan = device.pack_plan(tensors)
    plan.pack()
    plan.unpack_(0.5)  # uploads the three tables outside the capture
    with device.capture() as graph:
        plan.pack()
        plan.unpack_(0.5)
    expected = [t.clone() for t in tensors]
    for t in expected:
        t.copy_(t.double().mul(0.5).round() if not t.is_floating_point() else t * 0.5)
    graph.replay()
    device.synchronize()
    assert all(torch.equal(t, e) for t, e in zip(tensors, expected))
    tensors[0].data = tensors[0].data.clone()  # the next run rebuilds the tables
    with pytest.warns(UserWarning, match='capture it again'):
        plan.pack()
    for _ in range(3):
        graph.replay()  # reads and writes only memory the plan keeps alive
    device.synchronize()


def test_the_list_ops_cannot_be_captured_and_say_what_can(device):
    ema, src = [device.put(torch.zeros(4))], [device.put(torch.ones(4))]
    device.ema_update_(ema, src, 0.5)
    device.pack(src)
    flats = device.pack(src)
    for call, hint in ((lambda: device.ema_update_(ema, src, 0.5),
                        'Capture the step of an EMAPlan'),
                       (lambda: device.pack(src), 'of a PackPlan'),
                       (lambda: device.unpack_(flats, src, 0.5), 'of a PackPlan')):
        with pytest.raises(RuntimeError, match=hint):
            with device.capture():
                call()


# ---- only a GPU: streams and the caching allocator, copies seen by the profiler ----------------

def gpu_only(device):
    if device.name != 'cuda':
        pytest.skip('streams, record_stream and the profiler exist on a GPU only')


def test_a_table_used_on_two_streams_is_not_reused_by_the_first_while_the_second_runs(device):
    """The table is uploaded on a side stream, then used on the default stream behind a long
    kernel; a rebuild frees it meanwhile, and the side stream allocates and fills memory of the
    same size. Without record_stream that memory is the table, which the queued step then reads."""
    gpu_only(device)
    src = torch.nn.Parameter(torch.full((4096,), 2.0, device='cuda'))
    ema = torch.zeros(4096, device='cuda')
    plan = EMAPlan([ema], [src], momentum=0.5)
    steps = torch.ones((), dtype=torch.long, device='cuda')  # average from the start
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        plan.step(steps)  # uploads the table on the side stream
    torch.cuda.synchronize()
    torch.cuda._sleep(100_000_000)  # keeps the default stream busy
    plan.step(steps)  # queued on the default stream
    src.data = torch.full((4096,), 4.0, device='cuda')
    assert plan.refresh()  # frees the old table and lets go of the old source now
    with torch.cuda.stream(side):
        junk = [torch.full((512,), 255, dtype=torch.uint8, device='cuda') for _ in range(64)]
        junk += [torch.full((4096,), -1.0, device='cuda') for _ in range(8)]
    torch.cuda.synchronize()
    assert torch.equal(ema, torch.full((4096,), 1.5, device='cuda')) and int(steps) == 3
    del junk


def test_a_new_unpack_scale_uploads_nothing(device):
    gpu_only(device)
    tensors = host_and_device(device, torch.float32, 11)[1]
    tensors = [t.clone() for t in tensors]
    plan = device.pack_plan(tensors)
    plan.pack()
    plan.unpack_(0.5)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        plan.unpack_(0.25)
        torch.cuda.synchronize()
    copies = [e.name for e in prof.events() if 'Memcpy' in e.name]
    assert not copies, copies
    assert torch.equal(tensors[0], host_and_device(device, torch.float32, 11)[1][0] * 0.25)
