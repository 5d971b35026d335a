"""The emulated CUDA device itself (tests/cuda_emu): it reports what a GPU leaves undefined, and the
kernels give the same bits whatever order its blocks and threads run in and however many blocks
fit on how many SMs. Runs in CI's emulated-device lane; skipped elsewhere."""
import gc
import itertools
import re

import pytest
import torch

from cuda_emu.device import Emulated, emulated_available
from minimm.ops import EMAPlan, EMATarget, averaging_weight, pack
from toy import random_tensor

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py

if not emulated_available():
    pytest.skip('the emulated device is not loaded (tests/cuda_emu/run.sh)',
                allow_module_level=True)

EMU = Emulated()


def test_a_barrier_that_half_the_threads_skip_is_an_error():
    EMU.configure()
    message = r'divergent __syncthreads\(\) in divergent_kernel block 0: 32 of 64'
    with pytest.raises(RuntimeError, match=message):
        torch.ops.minimm_emu.selftest('divergent', torch.zeros(64, dtype=torch.long))


def test_shared_memory_holds_garbage_until_a_thread_of_the_block_writes_it():
    EMU.configure()
    out = torch.zeros(2, dtype=torch.long)
    torch.ops.minimm_emu.selftest('shared', out)
    assert out.tolist() == [7, -1]  # block 1 never wrote it: all bits set


def test_a_grid_has_one_block_at_least():
    EMU.configure(sms=0)  # the occupancy figures say nothing fits: still one block, no empty grid
    plan, steps = EMU.plan([torch.zeros(3)], [torch.ones(3)], momentum=0.5), EMU.counter()
    plan.step(steps)
    assert EMU.take_log() == ['ema_kernel<0> 1 256', 'increment_kernel 1 1']


def mixed_plan(seed):
    """Pairs of three kinds (three launches and the increment), from a scalar to many chunks."""
    pairs = [(torch.float32, torch.float32), (torch.float32, torch.bfloat16),
             (torch.int64, torch.int64)]
    ema, src = [], []
    for k, (n, (e, s)) in enumerate(itertools.product((1, 1000, 9000, 70_001), pairs)):
        ema.append(random_tensor((n,), e, seed + k))
        src.append(random_tensor((n,), s, seed + 100 + k))
    return ema, src


@pytest.mark.parametrize('block_order,thread_order', list(itertools.product(range(3), range(3))))
@pytest.mark.parametrize('sms,blocks_per_sm', [(1, 1), (3, 2), (1000, 4)])
def test_any_order_and_grid_gives_the_cpu_kernels_bits(block_order, thread_order, sms,
                                                        blocks_per_sm):
    want_ema, want_src = mixed_plan(1)
    got_ema, got_src = mixed_plan(1)
    cpu = EMAPlan(want_ema, want_src, rule='anneal', momentum=0.1, gamma=5.0, backend='native')
    EMU.configure(block_order, thread_order, seed=block_order * 3 + thread_order, sms=sms,
                  blocks_per_sm=blocks_per_sm)
    emulated = EMU.plan(got_ema, got_src, rule='anneal', momentum=0.1, gamma=5.0)
    cpu_steps, emu_steps = torch.zeros((), dtype=torch.long), EMU.counter()
    for _ in range(3):
        cpu.step(cpu_steps)
        emulated.step(emu_steps)
    assert all(torch.equal(a, b) for a, b in zip(want_ema, got_ema))
    assert int(emu_steps) == 3
    # Each kind's grid: as many blocks as fit on all SMs at once, no more than its chunks.
    # Chunks of 16 KB of the wider side: 1 + 1 + 3 + 18 of four-byte pairs, 1 + 1 + 5 + 35 of int64.
    chunks = {'0': 23, '3': 23, '16': 42}
    launches = EMU.take_log()
    assert len(launches) == 3 * 4 and launches[3::4] == ['increment_kernel 1 1'] * 3
    for line in launches:
        kind = re.fullmatch(r'ema_kernel<(\d+)> (\d+) 256', line)
        if kind:
            assert int(kind[2]) == min(sms * blocks_per_sm, chunks[kind[1]]), line


def test_a_launch_on_another_stream_than_the_current_one_is_an_error():
    EMU.configure()
    with pytest.raises(RuntimeError, match='launched on stream 1 but the current stream is 0'):
        torch.ops.minimm_emu.selftest('other_stream', torch.zeros(1, dtype=torch.long))


def test_a_plan_runs_on_the_current_stream_and_remembers_four_streams_at_most():
    """Each step launches on the stream current then (the emulator checks); the table records
    its memory on each new stream and keeps a bounded list of them."""
    EMU.configure()
    ema, src = [torch.zeros(5000)], [torch.full((5000,), 2.0)]
    plan, steps = EMU.plan(ema, src, momentum=0.5), EMU.counter()
    for stream in [0, 1, 2, 3, 4, 5, 6, 7, 0, 7]:
        EMU.set_stream(stream)
        plan.step(steps)
        assert int(EMU.table(plan)[3]) <= 4
    assert int(steps) == 10 and torch.equal(ema[0], torch.full((5000,), 2.0))


def test_a_graph_keeps_what_it_replays_alive_after_its_plan_and_tensors_are_gone():
    """The graph, not the plan, holds the memory: the plan, its tensors and the counter dropped,
    a replay still writes live memory (AddressSanitizer would report a use after free); the
    graph's end lets go of it at the next plan run."""
    EMU.configure()
    ema, src = [torch.zeros(5000)], [torch.full((5000,), 2.0)]
    plan, steps = EMU.plan(ema, src, momentum=0.5), EMU.counter(1)
    plan.step(steps)
    with EMU.capture() as graph:
        plan.step(steps)
    src_storage = src[0].untyped_storage()
    del plan, ema, src, steps
    gc.collect()
    assert torch._C._storage_Use_Count(src_storage._cdata) == 2  # this name and the graph
    graph.replay()
    del graph
    gc.collect()
    other = EMU.plan([torch.zeros(1)], [torch.ones(1)], momentum=0.5)
    other.step(EMU.counter())  # a plan run frees what ended graphs held
    assert torch._C._storage_Use_Count(src_storage._cdata) == 1


def assert_chunks_cover_each_element_once(chunks, numel, rows):
    """Every element of each of `rows` in exactly one chunk, nothing outside them."""
    pieces = {}
    for row, first, n in chunks.tolist():
        pieces.setdefault(row, []).append((first, n))
    assert sorted(pieces) == sorted(rows)
    for row, row_pieces in pieces.items():
        covered = 0
        for first, n in sorted(row_pieces):
            assert first == covered and n >= 1, (row, sorted(row_pieces))
            covered += n
        assert covered == int(numel[row]), row


def assert_segments_partition(segments, chunk_count):
    at = 0
    for first, count, blocks in segments.tolist():
        assert first == at and count >= 1 and 1 <= blocks <= count * 8
        at += count
    assert at == chunk_count


@pytest.mark.parametrize('targets', [1, 3])
def test_every_element_of_a_plan_is_in_exactly_one_chunk(targets):
    """table.h's chunking, shared by the CPU and the GPU: on a GPU an element in two chunks is a
    race between blocks (here it runs twice, the same on both devices, so no equality test sees it)."""
    EMU.configure()
    ema, src = mixed_plan(3)
    src += [torch.zeros(4096 * k + d) for k in (1, 2) for d in (-1, 0, 1)]
    mirror = [torch.zeros(16385, dtype=torch.uint8), torch.zeros(3, dtype=torch.int16)]
    copies = [EMATarget([torch.zeros_like(s) for s in src], [torch.zeros_like(m) for m in mirror])
              for _ in range(targets)]
    plan = EMU.joint_plan(copies, src, mirror)
    plan.step([EMU.counter() for _ in range(targets)])
    chunks, numel, segments, _ = EMU.table(plan)
    assert_chunks_cover_each_element_once(chunks, numel, range(0, len(numel), targets))
    assert_segments_partition(segments, len(chunks))


def test_every_element_of_a_pack_plan_table_is_in_exactly_one_chunk():
    EMU.configure()
    tensors = [random_tensor((n,), dtype, n) for n in (1, 17, 4096, 4097, 16385)
               for dtype in (torch.uint8, torch.float32, torch.int64)]
    plan = EMU.pack_plan(tensors)
    plan.pack()
    plan.unpack_()
    plan.unpack_(0.5)  # each of the three tables uploaded: its segments set
    for which in range(3):
        chunks, numel, segments, _ = EMU.table(plan, which)
        assert_chunks_cover_each_element_once(chunks, numel, range(len(numel)))
        assert_segments_partition(segments, len(chunks))


def test_a_joint_plan_grid_counts_every_target():
    """Three copies of one source: a chunk is three units of work, and the grid is sized for all."""
    for sms, blocks_per_sm, want in ((1000, 4, 9), (2, 4, 8), (1, 1, 1)):
        EMU.configure(sms=sms, blocks_per_sm=blocks_per_sm)
        src = [random_tensor((9000,), torch.float32, 1)]  # three chunks of 4096 floats
        copies = [EMATarget([torch.zeros(9000)]) for _ in range(3)]
        plan = EMU.joint_plan(copies, src)
        plan.step([EMU.counter() for _ in copies])  # the first call copies
        assert EMU.take_log() == [f'ema_kernel<0> {want} 256', 'increment_kernel 1 1']
        assert all(torch.equal(c.ema[0], src[0]) for c in copies)


# Integers past 2**31 (a 32-bit path wraps them), up to the clamp at 2**63.
BIG = [2**40 + 3, -(2**40 + 3), 2**31, -2**31 - 1, 2**53 - 1, 2**62 + 2**40]


def rounded(value, scale):
    return min(max(round(float(value) * scale), -2**63), 2**63 - 1)


@pytest.mark.parametrize('scale', [1.0, 0.5, 3.0])
def test_int64_values_past_2_31_pack_and_unpack_whole(scale):
    EMU.configure()
    listed, planned = [torch.tensor(BIG)], [torch.tensor(BIG)]
    flats = EMU.pack(listed)
    assert flats[0][:len(BIG)].tolist() == BIG
    EMU.unpack_(flats, listed, scale)
    plan = EMU.pack_plan(planned)
    assert plan.pack()[0][:len(BIG)].tolist() == BIG
    plan.unpack_(scale)
    want = [rounded(v, scale) for v in BIG]
    assert listed[0].tolist() == want and planned[0].tolist() == want


def test_int64_values_past_2_31_are_copied_whole_by_a_plan():
    EMU.configure()
    ema, src = [torch.zeros(len(BIG), dtype=torch.long)], [torch.tensor(BIG)]
    EMU.plan(ema, src, momentum=0.5).step(EMU.counter())
    assert ema[0].tolist() == BIG


@pytest.mark.parametrize('offset', [0, 1, 2, 4, 8])
def test_byte_copies_with_tails_equal_the_cpu_pack(offset):
    """Byte counts that leave a tail after the widest words (16, 8, 4, 2 bytes) the start
    allows, `offset` bytes into the allocation."""
    EMU.configure()
    sizes = (1, 15, 17, 33, 16385, 16401)
    base = [random_tensor((n + offset,), torch.uint8, n) for n in sizes]
    tensors = [b[offset:] for b in base]
    want, got = pack(tensors), EMU.pack(tensors)
    assert all(torch.equal(w, g) for w, g in zip(want, got))
    out = [torch.zeros(n + offset, dtype=torch.uint8)[offset:] for n in sizes]
    EMU.unpack_(got, out, 1.0)
    assert all(torch.equal(o, t) for o, t in zip(out, tensors))


@pytest.mark.parametrize('rule,gamma', [('power', 6.94), ('power', 0.5), ('anneal', 5.0)])
def test_fp64_averages_equal_the_python_weights_bit_for_bit(rule, gamma):
    """The weight the device computes from the counter equals minimm.ops.averaging_weight's (for
    'power' a series computed with + - * / alone on both sides, csrc/ema.h power_beta)."""
    EMU.configure()
    ema, src = random_tensor((100,), torch.float64, 1), random_tensor((100,), torch.float64, 2)
    want = ema.clone()
    plan, steps = EMU.plan([ema], [src], rule=rule, gamma=gamma, momentum=0.0), EMU.counter(1)
    for count in range(1, 40):
        plan.step(steps)
        w = averaging_weight(rule, count, 0.0, gamma)
        want = torch.tensor([a + w * (s - a) for a, s in zip(want.tolist(), src.tolist())], dtype=torch.float64)
        assert torch.equal(ema, want), count
