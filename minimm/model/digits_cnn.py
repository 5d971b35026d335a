"""DigitsCNN: the demo model, a small CNN for the 8x8 digits of ``DigitsDataset``.

It shows the three ``forward`` modes every MMEngine model implements:

* ``'tensor'``  -> the raw logits, shape ``(N, num_classes)``;
* ``'loss'``    -> ``{'loss': cross_entropy}``, what ``train_step`` reduces and back-propagates;
* ``'predict'`` -> one ``dict(pred_score, pred_label, gt_label)`` per sample, what the
  ``Accuracy`` metric consumes in ``val_step``/``test_step``.

Two 3x3 convolutions (each with BatchNorm, ReLU and 2x2 max-pooling: 8x8 -> 4x4 -> 2x2) and a
linear head; about 6k parameters. The BatchNorm layers give the model buffers
(``running_mean``, ``num_batches_tracked``) — the case EMA must handle correctly.

``inputs`` may be a stacked ``(N, 1, 8, 8)`` tensor (``collate_fn=default_collate``) or a list of
``(1, 8, 8)`` tensors (the Runner's default ``pseudo_collate``); labels likewise. In MMEngine an
image data preprocessor does that stacking; here the model does it, to keep one model for both.
"""
from typing import List, Sequence, Union

import torch
import torch.nn.functional as F
from torch import nn

from minimm.registry import MODELS

from .base_model import BaseModel

__all__ = ['DigitsCNN']

Batch = Union[torch.Tensor, Sequence[torch.Tensor]]


def _as_batch(tensors: Batch, what: str) -> torch.Tensor:
    if isinstance(tensors, torch.Tensor):
        return tensors
    if isinstance(tensors, (list, tuple)) and tensors \
            and all(isinstance(t, torch.Tensor) for t in tensors):
        return torch.stack(list(tensors))
    raise TypeError(f'{what} must be a tensor or a non-empty list of tensors, '
                    f'but got {type(tensors).__name__}')


@MODELS.register_module()
class DigitsCNN(BaseModel):
    """A small CNN classifier for 1x8x8 images.

    Args:
        num_classes: number of output classes.
        channels: output channels of the two convolutions.
        data_preprocessor, init_cfg: see :class:`BaseModel`.
    """

    def __init__(self, num_classes: int = 10, channels: Sequence[int] = (16, 32),
                 data_preprocessor=None, init_cfg=None):
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        if len(channels) != 2:
            raise ValueError(f'channels must give the two convolution widths, but got {channels!r}')
        c1, c2 = channels
        self.num_classes = num_classes
        self.backbone = nn.Sequential(
            nn.Conv2d(1, c1, 3, padding=1), nn.BatchNorm2d(c1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 3, padding=1), nn.BatchNorm2d(c2), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.head = nn.Linear(c2 * 2 * 2, num_classes)

    def forward(self, inputs: Batch, data_samples: Batch = None, mode: str = 'tensor'):
        logits = self.head(self.backbone(_as_batch(inputs, 'inputs')).flatten(1))
        if mode == 'tensor':
            return logits
        if mode == 'loss':
            if data_samples is None:
                raise ValueError("mode='loss' needs the labels as data_samples")
            labels = _as_batch(data_samples, 'data_samples').to(logits.device)
            return dict(loss=F.cross_entropy(logits, labels))
        if mode == 'predict':
            return self._predictions(logits, data_samples)
        raise ValueError(f"mode must be 'tensor', 'loss' or 'predict', but got {mode!r}")

    @staticmethod
    def _predictions(logits: torch.Tensor, data_samples: Batch) -> List[dict]:
        scores = logits.detach().softmax(dim=1)
        labels = None if data_samples is None else _as_batch(data_samples, 'data_samples')
        results = []
        for i, score in enumerate(scores):
            result = dict(pred_score=score, pred_label=score.argmax())
            if labels is not None:
                result['gt_label'] = labels[i]
            results.append(result)
        return results
