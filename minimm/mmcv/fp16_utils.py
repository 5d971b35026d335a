"""Mixed precision the MMCV 1.x way: ``wrap_fp16_model`` switches it on, ``@auto_fp16`` applies it.

A model opts in by giving its modules an ``fp16_enabled = False`` attribute and decorating its
``forward`` with ``@auto_fp16()``; ``Fp16OptimizerHook`` calls ``wrap_fp16_model`` in
``before_run``, which sets every such flag to True. From then on the decorated methods run under
``torch.autocast``: float16 on CUDA, bfloat16 on the CPU (CPU autocast has no float16).

Left out compared with MMCV 1.7: the explicit casting of the arguments named in ``apply_to``
(autocast casts each op's inputs itself, so ``apply_to`` is accepted and ignored), ``force_fp32``
and the torch < 1.6 path (``.half()`` models with fp32 master weights, ``LossScaler``).
"""
import functools

import torch
from torch import nn


def wrap_fp16_model(model: nn.Module) -> None:
    """Set ``fp16_enabled = True`` on every submodule that has the attribute (as MMCV 1.7 on
    torch >= 1.6: no ``.half()``; autocast does the casting)."""
    for module in model.modules():
        if hasattr(module, 'fp16_enabled'):
            module.fp16_enabled = True


def _to_float32(outputs):
    if isinstance(outputs, torch.Tensor):
        return outputs.float() if outputs.dtype in (torch.float16, torch.bfloat16) else outputs
    if isinstance(outputs, dict):
        return type(outputs)((k, _to_float32(v)) for k, v in outputs.items())
    if isinstance(outputs, (list, tuple)):
        return type(outputs)(_to_float32(v) for v in outputs)
    return outputs


def auto_fp16(apply_to=None, out_fp32: bool = False, supported_types=(nn.Module, )):
    """Decorator for a module method: run it under autocast once ``fp16_enabled`` is True.

    ``out_fp32=True`` casts half/bfloat16 tensors in the output back to float32.
    """

    def decorator(method):

        @functools.wraps(method)
        def wrapper(*args, **kwargs):
            if not isinstance(args[0], supported_types):
                raise TypeError('@auto_fp16 can only be used to decorate the method of those '
                                f'classes {supported_types}')
            if not getattr(args[0], 'fp16_enabled', False):
                return method(*args, **kwargs)
            on_cuda = torch.cuda.is_available()
            with torch.autocast('cuda' if on_cuda else 'cpu',
                                dtype=torch.float16 if on_cuda else torch.bfloat16):
                outputs = method(*args, **kwargs)
            return _to_float32(outputs) if out_fp32 else outputs

        return wrapper

    return decorator
