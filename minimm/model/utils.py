"""SyncBatchNorm conversions: what the Runner does to a model's BatchNorm layers (MMEngine's
``revert_sync_batchnorm`` and ``convert_sync_batchnorm`` of ``mmengine/model/utils.py``).

A ``SyncBatchNorm`` layer needs a process group; a run that is not distributed turns each one
back into a BatchNorm (keeping its weights and statistics), and a distributed run with
``cfg.sync_bn='torch'`` turns the BatchNorm layers into ``SyncBatchNorm``.
"""
import torch.nn as nn
from torch.nn.modules.batchnorm import _BatchNorm

__all__ = ['revert_sync_batchnorm', 'convert_sync_batchnorm']


class _BatchNormXd(_BatchNorm):
    """A BatchNorm for inputs of any dimension: a SyncBatchNorm takes 2-D to 5-D inputs, so
    neither BatchNorm1d, 2d nor 3d can stand for it."""

    def _check_input_dim(self, input):
        return


def revert_sync_batchnorm(module: nn.Module) -> nn.Module:
    """``module`` with every ``nn.SyncBatchNorm`` replaced by a BatchNorm that shares its
    parameters and buffers (the same tensors, so nothing is copied)."""
    module_output = module
    if isinstance(module, nn.SyncBatchNorm):
        module_output = _BatchNormXd(module.num_features, module.eps, module.momentum,
                                     module.affine, module.track_running_stats)
        if module.affine:
            module_output.weight = module.weight
            module_output.bias = module.bias
        module_output.running_mean = module.running_mean
        module_output.running_var = module.running_var
        module_output.num_batches_tracked = module.num_batches_tracked
        module_output.training = module.training
    for name, child in module.named_children():
        module_output.add_module(name, revert_sync_batchnorm(child))
    return module_output


def convert_sync_batchnorm(module: nn.Module, implementation: str = 'torch') -> nn.Module:
    """``module`` with its BatchNorm layers turned into ``nn.SyncBatchNorm``.

    Only PyTorch's implementation exists here (MMEngine also offers MMCV's, ``'mmcv'``)."""
    if implementation != 'torch':
        raise ValueError(f"sync_bn must be 'torch' (minimm has no MMCV SyncBatchNorm), but got "
                         f'{implementation!r}')
    return nn.SyncBatchNorm.convert_sync_batchnorm(module)
