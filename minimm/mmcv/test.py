"""``single_gpu_test`` and ``multi_gpu_test``: run a model over a loader and collect the results,
as ``mmcv.engine`` 1.7 does for ``EvalHook``/``DistEvalHook``.

The model is called as ``model(return_loss=False, **data_batch)`` and returns a list with one
result per sample. ``multi_gpu_test`` gathers every rank's list on rank 0 in dataset order with
minimm's shared ``collect_results`` (``torch.distributed.all_gather_object``), so MMCV's
``tmpdir``/``gpu_collect`` choices are accepted and not needed. Left out: the progress bar.
"""
import torch

from minimm.dist import collect_results


@torch.no_grad()
def single_gpu_test(model, data_loader) -> list:
    model.eval()
    results = []
    for data in data_loader:
        results.extend(model(return_loss=False, **data))
    return results


def multi_gpu_test(model, data_loader, tmpdir=None, gpu_collect=False) -> list:
    """This rank's share of the results, gathered on rank 0 (None on the other ranks)."""
    return collect_results(single_gpu_test(model, data_loader), len(data_loader.dataset))
