"""Evaluation: BaseMetric, the Evaluator that runs several metrics, and the Accuracy metric."""
from .accuracy import Accuracy
from .evaluator import Evaluator
from .metric import BaseMetric, collect_results

__all__ = ['Accuracy', 'BaseMetric', 'Evaluator', 'collect_results']
