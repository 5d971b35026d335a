"""DistSamplerSeedHook: tell the sampler which epoch it is, so each epoch shuffles differently.

``DefaultSampler`` shuffles with a generator seeded ``seed + epoch``; without this hook every epoch
would see the same order. In distributed training it also keeps the ranks' shuffles in step, which
is where the name comes from. Same behaviour as MMEngine.
"""
from ..registry import HOOKS
from .hook import Hook


@HOOKS.register_module()
class DistSamplerSeedHook(Hook):
    """Call ``set_epoch(runner.epoch)`` on the train dataloader's sampler before each epoch."""

    priority = 'NORMAL'
    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {'before_train_epoch': '-> sampler'}

    def before_train_epoch(self, runner) -> None:
        loader = runner.train_loop.dataloader
        sampler = getattr(loader, 'sampler', None)
        if hasattr(sampler, 'set_epoch'):
            sampler.set_epoch(runner.epoch)
            return
        # A DataLoader built with a batch_sampler keeps the index sampler inside it.
        batch_sampler = getattr(loader, 'batch_sampler', None)
        if hasattr(getattr(batch_sampler, 'sampler', None), 'set_epoch'):
            batch_sampler.sampler.set_epoch(runner.epoch)
