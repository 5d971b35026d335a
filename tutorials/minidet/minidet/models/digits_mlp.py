"""DigitsMLP: a two-layer perceptron for minimm's 8x8 digits, registered in minidet's ``MODELS``.

With ``default_scope = 'minidet'``, ``model = dict(type='DigitsMLP')`` finds it; from any other
scope, ``dict(type='minidet.DigitsMLP')`` does.
"""
import torch
import torch.nn.functional as F
from torch import nn

from minimm.model import BaseModel

from minidet.registry import MODELS


def _stacked(batch) -> torch.Tensor:
    """``default_collate`` gives a tensor, the Runner's ``pseudo_collate`` a list of them."""
    return batch if isinstance(batch, torch.Tensor) else torch.stack(list(batch))


@MODELS.register_module()
class DigitsMLP(BaseModel):
    """``64 -> hidden -> 10``, with the three ``forward`` modes every MMEngine model has."""

    def __init__(self, hidden: int = 64, num_classes: int = 10, data_preprocessor=None,
                 init_cfg=None):
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, hidden), nn.ReLU(),
                                 nn.Linear(hidden, num_classes))

    def forward(self, inputs, data_samples=None, mode: str = 'tensor'):
        logits = self.net(_stacked(inputs))
        if mode == 'tensor':
            return logits
        labels = _stacked(data_samples)
        if mode == 'loss':
            return dict(loss=F.cross_entropy(logits, labels))
        scores = logits.detach().softmax(dim=1)
        return [dict(pred_score=score, pred_label=score.argmax(), gt_label=label)
                for score, label in zip(scores, labels)]
