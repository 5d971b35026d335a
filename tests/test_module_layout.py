"""MMEngine's module layout where downstream code imports from it: a scheduler written as
MMDetection 3.x writes its QuadraticWarmupLR (imports from ``lr_scheduler``,
``momentum_scheduler`` and ``param_scheduler``), and ``is_model_wrapper`` as hooks use it."""
import pytest
import torch
import torch.nn as nn


def test_downstream_scheduler_from_mmengine_module_paths():
    from minimm.optim.scheduler.lr_scheduler import LRSchedulerMixin
    from minimm.optim.scheduler.momentum_scheduler import MomentumSchedulerMixin
    from minimm.optim.scheduler.param_scheduler import INF, _ParamScheduler
    from minimm.registry import PARAM_SCHEDULERS

    class QuadraticWarmupParamScheduler(_ParamScheduler):
        """v_t = base * (t + 1)^2 / T^2 for t < T = end - begin, written chainably."""

        def __init__(self, optimizer, param_name, begin=0, end=INF, last_step=-1, by_epoch=True,
                     verbose=False):
            if end >= INF:
                raise ValueError('end must be set')
            self.total_iters = end - begin
            super().__init__(optimizer=optimizer, param_name=param_name, begin=begin, end=end,
                             last_step=last_step, by_epoch=by_epoch, verbose=verbose)

        def _get_value(self):
            step = (2 * self.last_step + 1) / self.total_iters ** 2
            if self.last_step == 0:
                return [base * step for base in self.base_values]
            return [group[self.param_name] + base * step
                    for base, group in zip(self.base_values, self.optimizer.param_groups)]

    @PARAM_SCHEDULERS.register_module(force=True)
    class QuadraticWarmupLR(LRSchedulerMixin, QuadraticWarmupParamScheduler):
        pass

    @PARAM_SCHEDULERS.register_module(force=True)
    class QuadraticWarmupMomentum(MomentumSchedulerMixin, QuadraticWarmupParamScheduler):
        pass

    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.5, momentum=0.9)
    lr = PARAM_SCHEDULERS.build(dict(type='QuadraticWarmupLR', optimizer=optimizer, end=4,
                                     by_epoch=False))
    mom = QuadraticWarmupMomentum(optimizer, end=4, by_epoch=False)
    for t in range(4):
        group = optimizer.param_groups[0]
        assert group['lr'] == pytest.approx(0.5 * (t + 1) ** 2 / 16)
        assert group['momentum'] == pytest.approx(0.9 * (t + 1) ** 2 / 16)
        optimizer.step()
        lr.step()
        mom.step()
    # The classes keep their names and live where MMEngine puts them.
    from minimm.optim.scheduler import CosineAnnealingLR, LinearMomentum
    assert CosineAnnealingLR.__module__ == 'minimm.optim.scheduler.lr_scheduler'
    assert LinearMomentum.__module__ == 'minimm.optim.scheduler.momentum_scheduler'


def test_is_model_wrapper():
    from minimm.model import MMDistributedDataParallel, is_model_wrapper
    from minimm.registry import MODEL_WRAPPERS, Registry

    model = nn.Linear(2, 2)
    assert not is_model_wrapper(model)
    assert is_model_wrapper(nn.DataParallel(model))
    assert MODEL_WRAPPERS.get('MMDistributedDataParallel') is MMDistributedDataParallel
    assert MODEL_WRAPPERS.get('DistributedDataParallel') is nn.parallel.DistributedDataParallel

    class MyWrapper(nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module

    mine = Registry('model_wrapper')
    mine.register_module(module=MyWrapper)
    assert is_model_wrapper(MyWrapper(model), registry=mine)
    assert not is_model_wrapper(MyWrapper(model))
