"""The devices the CUDA tests run on: a real GPU, and the emulated device (README.md here).

Both answer the same few calls, so that tests/test_ops_cuda_equal.py is written once: put a
tensor on the device and read it back, the list ops, the two plans, a counter, a graph capture
and its replay. On the emulated device, "device memory" is CPU tensors; its ops are the CUDA
dispatch key's functions (torch.ops.minimm_emu.*), and its plans are minimm.ops' own plans whose
native object is stepped through the emulated kernels instead of the CPU's.
"""
import contextlib
import os
import weakref
from typing import List

import torch

from minimm.ops import EMAPlan, PackPlan, backend_info, ema_update_, pack, unpack_


class Graph:
    """A captured graph: ``replay()`` runs its launches again."""

    def __init__(self, replay):
        self.replay = replay


class _Plans:
    """The plans and the counter, the same calls on both devices: each device names its plan
    classes and where a counter lives."""

    ema_plan_type = EMAPlan
    pack_plan_type = PackPlan
    counter_device = 'cpu'

    def plan(self, *args, **kwargs):
        return self.ema_plan_type(*args, backend='native', **kwargs)

    def joint_plan(self, targets, src, mirror_src=()):
        return self.ema_plan_type.joint(targets, src, mirror_src, backend='native')

    def pack_plan(self, tensors):
        return self.pack_plan_type(tensors, backend='native')

    def counter(self, value=0):
        return torch.tensor(value, dtype=torch.long, device=self.counter_device)


class CUDA(_Plans):
    """A real GPU with minimm's native CUDA kernels."""

    name = 'cuda'
    counter_device = 'cuda'

    def put(self, t):
        return t.to('cuda')

    def host(self, t):
        return t.cpu()

    def ema_update_(self, ema, src, weight):
        ema_update_(ema, src, weight)

    def pack(self, tensors):
        return pack(tensors)

    def unpack_(self, flats, tensors, scale):
        unpack_(flats, tensors, scale)

    @contextlib.contextmanager
    def capture(self):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            yield Graph(graph.replay)

    def synchronize(self):
        torch.cuda.synchronize()


class _EmulatedEMAPlan(EMAPlan):
    def step(self, steps, count=None):
        counters = [steps] if isinstance(steps, torch.Tensor) else list(steps)
        torch.classes.minimm_emu.Plans().ema_step(self._native, counters)


class _EmulatedPackPlan(PackPlan):
    def pack(self) -> List[torch.Tensor]:
        for plan in self._native.values():
            torch.classes.minimm_emu.Plans().pack_run(plan, False, 1.0)
        return self.flats

    def unpack_(self, scale=1.0):
        for plan in self._native.values():
            torch.classes.minimm_emu.Plans().pack_run(plan, True, float(scale))


class Emulated(_Plans):
    """The emulated device: csrc/*.cu run as host code (tests/cuda_emu)."""

    name = 'emulated'
    ema_plan_type = _EmulatedEMAPlan
    pack_plan_type = _EmulatedPackPlan

    def put(self, t):
        return t.clone()

    def host(self, t):
        return t

    def ema_update_(self, ema, src, weight):
        if isinstance(weight, torch.Tensor):
            torch.ops.minimm_emu.ema_update_(ema, src, weight, 0.0)
        else:
            torch.ops.minimm_emu.ema_update_(ema, src, None, float(weight))

    def pack(self, tensors):
        return torch.ops.minimm_emu.pack(tensors)

    def unpack_(self, flats, tensors, scale):
        torch.ops.minimm_emu.unpack_(flats, tensors, float(scale))

    @contextlib.contextmanager
    def capture(self):
        torch.ops.minimm_emu.capture_begin()
        graph = Graph(None)
        try:
            yield graph
        finally:
            graph_id = torch.ops.minimm_emu.capture_end()
        graph.replay = lambda: torch.ops.minimm_emu.replay(graph_id)
        # As a torch.cuda.CUDAGraph: the graph ends (its user objects destroyed) with its object.
        weakref.finalize(graph, torch.ops.minimm_emu.reset_graph, graph_id)

    def synchronize(self):
        pass

    @staticmethod
    def configure(block_order=None, thread_order=None, seed=1, sms=2, blocks_per_sm=4):
        """How the next launches run: orders 0 forward, 1 reverse, 2 shuffled (by default both
        MINIMM_EMU_ORDER's, 0 unset: run.sh runs the equality tests in all three); the SM count and
        blocks per SM that size grids (the defaults are what a test starts with). Clears the log
        and makes stream 0 current."""
        order = int(os.environ.get('MINIMM_EMU_ORDER', '0'))
        torch.ops.minimm_emu.configure(order if block_order is None else block_order,
                                       order if thread_order is None else thread_order, seed, sms,
                                       blocks_per_sm)

    @staticmethod
    def set_stream(stream: int):
        """Makes stream ``stream`` (0 .. 7) current; configure() makes 0 current."""
        torch.ops.minimm_emu.set_stream(stream)

    @staticmethod
    def table(plan, which: int = 0) -> List[torch.Tensor]:
        """The native table of an emulated plan: chunks [row, first, n], rows' numel, segments
        [first, count, blocks] and the number of streams it remembers (for a PackPlan of one
        device, ``which`` 0 pack, 1 unpack, 2 scaled unpack)."""
        plans = torch.classes.minimm_emu.Plans()
        if isinstance(plan, EMAPlan):
            return list(plans.ema_table(plan._native))
        return list(plans.pack_table(next(iter(plan._native.values())), which))

    @staticmethod
    def take_log() -> List[str]:
        """'kernel grid threads' of every launch run since the last call."""
        return list(torch.ops.minimm_emu.take_log())


def emulated_available() -> bool:
    """Whether this process loaded the emulated device's library (MINIMM_EXT_LIBRARY)."""
    if backend_info()['cpu']['backend'] != 'native':
        return False
    try:
        torch.ops.minimm_emu.configure
    except (AttributeError, RuntimeError):
        return False
    return True


def available_devices():
    """The devices this process can test: a GPU with native CUDA kernels, the emulated device."""
    devices = []
    info = backend_info()
    native = info['cuda']['backend'] == info['cpu']['backend'] == 'native'
    if torch.cuda.is_available() and native:
        devices.append(CUDA())
    if emulated_available():
        devices.append(Emulated())
    return devices
