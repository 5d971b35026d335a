"""DistSamplerSeedHook, as MMCV 1.7's: ``set_epoch(epoch)`` on the sampler before every epoch,
since a ``DistributedSampler`` shuffles with ``seed + epoch``. Left out: nothing."""
from .hook import HOOKS, Hook


@HOOKS.register_module()
class DistSamplerSeedHook(Hook):

    def before_epoch(self, runner) -> None:
        loader = runner.data_loader
        if hasattr(loader.sampler, 'set_epoch'):
            loader.sampler.set_epoch(runner.epoch)
        elif hasattr(loader.batch_sampler.sampler, 'set_epoch'):
            loader.batch_sampler.sampler.set_epoch(runner.epoch)
