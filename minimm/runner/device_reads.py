"""DeviceReads: count the moments the host waits for the device, and say who made it wait.

On a GPU the host queues kernels and runs ahead of them. Reading a value back (``.item()``,
``float(t)``, ``bool(t)`` and so ``if t:`` or ``assert t``, ``tolist()``, ``nonzero``...) makes the
host wait until the queue has drained; a training iteration that does it starts its next launches
late and the GPU idles in between. This module counts those reads, two ways:

* ``'dispatch'`` (the default without CUDA): a ``TorchDispatchMode`` sees every aten op and counts
  the ones that would wait on a GPU — ``aten._local_scalar_dense`` (what every ``item``, ``float``
  and ``bool`` of a tensor becomes), ``nonzero``, ``masked_select``, boolean indexing, ``unique``,
  ``equal``... — plus ``Tensor.tolist`` and ``Tensor.numpy``, which read CPU memory without an
  aten op and are therefore wrapped while counting. On the CPU nothing waits, but the same code on a
  GPU would: the CPU stands in for the device.
* ``'cuda'`` (the default where CUDA is in use): ``torch.cuda.set_sync_debug_mode('warn')`` makes
  torch warn at each synchronising CUDA call; the warnings are counted, not shown.

Each read is recorded under an *owner*: what the caller put in :attr:`DeviceReads.owner` (the
hook profiler puts ``(hook, stage)`` there around each hook call), else ``('model', 'train_step')``
(or ``val_step``/``test_step``) when a model step is running, else ``('loop', function)``; and
*where*: the innermost Python function outside torch that asked for the value.
"""
import os
import sys
import warnings
from collections import Counter
from typing import Optional, Tuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
# aten ops that make the host wait on a GPU: they hand a value to the host, or the size of their
# output depends on the data.
SYNCING_OPS = {
    aten._local_scalar_dense.default, aten.nonzero.default, aten.masked_select.default,
    aten.equal.default, aten._unique2.default, aten.unique_dim.default,
    aten.unique_consecutive.default, aten.bincount.default, aten.repeat_interleave.Tensor,
}
# Indexing syncs only with a boolean mask (it becomes a nonzero inside the kernel).
MASKABLE_OPS = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default}
# Host reads of CPU memory that no aten op sees.
HOST_METHODS = ('tolist', 'numpy')
SYNC_WARNING = 'called a synchronizing CUDA operation'
MODEL_STEPS = ('train_step', 'val_step', 'test_step')
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def _skipped(filename: str) -> bool:
    """Frames that never name who read: torch's own, this module's, the warnings machinery's."""
    return filename.startswith(_TORCH_DIR) or filename in (__file__, warnings.__file__)


def _function_name(frame) -> str:
    """``file.py:Class.method`` of a frame."""
    code = frame.f_code
    name = getattr(code, 'co_qualname', code.co_name)  # co_qualname: Python 3.11 on
    return f'{os.path.basename(code.co_filename)}:{name}'


def _has_mask(args) -> bool:
    indices = args[1] if len(args) > 1 else ()
    return any(isinstance(t, torch.Tensor) and t.dtype in (torch.bool, torch.uint8)
               for t in (indices or ()))


class DeviceReads(TorchDispatchMode):
    """A context that counts device reads (see the module docstring).

    Args:
        mode: ``'dispatch'``, ``'cuda'``, or None: decided on entering, ``'cuda'`` when CUDA is
            initialised by then (a model was put on a GPU), else ``'dispatch'``.

    After (or during) the block: :attr:`total`, :attr:`by_owner` (a Counter of owners),
    :attr:`where` (a Counter of ``(owner, function)``) and :attr:`ops` (a Counter of what read:
    an aten op, ``Tensor.tolist``, or ``cuda sync``).
    """

    def __init__(self, mode: Optional[str] = None):
        super().__init__()
        if mode not in ('dispatch', 'cuda', None):
            raise ValueError(f"DeviceReads mode must be 'dispatch', 'cuda' or None, got {mode!r}")
        self.mode = mode
        self.owner: Optional[Tuple[str, str]] = None
        self.total = 0
        self.by_owner: Counter = Counter()
        self.where: Counter = Counter()
        self.ops: Counter = Counter()
        self._saved: list = []

    def describe(self) -> str:
        """How this counter counts, in words (for tables)."""
        if self.mode == 'cuda':
            return "torch.cuda.set_sync_debug_mode('warn'): each synchronising CUDA call"
        return ('a dispatch mode: aten._local_scalar_dense and the other syncing ops, '
                'Tensor.tolist/numpy')

    # --- recording ---

    def _record(self, what: str) -> None:
        frame = sys._getframe(1)
        inner = None
        owner = self.owner
        while frame is not None:
            if not _skipped(frame.f_code.co_filename):
                if inner is None:
                    inner = _function_name(frame)
                if owner is None and frame.f_code.co_name in MODEL_STEPS:
                    owner = ('model', frame.f_code.co_name)
            frame = frame.f_back
        owner = owner or ('loop', inner or '?')
        self.total += 1
        self.by_owner[owner] += 1
        self.where[(owner, inner or '?')] += 1
        self.ops[what] += 1

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in SYNCING_OPS or (func in MASKABLE_OPS and _has_mask(args)):
            self._record(str(func))
        return func(*args, **(kwargs or {}))

    def _wrap(self, name: str):
        original = getattr(torch.Tensor, name)

        def counted(tensor, *args, **kwargs):
            self._record(f'Tensor.{name}')
            return original(tensor, *args, **kwargs)
        return counted

    def _on_warning(self, message, category, filename, lineno, file=None, line=None):
        if SYNC_WARNING in str(message):
            self._record('cuda sync')
        else:
            self._show(message, category, filename, lineno, file, line)

    # --- entering and leaving ---

    def __enter__(self):
        if self.mode is None:  # decided now: the model is on its device by the time a run starts
            cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
            self.mode = 'cuda' if cuda else 'dispatch'
        if self.mode == 'cuda':
            self._previous = torch.cuda.get_sync_debug_mode()
            self._catcher = warnings.catch_warnings()
            self._catcher.__enter__()
            warnings.filterwarnings('always', message=SYNC_WARNING)
            self._show, warnings.showwarning = warnings.showwarning, self._on_warning
            torch.cuda.set_sync_debug_mode('warn')
            return self
        # Both methods live on torch's C base class: a wrapper set on torch.Tensor hides them
        # while counting, and deleting it shows them again.
        self._saved = [(name, torch.Tensor.__dict__.get(name)) for name in HOST_METHODS]
        for name in HOST_METHODS:
            setattr(torch.Tensor, name, self._wrap(name))
        return super().__enter__()

    def __exit__(self, *exc):
        if self.mode == 'cuda':
            torch.cuda.set_sync_debug_mode(self._previous)
            self._catcher.__exit__(*exc)
            return False
        for name, previous in self._saved:
            if previous is None:
                delattr(torch.Tensor, name)
            else:
                setattr(torch.Tensor, name, previous)
        return super().__exit__(*exc)
