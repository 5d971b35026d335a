"""The two names of MMEngine's ``mmengine.utils.dl_utils`` that downstream code imports most:
``TORCH_VERSION`` and, in ``parrots_wrapper.py``, torch's private base classes of norms, convs
and pools (MMPretrain's layer-decay constructor checks ``isinstance(m, _BatchNorm)`` with them).
Left out: ``collect_env``, ``TimeCounter`` and the rest of ``dl_utils``."""
from .parrots_wrapper import TORCH_VERSION, _BatchNorm, _ConvNd, _InstanceNorm, _MaxPoolNd

__all__ = ['TORCH_VERSION', '_BatchNorm', '_ConvNd', '_InstanceNorm', '_MaxPoolNd']
