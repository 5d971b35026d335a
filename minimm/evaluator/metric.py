"""BaseMetric: accumulate per-batch results, then reduce them to metric values once per evaluation.

A metric has two halves, as in MMEngine:

- ``process(data_batch, data_samples)`` runs after every val/test batch and appends whatever it
  needs to ``self.results`` (small things: per-sample hits, not whole tensors of logits);
- ``compute_metrics(results)`` runs once at the end and returns ``{'top1': 93.5, ...}``.

``evaluate(size)`` glues them together across processes: each rank's results are gathered to
rank 0 in the order the distributed sampler dealt the samples (rank 0's first, rank 1's first,
rank 0's second, ...), the copies the sampler padded in are cut off at ``size``, rank 0 computes the
metrics, the keys get the ``prefix/``, and every rank receives the same dict. Results are then
cleared for the next evaluation.

Left out compared with MMEngine: ``collect_device='gpu'`` and ``collect_dir`` (results always
travel through ``torch.distributed.all_gather_object``; the arguments are checked and kept for
config compatibility), ``DumpResults`` and data-element conversion.
"""
import logging
from abc import ABCMeta, abstractmethod
from typing import Any, List, Optional, Sequence

import torch
import torch.distributed as torch_dist

from ..dist.collect import collect_results
from ..dist.utils import is_distributed, is_main_process
from ..logging.logger import print_log


def _to_cpu(data: Any) -> Any:
    """``data`` with every tensor moved to the CPU (results may come from a GPU model)."""
    if isinstance(data, torch.Tensor):
        return data.cpu()
    if isinstance(data, dict):
        return {k: _to_cpu(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(_to_cpu(v) for v in data)
    return data


class BaseMetric(metaclass=ABCMeta):
    """Base class of metrics: implement ``process`` and ``compute_metrics``.

    Args:
        collect_device: ``'cpu'`` (the only device minimm gathers on, see the module docstring).
        prefix: prepended to every metric name as ``prefix/name``; defaults to ``default_prefix``.
        collect_dir: accepted only with ``collect_device='cpu'`` and otherwise unused.
    """

    default_prefix: Optional[str] = None

    def __init__(self, collect_device: str = 'cpu', prefix: Optional[str] = None,
                 collect_dir: Optional[str] = None):
        if collect_dir is not None and collect_device != 'cpu':
            raise ValueError('`collect_dir` could only be configured when `collect_device=cpu`')
        if collect_device not in ('cpu', 'gpu'):
            raise ValueError(f"collect_device must be 'cpu' or 'gpu', got {collect_device!r}")
        # The dataset's ``metainfo`` (class names...), set by the Evaluator.
        self.dataset_meta: Optional[dict] = None
        self.collect_device = collect_device
        self.collect_dir = collect_dir
        self.results: List[Any] = []
        self.prefix = prefix or self.default_prefix
        if self.prefix is None:
            print_log(f'The prefix is not set in metric class {type(self).__name__}.',
                      logger='current', level=logging.WARNING)

    @abstractmethod
    def process(self, data_batch: Any, data_samples: Sequence) -> None:
        """Append what ``compute_metrics`` needs from one batch to ``self.results``."""

    @abstractmethod
    def compute_metrics(self, results: list) -> dict:
        """Metric values (without prefix) from all collected results."""

    def evaluate(self, size: int) -> dict:
        """Gather results from all ranks, compute on rank 0, return the same dict everywhere.

        Args:
            size: length of the whole dataset; results beyond it are sampler padding.
        """
        if len(self.results) == 0:
            print_log(f'{type(self).__name__} got empty `self.results`. Please ensure that the '
                      'processed results are properly added into `self.results` in `process` '
                      'method.', logger='current', level=logging.WARNING)
        results = collect_results(self.results, size)
        metrics = None  # computed on rank 0, then broadcast
        if is_main_process():
            metrics = self.compute_metrics(_to_cpu(results))
            if self.prefix:
                metrics = {f'{self.prefix}/{k}': v for k, v in metrics.items()}
        box = [metrics]
        if is_distributed():
            torch_dist.broadcast_object_list(box, src=0)
        self.results.clear()
        return box[0]
