"""DistSamplerSeedHook: reshuffle a distributed sampler differently every epoch, as MMCV 1.7's.

``DistributedSampler`` draws its permutation from ``seed + epoch``; without ``set_epoch`` every
epoch would see the same order.
"""
from .hook import HOOKS, Hook


@HOOKS.register_module()
class DistSamplerSeedHook(Hook):

    def before_epoch(self, runner) -> None:
        loader = runner.data_loader
        if hasattr(loader.sampler, 'set_epoch'):
            loader.sampler.set_epoch(runner.epoch)
        elif hasattr(loader.batch_sampler.sampler, 'set_epoch'):
            loader.batch_sampler.sampler.set_epoch(runner.epoch)
