"""minimm's native ops and their PyTorch twins.

``ema_update_`` / ``EMAPlan``: the fused multi-tensor EMA update; ``pack`` / ``unpack_`` /
``PackPlan``: many buffers into one flat tensor per dtype and back. Each runs the C++/CUDA
kernels when they are available for the tensors' device and the ``*_ref`` twin otherwise; the
twins define the numbers. ``backend_info()`` says which is used where, and why.
``ema_update_`` also runs on DTensors (an FSDP2 model's sharded parameters), each rank on its
own shards (:mod:`minimm.ops.sharding`).
``FusedAveraging`` / ``AveragingRecord``: the averaged models' seam, a whole
``update_parameters`` step (of one or several averaged copies of a model) as one plan call, built
from the one record the model layer hands over. ``__all__`` lists these seams, and the three
facts of the averaging contract the model layer builds its record with: ``DEFAULT_MOMENTUM`` (the
one default), ``MAX_TARGETS`` (how many copies one plan updates) and ``first_names`` (which name
of a tensor shared under several names the plan keeps). The learner's layer imports nothing else
from ``ops`` (``tests/test_layers.py``).
"""
from . import fake, sharding  # noqa: F401  (put their registrations in the loader)
from .aliases import first_names
from .averaging import AveragingRecord, FusedAveraging
from .ema import (DEFAULT_MOMENTUM, MAX_TARGETS, EMAPlan, EMATarget, averaging_weight, ema_update_,
                  ema_update_ref)
from .loader import backend_info, backend_words
from .pack import PackPlan, pack, pack_ref, unpack_, unpack_ref

__all__ = ['ema_update_', 'ema_update_ref', 'EMAPlan', 'EMATarget', 'averaging_weight',
           'FusedAveraging', 'AveragingRecord', 'pack', 'pack_ref', 'unpack_', 'unpack_ref',
           'PackPlan', 'backend_info', 'backend_words', 'DEFAULT_MOMENTUM', 'MAX_TARGETS',
           'first_names']
