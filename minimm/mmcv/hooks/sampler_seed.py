"""DistSamplerSeedHook: tell the sampler which epoch it is, before every epoch.

A ``DistributedSampler`` shuffles with ``seed + epoch``; without ``set_epoch`` every epoch would
see the data in the same order. The sampler is looked for on the loader, then on its batch sampler.
"""
from .hook import HOOKS, Hook


@HOOKS.register_module()
class DistSamplerSeedHook(Hook):
    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {'before_train_epoch before_val_epoch': '-> sampler'}

    def before_epoch(self, runner):
        sampler = runner.data_loader.sampler
        if not hasattr(sampler, 'set_epoch'):
            # the loader was given a batch sampler: the shuffling sampler sits inside it
            sampler = runner.data_loader.batch_sampler.sampler
        if hasattr(sampler, 'set_epoch'):
            sampler.set_epoch(runner.epoch)
