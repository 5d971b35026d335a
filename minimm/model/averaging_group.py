"""AveragingGroup: several averaged models of one source, updated in one pass.

PostHocEMAHook keeps several power-function EMAs of one model. Updated one by one, each would
read every weight of the model again; as a group, one fused plan step
(minimm/ops/averaging.py) reads each source element once and updates every copy from it while
it is in cache, with the same numbers as the models' own updates. A minimm addition.
"""
import torch
from torch import nn

from minimm.ops import MAX_TARGETS, AveragingRecord, FusedAveraging

from .averaged_model import plan_record


class AveragingGroup:
    """Several averaged models of one source (up to ``MAX_MODELS``), updated in one pass: each
    source element is read once for all of them. Where the plan cannot run, each model's own
    :meth:`~minimm.model.BaseAveragedModel.update_parameters` runs.

    Args:
        averaged: the averaged models, all built from the model later passed to
            :meth:`update_parameters`.
    """
    MAX_MODELS = MAX_TARGETS

    def __init__(self, averaged) -> None:
        self.averaged = list(averaged)
        if not 1 <= len(self.averaged) <= self.MAX_MODELS:
            raise ValueError(f'AveragingGroup: 1 to {self.MAX_MODELS} averaged models, got '
                             f'{len(self.averaged)}')
        self._fused = FusedAveraging()
        self._conversions = self._converted()

    def _converted(self) -> tuple:
        return tuple(avg._conversions for avg in self.averaged)

    def _record(self, model: nn.Module) -> AveragingRecord:
        return plan_record(self.averaged, model)

    def _follow_conversions(self) -> None:
        if self._converted() != self._conversions:  # a model's tensors were replaced (.to())
            self._conversions = self._converted()
            self._fused.forget(type(self.averaged[0]).__name__)

    @torch.no_grad()
    def update_parameters(self, model: nn.Module) -> None:
        """One averaging step of every model in the group from ``model``."""
        self._follow_conversions()
        if not self._fused.step(model, self._record):
            for avg in self.averaged:
                avg.update_parameters(model)

    def describe(self, model: nn.Module) -> str:
        """One line saying how :meth:`update_parameters` runs (as
        :meth:`BaseAveragedModel.describe`)."""
        self._follow_conversions()
        return self._fused.describe(model, self._record)
