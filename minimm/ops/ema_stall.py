"""Why an EMA kept in bf16 or fp16 can stop moving, and the warning that says so.

An averaging step adds ``momentum * (src - ema)`` to ``ema`` and rounds the sum to the EMA's
dtype. bf16 keeps 8 significant bits: a step smaller than half a unit in the last place of
``ema`` (about ``|ema| / 512`` for bf16) rounds away and the element keeps its value. With the
usual momentum of 0.0002 that happens unless ``src`` differs from ``ema`` by many times ``ema``
itself, so a bf16 EMA of a bf16 model stays where it started, silently. Keeping the average in
fp32 (``ema_dtype='float32'``; the model still trains in bf16) fixes it.

:class:`StallCheck` looks for it on a few averaging calls (the 2nd, 10th, 100th, 1,000th after
it is created; each look reads a number from the device, so not every call), for the averaged
entries whose EMA dtype is fp16 or bf16, with the weight the averaging rule gives at that call
(an annealed EMA starts near 1, a power-function one at 1 - 2**-(gamma + 1)), and warns once.
"""
import warnings
from typing import Sequence

import torch
from torch import Tensor

LOW_PRECISION = (torch.float16, torch.bfloat16)
LOOK_AT_CALLS = (2, 10, 100, 1000)


def stalled_share(ema: Sequence[Tensor], src: Sequence[Tensor], weight: float) -> float:
    """Of the elements where ``src`` and ``ema`` differ, the share that one step with ``weight``
    would leave unchanged (the step is under half an ulp of the EMA's dtype); 0.0 when none
    differ."""
    differ = stuck = 0
    for e, s in zip(ema, src):
        start = e.float()
        after = (start + weight * (s.float() - start)).to(e.dtype)
        moving = s.float() != start
        differ = differ + moving.sum()
        stuck = stuck + (moving & (after == e)).sum()
    return float(stuck) / float(differ) if int(differ) else 0.0


class StallCheck:
    """Counts the averaging calls; on the calls in ``LOOK_AT_CALLS`` the averaged model passes its
    entries to :meth:`look`, which warns once when most low-precision EMA elements would not
    move."""

    def __init__(self) -> None:
        self.calls = 0
        self.warned = False

    def due(self) -> bool:
        """Call once per averaging call: whether this call is one to look at."""
        self.calls += 1
        return not self.warned and self.calls in LOOK_AT_CALLS

    def look(self, owner: str, ema: Sequence[Tensor], src: Sequence[Tensor],
             weight: float) -> None:
        """Warn (once) when most low-precision EMA elements would not move in a step with
        ``weight``."""
        pairs = [(e, s.to(e.device)) for e, s in zip(ema, src) if e.dtype in LOW_PRECISION]
        if not pairs:
            return
        share = stalled_share([e for e, _ in pairs], [s for _, s in pairs], weight)
        if share > 0.5:
            self.warned = True
            dtype = str(pairs[0][0].dtype).replace('torch.', '')
            warnings.warn(f'{owner}: the EMA is kept in {dtype} and {share:.0%} of its elements '
                          'that differ from the model would not move in an averaging step: '
                          f'the weight {weight:.4g} (the momentum, or what the rule gives at this '
                          'call) times their difference is under half a unit in the '
                          f'last place of {dtype}. Keep the average in fp32 with '
                          f"ema_dtype='float32' (the model may still train in {dtype}).",
                          stacklevel=5)
