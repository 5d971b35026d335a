"""Distributed helpers under MMCV 1.7's names (``mmcv/runner/dist_utils.py``), on minimm's shared
collectives: ``get_dist_info``, ``master_only`` and ``init_dist`` are the shared ones;
``allreduce_params`` and ``allreduce_grads`` average over the ranks, as MMCV's do.

Different from MMCV 1.7: the coalesced all-reduce packs each dtype's tensors with minimm's native
``pack`` op, and integer buffers (``num_batches_tracked``) are averaged with rounding where MMCV's
in-place division fails on current PyTorch; ``init_dist`` takes ``timeout`` in seconds too.
``init_dist`` knows the three launchers, ``'pytorch'`` (torchrun), ``'slurm'`` and ``'mpi'``.
Left out: MLU/NPU devices.
"""
from minimm.dist import all_reduce_params, get_dist_info, init_dist, master_only

__all__ = ['get_dist_info', 'master_only', 'init_dist', 'allreduce_params', 'allreduce_grads']


def allreduce_params(params, coalesce=True, bucket_size_mb=-1):
    """Average ``params`` (parameters or buffers) over the ranks, in place."""
    all_reduce_params(params, coalesce=coalesce, bucket_size_mb=bucket_size_mb, op='mean')


def allreduce_grads(params, coalesce=True, bucket_size_mb=-1):
    """Average the gradients of ``params`` over the ranks, in place (for models not wrapped in
    DistributedDataParallel, which averages them itself)."""
    grads = [param.grad.data for param in params
             if param.requires_grad and param.grad is not None]
    all_reduce_params(grads, coalesce=coalesce, bucket_size_mb=bucket_size_mb, op='mean')
