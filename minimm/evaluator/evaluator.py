"""Evaluator: run several metrics over the same model outputs and merge their results.

ValLoop/TestLoop call ``evaluator.process(data_samples=outputs, data_batch=data_batch)`` after every
batch and ``evaluator.evaluate(len(dataloader.dataset))`` once at the end; the merged dict is what
``after_val_epoch(metrics=...)`` receives. Two metrics producing the same key is an error: give them
different prefixes.

Left out compared with MMEngine: ``offline_evaluate`` and ``BaseDataElement`` conversion.
"""
from typing import Any, Optional, Sequence, Union

from ..registry import EVALUATOR, METRICS
from .metric import BaseMetric


@EVALUATOR.register_module()
class Evaluator:
    """A list of metrics fed and evaluated together.

    Args:
        metrics: a metric config dict, a BaseMetric, or a list of either.
    """

    def __init__(self, metrics: Union[dict, BaseMetric, Sequence]):
        self._dataset_meta: Optional[dict] = None
        if isinstance(metrics, (dict, BaseMetric)):
            metrics = [metrics]
        self.metrics = []
        for metric in metrics:
            if isinstance(metric, dict):
                metric = METRICS.build(metric)
            if not isinstance(metric, BaseMetric):
                raise TypeError(f'a metric must be a config dict or a BaseMetric, got '
                                f'{type(metric)}')
            self.metrics.append(metric)

    def process(self, data_samples: Sequence, data_batch: Optional[Any] = None) -> None:
        """Hand one batch's model outputs (and inputs) to every metric; as one list, since a
        generator would be used up by the first metric."""
        samples = list(data_samples)
        for metric in self.metrics:
            metric.process(data_batch, samples)

    def evaluate(self, size: int) -> dict:
        """Evaluate every metric and merge the results; duplicate names raise ValueError."""
        metrics = {}
        for metric in self.metrics:
            results = metric.evaluate(size)
            for name in results:
                if name in metrics:
                    raise ValueError(f'There are multiple evaluation results with the same metric '
                                     f'name {name}. Please make sure all metrics have different '
                                     'prefixes.')
            metrics.update(results)
        return metrics

    # The property and its setter are the API (the loops set ``evaluator.dataset_meta``).
    @property
    def dataset_meta(self) -> Optional[dict]:
        """The dataset's meta information; setting it gives it to every metric as well."""
        return self._dataset_meta

    @dataset_meta.setter
    def dataset_meta(self, dataset_meta: dict) -> None:
        self._dataset_meta = dataset_meta
        for metric in self.metrics:
            metric.dataset_meta = dataset_meta
