"""The digits CNN and dataset in MMCV 1.x's protocol, for ``configs/digits_mmcv1.py``.

An MMCV 1.x model is called three ways: ``train_step(data_batch, optimizer)`` and
``val_step`` return ``dict(loss, log_vars, num_samples)`` (the runner logs ``log_vars``, and
``OptimizerHook`` back-propagates ``loss``); ``model(return_loss=False, **data_batch)`` returns one
prediction per sample for ``single_gpu_test``. An MMCV 1.x dataset has
``evaluate(results, logger=None)``, which ``EvalHook`` calls with the predictions in dataset order.
Both reuse the MMEngine-side ``DigitsCNN`` and ``DigitsDataset``: only the protocol differs.
"""
import torch

from minimm.dataset import DigitsDataset
from minimm.model.digits_cnn import DigitsCNN
from minimm.registry import DATASETS, MODELS


@MODELS.register_module()
class MMCVDigitsClassifier(DigitsCNN):
    """``DigitsCNN`` with MMCV 1.x's ``forward(..., return_loss)``, ``train_step``, ``val_step``."""

    def forward(self, inputs, data_samples=None, return_loss: bool = True):
        if return_loss:
            return super().forward(inputs, data_samples, mode='loss')
        return list(super().forward(inputs, mode='tensor').argmax(dim=1))

    def train_step(self, data_batch: dict, optimizer=None, **kwargs) -> dict:
        loss, log_vars = self.parse_losses(self(**data_batch))
        return dict(loss=loss, log_vars={k: v.item() for k, v in log_vars.items()},
                    num_samples=len(data_batch['data_samples']))

    def val_step(self, data_batch: dict, optimizer=None, **kwargs) -> dict:
        return self.train_step(data_batch, optimizer)


@DATASETS.register_module()
class MMCVDigitsDataset(DigitsDataset):
    """``DigitsDataset`` with MMCV 1.x's ``evaluate``: top-1 ``accuracy`` in percent."""

    def evaluate(self, results, logger=None, **kwargs) -> dict:
        if len(results) != len(self):
            raise ValueError(f'got {len(results)} predictions for {len(self)} samples')
        predictions = torch.stack([torch.as_tensor(r) for r in results]).cpu()
        return dict(accuracy=(predictions == self.labels).float().mean().item() * 100)
