"""The emulated CUDA device itself (tests/cuda_emu): it reports what a GPU leaves undefined, and the
kernels give the same bits whatever order its blocks and threads run in and however many blocks
fit on how many SMs. Runs in CI's emulated-device lane; skipped elsewhere."""
import itertools
import re

import pytest
import torch

from cuda_emu.device import Emulated, emulated_available
from minimm.ops import EMAPlan
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
