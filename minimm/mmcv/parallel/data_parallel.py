"""MMDataParallel, as MMCV 1.7's: ``DataParallel`` with ``train_step``/``val_step``, for one GPU or
the CPU (single-process training; several GPUs need ``MMDistributedDataParallel``).

Left out compared with MMCV 1.7: ``DataContainer`` (minimm's batches are plain tensors and dicts,
which torch's own scatter moves to the GPU).
"""
from itertools import chain

from torch.nn.parallel import DataParallel

from .registry import MODULE_WRAPPERS


@MODULE_WRAPPERS.register_module()
class MMDataParallel(DataParallel):

    def __init__(self, *args, dim: int = 0, **kwargs):
        super().__init__(*args, dim=dim, **kwargs)
        self.dim = dim

    def train_step(self, *inputs, **kwargs):
        return self._step(self.module.train_step, inputs, kwargs)

    def val_step(self, *inputs, **kwargs):
        return self._step(self.module.val_step, inputs, kwargs)

    def _step(self, step, inputs, kwargs):
        """``step`` (the module's ``train_step`` or ``val_step``) on the inputs moved to the GPU."""
        if not self.device_ids:  # CPU: nothing to move
            return step(*inputs, **kwargs)
        assert len(self.device_ids) == 1, \
            ('MMDataParallel only supports single GPU training, if you need to train with '
             'multiple GPUs, please use MMDistributedDataParallel instead.')
        for t in chain(self.module.parameters(), self.module.buffers()):
            if t.device != self.src_device_obj:
                raise RuntimeError(
                    f'module must have its parameters and buffers on device '
                    f'{self.src_device_obj} (device_ids[0]) but found one of them on device: '
                    f'{t.device}')
        inputs, kwargs = self.scatter(inputs, kwargs, self.device_ids)
        return step(*inputs[0], **kwargs[0])
