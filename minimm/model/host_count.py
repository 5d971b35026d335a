"""HostCount: the value of an averaged model's ``steps`` counter, known without reading it.

``steps`` is an int64 tensor buffer on the averaged copy's device (MMEngine's, so checkpoints hold
it), incremented in place at every update. The native kernels read it on the device. The PyTorch
fallback and MMEngine's per-tensor loop decide in Python — copy on the first call, average on
every ``interval``-th, the annealed or SWA weight — and ``int(steps)`` would make the host wait
for the device at every update (DESIGN principle 9). So the count is kept on the host as well,
beside the tensor's version counter (``steps._version``: host metadata that every in-place write
bumps). The tensor is read only when someone else wrote it since: ``load_state_dict`` (a
resume), ``steps.zero_()``, a copy of the model or a move to another device.
"""
from torch import Tensor


class HostCount:
    """The host copy of ``steps``, which starts at ``value``."""

    def __init__(self, steps: Tensor, value: int) -> None:
        self._note(steps, value)

    def _note(self, steps: Tensor, value: int) -> None:
        self._tensor, self.value = steps, value
        self._version = None if steps.is_inference() else steps._version  # inference: none

    def get(self, steps: Tensor) -> int:
        """``int(steps)``: the host copy, unless ``steps`` was written by someone else since."""
        if steps.is_inference() or steps is not self._tensor or steps._version != self._version:
            self._note(steps, int(steps))  # a device read, once after each outside write
        return self.value

    def incremented(self, steps: Tensor) -> None:
        """Note that ``steps`` was just incremented by one (by a plan step or ``steps += 1``)."""
        self._note(steps, self.value + 1)
