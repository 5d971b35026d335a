"""ImgDataPreprocessor: the image batch preparation MMEngine's image models start from
(``mmengine/model/base_model/data_preprocessor.py``; MMDetection's ``DetDataPreprocessor`` and
MMSegmentation's ``SegDataPreProcessor`` build on it).

After moving the batch to the device (:class:`BaseDataPreprocessor`), ``forward`` turns
``data['inputs']`` into one float tensor ``(N, C, H, W)``: optionally BGR <-> RGB, normalised as
``(x - mean) / std``, and padded at the bottom and right with ``pad_value`` to a common size that
is a multiple of ``pad_size_divisor``. The inputs may be a list of ``(C, H, W)`` images of
different sizes (what ``pseudo_collate`` gives) or an ``(N, C, H, W)`` tensor.

Different from MMEngine: bad arguments raise ``ValueError`` naming the problem (MMEngine asserts).
"""
import math
from typing import Optional, Sequence, Union

import torch
import torch.nn.functional as F

from ..registry import MODELS
from .base_model import BaseDataPreprocessor


def stack_batch(tensors, pad_size_divisor: int = 1, pad_value: Union[int, float] = 0):
    """Pad ``(C, H, W)`` tensors at the bottom and right to the largest height and width, rounded
    up to a multiple of ``pad_size_divisor``, and stack them (MMEngine's ``stack_batch``)."""
    if len({tensor.dim() for tensor in tensors}) != 1:
        raise ValueError(f'stack_batch needs tensors of one dimension, but got '
                         f'{[tensor.dim() for tensor in tensors]}')
    max_h = max(tensor.shape[-2] for tensor in tensors)
    max_w = max(tensor.shape[-1] for tensor in tensors)
    target_h = math.ceil(max_h / pad_size_divisor) * pad_size_divisor
    target_w = math.ceil(max_w / pad_size_divisor) * pad_size_divisor
    return torch.stack([
        F.pad(tensor, (0, target_w - tensor.shape[-1], 0, target_h - tensor.shape[-2]),
              value=pad_value) for tensor in tensors])


@MODELS.register_module()
class ImgDataPreprocessor(BaseDataPreprocessor):
    """Normalise, convert the channel order of and pad a batch of images.

    Args:
        mean, std: per-channel values (3 or 1 numbers); both or neither. None: no normalisation.
        pad_size_divisor: the padded height and width are multiples of it.
        pad_value: the value of the padded pixels.
        bgr_to_rgb, rgb_to_bgr: reverse the channel order (at most one of the two).
        non_blocking: copy host-to-device asynchronously.
    """

    def __init__(self, mean: Optional[Sequence[Union[float, int]]] = None,
                 std: Optional[Sequence[Union[float, int]]] = None, pad_size_divisor: int = 1,
                 pad_value: Union[float, int] = 0, bgr_to_rgb: bool = False,
                 rgb_to_bgr: bool = False, non_blocking: bool = False):
        super().__init__(non_blocking)
        if bgr_to_rgb and rgb_to_bgr:
            raise ValueError('`bgr_to_rgb` and `rgb_to_bgr` cannot both be True')
        if (mean is None) != (std is None):
            raise ValueError('mean and std should be both None or both set')
        self._enable_normalize = mean is not None
        if mean is not None:
            if len(mean) not in (1, 3) or len(std) not in (1, 3):
                raise ValueError(f'mean and std should have 1 or 3 values, but got {mean} and '
                                 f'{std}')
            self.register_buffer('mean', torch.tensor(mean).view(-1, 1, 1), False)
            self.register_buffer('std', torch.tensor(std).view(-1, 1, 1), False)
        self._channel_conversion = rgb_to_bgr or bgr_to_rgb
        self.pad_size_divisor = pad_size_divisor
        self.pad_value = pad_value

    def _prepare(self, inputs: torch.Tensor, channel_dim: int) -> torch.Tensor:
        """Channel order and normalisation of one image or a batch (``channel_dim`` 0 or 1)."""
        if self._channel_conversion:
            inputs = inputs.flip(channel_dim)
        inputs = inputs.float()
        if self._enable_normalize:
            if self.mean.shape[0] == 3 and inputs.shape[channel_dim] != 3:
                raise ValueError('with 3-value mean and std the images need 3 channels, but got '
                                 f'shape {tuple(inputs.shape)}')
            inputs = (inputs - self.mean) / self.std
        return inputs

    def forward(self, data: dict, training: bool = False) -> dict:
        data = self.cast_data(data)
        inputs = data['inputs']
        if isinstance(inputs, torch.Tensor):
            if inputs.dim() != 4:
                raise ValueError('a tensor of inputs should be a batch (N, C, H, W), but got '
                                 f'shape {tuple(inputs.shape)}')
            batch = stack_batch(list(self._prepare(inputs, 1)), self.pad_size_divisor,
                                self.pad_value)
        elif isinstance(inputs, Sequence) and all(isinstance(x, torch.Tensor) for x in inputs):
            batch = stack_batch([self._prepare(image, 0) for image in inputs],
                                self.pad_size_divisor, self.pad_value)
        else:
            raise TypeError('inputs should be a tensor or a list of tensors, but got '
                            f'{type(inputs)}')
        data['inputs'] = batch
        data.setdefault('data_samples', None)
        return data
