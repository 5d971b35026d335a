"""Accuracy: the top-k classification accuracy metric, in percent.

``process`` accepts the batch's model outputs in either of two shapes:

- a pair ``(scores, labels)``: a ``(N, C)`` tensor of class scores/logits and a ``(N,)`` tensor of
  integer labels (what a toy ``BaseModel.forward(mode='predict')`` usually returns);
- a sequence of per-sample dicts with ``gt_label`` and either ``pred_score`` (a ``(C,)`` tensor) or
  ``pred_label`` (an int or one-element tensor; top-1 only), mmpretrain's data-sample keys.

It keeps, per sample, whether the label is within the top k for each k (so ``evaluate(size)`` can
cut off sampler padding sample by sample) and returns ``{'top1': 87.5, 'top5': ...}``; with the
default prefix ``'accuracy'`` the keys read ``accuracy/top1`` (mmpretrain's convention).
Ties in the scores are broken by ``torch.topk``. Left out compared with mmpretrain: ``thrs``.
"""
from typing import Any, List, Sequence, Tuple, Union

import torch

from ..registry import METRICS
from .metric import BaseMetric


@METRICS.register_module()
class Accuracy(BaseMetric):
    """Top-k accuracy in percent.

    Args:
        topk: an int or a tuple of ints, the k values to report.
        collect_device, prefix, collect_dir: see :class:`BaseMetric`.
    """

    default_prefix = 'accuracy'

    def __init__(self, topk: Union[int, Sequence[int]] = (1,), collect_device: str = 'cpu',
                 prefix: str = None, collect_dir: str = None):
        super().__init__(collect_device=collect_device, prefix=prefix, collect_dir=collect_dir)
        topk = (topk,) if isinstance(topk, int) else tuple(topk)
        if not topk or not all(isinstance(k, int) and not isinstance(k, bool) and k > 0
                               for k in topk):
            raise ValueError(f'topk must be a positive int or a tuple of them, got {topk!r}')
        self.topk = topk

    def process(self, data_batch: Any, data_samples: Sequence) -> None:
        """Append, for each sample, a tuple of 0/1 hits, one per k in ``topk``."""
        if (len(data_samples) == 2 and all(isinstance(x, torch.Tensor) for x in data_samples)
                and data_samples[0].dim() == 2):
            scores, labels = data_samples
            self.results.extend(self._hits_from_scores(scores, labels))
            return
        for sample in data_samples:
            if not isinstance(sample, dict) or 'gt_label' not in sample:
                raise TypeError('Accuracy.process expects (scores, labels) tensors or dicts with '
                                f'gt_label and pred_score/pred_label, got {type(sample)}')
            label = torch.as_tensor(sample['gt_label']).reshape(1)
            if 'pred_score' in sample:
                scores = torch.as_tensor(sample['pred_score']).reshape(1, -1)
                self.results.extend(self._hits_from_scores(scores, label))
            elif 'pred_label' in sample:
                if self.topk != (1,):
                    raise ValueError(f'top-k accuracy for k in {self.topk} needs pred_score; '
                                     'the sample only has pred_label')
                pred = torch.as_tensor(sample['pred_label']).reshape(1)
                self.results.append((int(pred.item() == label.item()),))
            else:
                raise KeyError('each data sample needs pred_score or pred_label')

    def _hits_from_scores(self, scores: torch.Tensor, labels: torch.Tensor) -> List[Tuple[int]]:
        if scores.size(0) != labels.numel():
            raise ValueError(f'{scores.size(0)} score rows but {labels.numel()} labels')
        maxk = max(self.topk)
        if maxk > scores.size(1):
            raise ValueError(f'top-{maxk} accuracy needs at least {maxk} classes, the scores '
                             f'have {scores.size(1)}')
        top = scores.detach().topk(maxk, dim=1).indices.cpu()
        correct = top == labels.detach().cpu().reshape(-1, 1)
        hits = torch.stack([correct[:, :k].any(dim=1) for k in self.topk], dim=1)
        return [tuple(int(h) for h in row) for row in hits.tolist()]

    def compute_metrics(self, results: list) -> dict:
        """``{'top{k}': percent}`` over all samples."""
        if not results:
            raise ValueError('Accuracy has no results to compute: no sample was processed')
        n = len(results)
        return {f'top{k}': 100.0 * sum(r[i] for r in results) / n
                for i, k in enumerate(self.topk)}
