"""torch's private base classes under the names MMEngine's ``parrots_wrapper`` gives them.

MMEngine picks these from either torch or parrots (SenseTime's framework); minimm runs on torch
only, so they are torch's own classes: ``isinstance(m, _BatchNorm)`` is true for BatchNorm1d/2d/3d
and SyncBatchNorm alike.
"""
import torch
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.conv import _ConvNd, _ConvTransposeMixin
from torch.nn.modules.instancenorm import _InstanceNorm
from torch.nn.modules.pooling import _AdaptiveAvgPoolNd, _AdaptiveMaxPoolNd, _AvgPoolNd, _MaxPoolNd

TORCH_VERSION = torch.__version__

__all__ = ['TORCH_VERSION', '_BatchNorm', '_ConvNd', '_ConvTransposeMixin', '_InstanceNorm',
           '_AdaptiveAvgPoolNd', '_AdaptiveMaxPoolNd', '_AvgPoolNd', '_MaxPoolNd']
