"""Run a real minimm.mmcv runner and record the lr/momentum each training iteration used; and
the closed forms that MMCV 1.7 documents for its lr and momentum policies alike."""
import logging
import math

import torch

from minimm.mmcv import EpochBasedRunner, Hook
from mmcv_toy import ToyModel, loader


class Probe(Hook):
    """At the LOWEST priority of ``before_train_iter`` (after every updater): the first group's
    lr and momentum, or the values of every group of every optimizer with ``all_groups``."""

    def __init__(self, all_groups=False):
        self.lr, self.momentum, self.all_groups = [], [], all_groups

    def before_train_iter(self, runner):
        lr, momentum = runner.current_lr(), runner.current_momentum()
        self.lr.append(lr if self.all_groups else lr[0])
        self.momentum.append(momentum if self.all_groups else momentum[0])


def make_optimizer(kind='sgd', lr=0.1):
    torch.manual_seed(0)
    model = ToyModel()
    if kind == 'adam':
        return model, torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.99))
    return model, torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)


def record(lr_config=None, momentum_config=None, by_iter=False, max_epochs=3, batches=4,
           optimizer=None, all_groups=False):
    """The lr and momentum lists of ``max_epochs * batches`` iterations (MMCV 1.7's setup:
    SGD(lr=0.1, momentum=0.9), hooks from register_training_hooks, no optimizer step)."""
    from minimm.mmcv import IterBasedRunner
    model, default_optimizer = make_optimizer()
    length = dict(max_iters=max_epochs * batches) if by_iter else dict(max_epochs=max_epochs)
    runner = (IterBasedRunner if by_iter else EpochBasedRunner)(
        model, optimizer=optimizer or default_optimizer, logger=logging.getLogger('probe'),
        **length)
    runner.register_training_hooks(lr_config=lr_config, momentum_config=momentum_config)
    probe = Probe(all_groups)
    runner.register_hook(probe, priority='LOWEST')
    runner.run([loader(2 * batches, 2)], [('train', 1)])
    return probe.lr, probe.momentum


def cos_anneal(start, end, f, weight=1.):
    return end + weight * (start - end) * (1 + math.cos(math.pi * f)) / 2


def cyclic_closed_form(base, it, max_iters, target_ratio, cyclic_times, step_ratio_up, gamma):
    """MMCV's cyclic schedule (lr or momentum alike) at iteration ``it``."""
    t0, t1 = target_ratio
    cycle = max_iters // cyclic_times
    up = int(step_ratio_up * cycle)
    c, scale = it % cycle, gamma ** (it // cycle)
    start, end, r0, r1 = next(ph for ph in [(0, up, 1, t0), (up, cycle, t0, t1)]
                              if ph[0] <= c < ph[1])
    # later cycles swing less: the phase starting the cycle ends lower, the other starts lower
    if start == 0:
        r1 = 1 - scale + r1 * scale
    else:
        r0 = 1 - scale + r0 * scale
    return cos_anneal(base * r0, base * r1, (c - start) / (end - start))


def step_closed_form(base, p, steps, gamma, floor):
    """``base * gamma ** (steps passed)``, at least ``floor`` (when not None)."""
    n = p // steps if isinstance(steps, int) else sum(p >= s for s in steps)
    value = base * gamma ** n
    return value if floor is None else max(value, floor)
