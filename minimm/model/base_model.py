"""BaseModel and BaseDataPreprocessor: the contract between a model and the training loops.

In MMEngine the loops never call ``model(...)`` directly. They call three methods:

* ``train_step(data, optim_wrapper)`` — preprocess, forward in ``'loss'`` mode, reduce the loss
  dict to one scalar (:meth:`BaseModel.parse_losses`), backward + step through the optim wrapper,
  and return the ``log_vars`` that ``RuntimeInfoHook`` records as ``train/loss`` etc.;
* ``val_step(data)`` / ``test_step(data)`` — preprocess, forward in ``'predict'`` mode, return the
  predictions the evaluator consumes.

A model only writes ``forward(inputs, data_samples=None, mode='tensor')``. The batch the DataLoader
produced first goes through ``data_preprocessor``, whose base version only moves every tensor to
the model's device (real ones also normalise and stack images).

Left out compared with MMEngine: ``BaseModule``'s weight-initialisation machinery (``init_cfg``
is not supported; :meth:`BaseModel.init_weights` only calls the children's ``init_weights``),
``BaseDataElement`` data samples, and NPU/MLU/MUSA devices.
"""
from abc import ABCMeta, abstractmethod
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Dict, Optional, Tuple, Union

import torch
from torch import nn

from minimm.registry import MODELS

__all__ = ['BaseDataPreprocessor', 'BaseModel']


def _device_of_to_call(*args, **kwargs) -> Optional[torch.device]:
    """The device a ``module.to(...)`` call moves to, or ``None`` if it only changes the dtype."""
    device = torch._C._nn._parse_to(*args, **kwargs)[0]
    return None if device is None else torch.device(device)


def _cuda_device(device: Union[int, torch.device, None]) -> torch.device:
    """The device a ``module.cuda(device)`` call moves to."""
    if device is None:
        return torch.device('cuda', torch.cuda.current_device())
    return torch.device('cuda', device) if isinstance(device, int) else torch.device(device)


@MODELS.register_module()
class BaseDataPreprocessor(nn.Module):
    """Move a batch (tensors nested in dicts, lists and tuples) to the model's device.

    The preprocessor has no parameters, so it cannot read its device off them; it remembers the
    device from ``to()``/``cuda()``/``cpu()`` instead, which :class:`BaseModel` forwards to it.

    Args:
        non_blocking: copy host-to-device asynchronously (useful with ``pin_memory=True``).
    """

    def __init__(self, non_blocking: bool = False):
        super().__init__()
        self._non_blocking = non_blocking
        self._device = torch.device('cpu')

    @property
    def device(self) -> torch.device:
        return self._device

    def cast_data(self, data: Any) -> Any:
        """Copy ``data`` with every tensor moved to :attr:`device`; other leaves are kept."""
        # Called on every batch, so the common cases come first, tested by exact type: checking
        # against the Mapping and Sequence ABCs costs more than the rest of the work here.
        if isinstance(data, torch.Tensor):
            if data.device == self._device:  # what .to() would return, without parsing its args
                return data
            return data.to(self._device, non_blocking=self._non_blocking)
        if type(data) in (list, tuple):
            items = [self.cast_data(item) for item in data]
            return items if type(data) is list else tuple(items)
        if isinstance(data, Mapping):
            return {key: self.cast_data(value) for key, value in data.items()}
        if isinstance(data, (str, bytes)) or data is None:
            return data
        if isinstance(data, tuple) and hasattr(data, '_fields'):  # a namedtuple keeps its type
            return type(data)(*(self.cast_data(item) for item in data))
        if isinstance(data, Sequence):
            return type(data)(self.cast_data(item) for item in data)
        return data

    def forward(self, data: Any, training: bool = False) -> Any:
        """Prepare one batch; ``training`` lets subclasses augment only during training."""
        return self.cast_data(data)

    def to(self, *args, **kwargs) -> 'BaseDataPreprocessor':
        device = _device_of_to_call(*args, **kwargs)
        if device is not None:
            self._device = device
        return super().to(*args, **kwargs)

    def cuda(self, device: Union[int, torch.device, None] = None) -> 'BaseDataPreprocessor':
        self._device = _cuda_device(device)
        return super().cuda(device)

    def cpu(self) -> 'BaseDataPreprocessor':
        self._device = torch.device('cpu')
        return super().cpu()


def _as_preprocessor(given: Union[dict, nn.Module, None]) -> nn.Module:
    """A module is used as it is; a config (``None``: the default one) is built by ``MODELS``."""
    if isinstance(given, nn.Module):
        return given
    cfg = dict(type='BaseDataPreprocessor') if given is None else given
    if not isinstance(cfg, dict):
        raise TypeError('data_preprocessor should be a `dict` or `nn.Module` instance, '
                        f'but got {type(given).__name__}')
    return MODELS.build(cfg)


class BaseModel(nn.Module, metaclass=ABCMeta):
    """Base class of trainable models: implements the step methods on top of ``forward``.

    Args:
        data_preprocessor: a module, or a config dict built from ``MODELS``; ``None`` means
            ``dict(type='BaseDataPreprocessor')``.
        init_cfg: MMEngine's weight-initialisation config. minimm does not implement it; anything
            but ``None`` is rejected so that a config relying on it does not silently train from
            PyTorch's default initialisation.
    """

    def __init__(self, data_preprocessor: Union[dict, nn.Module, None] = None,
                 init_cfg: Optional[Union[dict, list]] = None):
        super().__init__()
        if init_cfg is not None:
            raise NotImplementedError(
                f'init_cfg={init_cfg!r}: minimm does not implement MMEngine\'s weight '
                'initialisers; initialise the weights in the model\'s own init_weights() instead')
        self.init_cfg = init_cfg
        self._is_init = False
        self.data_preprocessor = _as_preprocessor(data_preprocessor)

    @property
    def is_init(self) -> bool:
        return self._is_init

    def init_weights(self) -> None:
        """Call ``init_weights`` on each child that has one, once (what the Runner triggers)."""
        if self._is_init:
            return
        for child in self.children():
            if hasattr(child, 'init_weights') and not getattr(child, 'is_init', False):
                child.init_weights()
        self._is_init = True

    def train_step(self, data: Union[dict, tuple, list],
                   optim_wrapper) -> Dict[str, torch.Tensor]:
        """One training iteration: preprocess, loss forward, backward + step; return log_vars."""
        # optim_context enables autocast (AmpOptimWrapper) and skips gradient sync on
        # accumulation steps; the backward itself happens in update_params, outside it.
        with optim_wrapper.optim_context(self):
            data = self.data_preprocessor(data, True)
            losses = self._run_forward(data, mode='loss')
        parsed_losses, log_vars = self.parse_losses(losses)
        if torch.is_grad_enabled() and not parsed_losses.requires_grad:  # torch's words are vague
            raise RuntimeError(
                f"{type(self).__name__}.forward(mode='loss') returned losses without a gradient "
                f"({', '.join(key for key in losses if 'loss' in key)}): compute them from the "
                'model\'s outputs, without .detach(), .item() or torch.no_grad()')
        optim_wrapper.update_params(parsed_losses)
        return log_vars

    def val_step(self, data: Union[dict, tuple, list]) -> list:
        """Predictions for one validation batch (no gradients are taken by the loop)."""
        data = self.data_preprocessor(data, False)
        return self._run_forward(data, mode='predict')

    def test_step(self, data: Union[dict, tuple, list]) -> list:
        """Predictions for one test batch; the same as :meth:`val_step`."""
        data = self.data_preprocessor(data, False)
        return self._run_forward(data, mode='predict')

    def parse_losses(self, losses: Dict[str, Any]) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        """Reduce the loss dict from ``forward(mode='loss')`` to the scalar to back-propagate.

        Each value (a tensor, or a list of tensors that are summed) is averaged to a scalar. The
        total is the sum of the entries whose *name contains* ``'loss'``; others (``'acc'``...)
        are only logged. Returns ``(loss, log_vars)`` with ``log_vars`` an OrderedDict starting
        with ``'loss'``; its values are still tensors in the graph, as in MMEngine.
        """
        if not isinstance(losses, Mapping):
            raise TypeError(f"forward(mode='loss') must return a dict of losses, "
                            f'but got {type(losses).__name__}')
        log_vars = []
        for loss_name, loss_value in losses.items():
            if isinstance(loss_value, torch.Tensor):
                log_vars.append((loss_name, _mean(loss_value)))
            elif isinstance(loss_value, (list, tuple)) and loss_value and \
                    all(isinstance(item, torch.Tensor) for item in loss_value):
                log_vars.append((loss_name, _sum(_mean(item) for item in loss_value)))
            else:
                raise TypeError(f'{loss_name} is not a tensor or list of tensors')
        loss = None
        for key, value in log_vars:
            if 'loss' in key:
                loss = value if loss is None else loss + value
        if loss is None:
            raise KeyError(f"forward(mode='loss') returned no entry whose name contains 'loss' "
                           f'(got keys {list(losses)}), so there is nothing to back-propagate; '
                           "name the loss terms 'loss' or 'loss_*'")
        log_vars.insert(0, ('loss', loss))
        return loss, OrderedDict(log_vars)

    def _run_forward(self, data: Union[dict, tuple, list], mode: str) -> Any:
        """Call ``forward``: a dict is unpacked as keyword arguments, a list/tuple as positional."""
        if isinstance(data, dict):
            return self(**data, mode=mode)
        if isinstance(data, (list, tuple)):
            return self(*data, mode=mode)
        raise TypeError('Output of `data_preprocessor` should be list, tuple or dict, '
                        f'but got {type(data).__name__}')

    @abstractmethod
    def forward(self, inputs: Any, data_samples: Any = None, mode: str = 'tensor') -> Any:
        """``mode='loss'`` -> dict of losses; ``'predict'`` -> list of predictions;
        ``'tensor'`` -> raw outputs (logits)."""

    # The data preprocessor has no parameters to tell it where the model went: keep it informed.
    def to(self, *args, **kwargs) -> 'BaseModel':
        self._set_device(_device_of_to_call(*args, **kwargs))
        return super().to(*args, **kwargs)

    def cuda(self, device: Union[int, torch.device, None] = None) -> 'BaseModel':
        self._set_device(_cuda_device(device))
        return super().cuda(device)

    def cpu(self) -> 'BaseModel':
        self._set_device(torch.device('cpu'))
        return super().cpu()

    def _set_device(self, device: Optional[torch.device]) -> None:
        if device is None:
            return
        for module in self.modules():
            if isinstance(module, BaseDataPreprocessor):
                module._device = device


# MMEngine writes ``loss.mean()`` and ``sum(losses)``. The values below are the same, but a
# scalar loss is not averaged again and the sum does not start from ``0 + ...``: each of those
# would add a node to the autograd graph, run forward and backward at every iteration.
def _mean(value: torch.Tensor) -> torch.Tensor:
    return value if value.dim() == 0 else value.mean()


def _sum(values) -> torch.Tensor:
    values = list(values)  # never empty: parse_losses checks that first
    total = values[0]
    for value in values[1:]:
        total = total + value
    return total
