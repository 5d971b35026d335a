"""MMDataParallel: ``DataParallel`` that also forwards ``train_step`` and ``val_step``.

MMCV 1.x runners never call ``model(...)``; they call ``model.train_step(batch, optimizer)``. Plain
``DataParallel`` only wraps ``forward``, so this subclass adds the two step methods: on the CPU
(no ``device_ids``) they call the module directly; with one GPU they first move the batch there.
More GPUs need ``MMDistributedDataParallel`` (one process per GPU).
Left out compared with MMCV 1.7: ``DataContainer`` (minimm's batches are plain tensors and dicts,
which torch's own scatter moves to the GPU).
"""
from itertools import chain

from torch.nn.parallel import DataParallel

from .registry import MODULE_WRAPPERS


@MODULE_WRAPPERS.register_module()
class MMDataParallel(DataParallel):

    def __init__(self, *args, dim=0, **kwargs):
        super().__init__(*args, dim=dim, **kwargs)
        self.dim = dim

    def _check_one_gpu(self):
        assert len(self.device_ids) == 1, \
            ('MMDataParallel only supports single GPU training, if you need to train with '
             'multiple GPUs, please use MMDistributedDataParallel instead.')
        device = self.src_device_obj
        stray = next((t for t in chain(self.module.parameters(), self.module.buffers())
                      if t.device != device), None)
        if stray is not None:
            raise RuntimeError(f'module must have its parameters and buffers on device {device} '
                               f'(device_ids[0]) but found one of them on device: {stray.device}')

    def _call_on_device(self, method, inputs, kwargs):
        if not self.device_ids:  # on the CPU there is nothing to move
            return method(*inputs, **kwargs)
        self._check_one_gpu()
        moved_inputs, moved_kwargs = self.scatter(inputs, kwargs, self.device_ids)
        return method(*moved_inputs[0], **moved_kwargs[0])

    def train_step(self, *inputs, **kwargs):
        return self._call_on_device(self.module.train_step, inputs, kwargs)

    def val_step(self, *inputs, **kwargs):
        return self._call_on_device(self.module.val_step, inputs, kwargs)
