"""minimm's native ops and their PyTorch twins.

``ema_update_`` / ``EMAPlan``: the fused multi-tensor EMA update; ``pack`` / ``unpack_`` /
``PackPlan``: many buffers into one flat tensor per dtype and back. Each runs the C++/CUDA
kernels when they are available for the tensors' device and the ``*_ref`` twin otherwise; the
twins define the numbers. ``backend_info()`` says which is used where, and why.
"""
from . import fake  # noqa: F401  (puts its fake kernels' registration in the loader)
from .aliases import distinct
from .ema import EMAPlan, averaging_weight, ema_update_, ema_update_ref
from .loader import backend_info, backend_words
from .pack import PackPlan, pack, pack_ref, unpack_, unpack_ref

__all__ = ['ema_update_', 'ema_update_ref', 'EMAPlan', 'averaging_weight', 'pack', 'pack_ref',
           'unpack_', 'unpack_ref', 'PackPlan', 'backend_info', 'backend_words', 'distinct']
