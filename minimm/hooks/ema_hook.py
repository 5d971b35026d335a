"""EMAHook: keep an exponential moving average of the weights, and validate and save with it.

The averaged copy (``self.ema_model``, one of ``minimm/model/averaged_model.py``) lives next to
the model the optimizer trains ("raw" weights). This hook decides *when* each of them is used:

* ``before_run``: build the averaged model from the (unwrapped) model.
* ``after_train_iter``: one averaging step (``ema_model.update_parameters``), once the run has
  reached ``begin_iter``/``begin_epoch``; before that, the raw weights are copied into the copy
  and its ``steps`` counter is left at 0.
* ``before/after_val_epoch`` and ``before/after_test_epoch``: swap the EMA weights into the model
  and back, so evaluation sees the EMA and training continues on the raw weights.
* ``before_save_checkpoint`` (rank 0 only): ``checkpoint['ema_state_dict']`` gets the averaged
  model's state and then the two are swapped key by key, so the file's ``state_dict`` holds the
  **EMA** weights (load it to deploy) and ``ema_state_dict`` holds the **raw** weights (plus
  ``steps``).
* ``after_load_checkpoint``: when resuming from a checkpoint with ``ema_state_dict``, swap back
  and restore the averaged model (the runner then loads the raw weights into the model), so a
  resumed run continues exactly; otherwise (``load_from`` for fine-tuning or testing, or an old
  checkpoint without EMA) the averaged copy starts from the checkpoint's ``state_dict``, with a
  warning when there is no ``ema_state_dict``.

Priority: the optimizer steps inside ``train_step``, before any ``after_train_iter`` hook, so the
MMCV 1.x puzzle of placing EMA between the optimizer and checkpoint hooks (mmcv#689) is gone; the
class priority is NORMAL, and MMDetection's configs pin 49 to run it before the other NORMAL hooks.

Two minimm additions are hooks of their own, added to ``custom_hooks`` beside this one (so that
without them files and numbers are MMEngine's): ``EMAOnlyCheckpointHook`` (an EMA-only
``<name>_ema.pth`` beside every checkpoint) and ``RawWeightsEvalHook`` (the raw weights are
evaluated too, logged as ``raw/<name>``).

``ema_dtype`` (a minimm addition, passed to the averaged model): the average is kept in another
dtype than the model's, e.g. ``EMAHook(ema_dtype='float32')`` for a model trained in bf16. Where
the two dtypes differ, validation sees the average cast to the model's dtype (the raw weights are
kept aside and put back after), and a checkpoint's ``state_dict`` holds the average in the model's
dtype (so does ``EMAOnlyCheckpointHook``'s file), ``ema_state_dict`` the average in ``ema_dtype``
(not swapped: a bf16 slot would lose its precision), and ``raw_state_dict`` the raw weights of
those entries; resuming restores all three.

Different from MMEngine, on purpose: bad ``begin_*`` arguments raise ValueError (MMEngine
asserts); ``ema_state_dict`` is stored on the CPU like ``state_dict``; loading a checkpoint without
``ema_state_dict`` warns also when not resuming (MMEngine warns only when resuming). Left out:
nothing of the behaviour.
"""
import itertools
from typing import Dict, Optional

import torch

from ..checkpoint import load_state_dict, unwrap_model, weights_to_cpu
from ..registry import HOOKS, MODELS
from .hook import DATA_BATCH, Hook


@HOOKS.register_module()
class EMAHook(Hook):
    """Average the model's weights during training; evaluate and checkpoint with the average.

    Args:
        ema_type: the averaged-model class in ``MODELS`` (``'ExponentialMovingAverage'``,
            ``'MomentumAnnealingEMA'``, ``'StochasticWeightAverage'``; minimm's
            ``'PowerFunctionEMA'``, which takes ``sigma_rel`` or ``gamma``).
        strict_load: load averaged weights from checkpoints strictly (default False, as MMEngine
            since v0.3, so checkpoints of slightly different models still load).
        begin_iter / begin_epoch: start averaging at this iteration / epoch (set at most one).
        **kwargs: for the averaged model: ``momentum`` (the weight of the *new* value, e.g.
            0.0002), ``interval``, ``device``, ``update_buffers``, ``gamma``, ``ema_dtype``.
    """

    priority = 'NORMAL'
    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {
        'before_run': 'model -> ema',
        'before_train': '',
        'after_train_iter': 'model -> ema',
        'before_val_epoch after_val_epoch before_test_epoch after_test_epoch':
            'model.params ema.params -> model.params ema.params',  # the swap
        'before_save_checkpoint': ('ema checkpoint:state_dict -> checkpoint:state_dict '
                                   'checkpoint:ema_state_dict'),
        'after_load_checkpoint': ('checkpoint:state_dict checkpoint:ema_state_dict -> '
                                  'checkpoint:state_dict ema'),
    }

    def __init__(self, ema_type: str = 'ExponentialMovingAverage', strict_load: bool = False,
                 begin_iter: int = 0, begin_epoch: int = 0, **kwargs):
        for extra, hook in (('save_ema_checkpoint', 'EMAOnlyCheckpointHook'),
                            ('eval_raw_and_ema', 'RawWeightsEvalHook')):
            if extra in kwargs:
                raise TypeError(f'EMAHook({extra}=...) is now a hook of its own: add '
                                f"dict(type='{hook}') to custom_hooks beside EMAHook")
        self.strict_load = strict_load
        self.ema_cfg = dict(type=ema_type, **kwargs)
        if begin_iter != 0 and begin_epoch != 0:
            raise ValueError(f'`begin_iter` and `begin_epoch` should not be both set, but got '
                             f'begin_iter={begin_iter}, begin_epoch={begin_epoch}')
        if begin_iter < 0 or begin_epoch < 0:
            raise ValueError(f'`begin_iter` and `begin_epoch` must be >= 0, but got '
                             f'begin_iter={begin_iter}, begin_epoch={begin_epoch}')
        self.begin_iter = begin_iter
        self.begin_epoch = begin_epoch
        # Without begin_epoch, averaging starts by iteration (at iteration 0 by default).
        self.enabled_by_epoch = self.begin_epoch > 0
        self._raw_aside = None  # during validation: the raw weights of entries whose dtypes differ

    def before_run(self, runner) -> None:
        self.src_model = unwrap_model(runner.model)
        self.ema_model = MODELS.build(self.ema_cfg, default_args=dict(model=self.src_model))
        runner.logger.info(f'EMA: {self.ema_model.describe(self.src_model)}')

    def before_train(self, runner) -> None:
        if self.enabled_by_epoch and self.begin_epoch > runner.max_epochs:
            raise ValueError(f'begin_epoch ({self.begin_epoch}) should be smaller than or equal '
                             f'to max_epochs ({runner.max_epochs})')
        if not self.enabled_by_epoch and self.begin_iter > runner.max_iters:
            raise ValueError(f'begin_iter ({self.begin_iter}) should be smaller than or equal '
                             f'to max_iters ({runner.max_iters})')

    def after_train_iter(self, runner, batch_idx: int, data_batch: DATA_BATCH = None,
                         outputs: Optional[dict] = None) -> None:
        if self._ema_started(runner):
            self.ema_model.update_parameters(self.src_model)
        else:
            # Not started yet: the copy follows the raw weights and `steps` stays 0, so the
            # first averaging call copies once more and averaging starts from that moment.
            ema_params = self.ema_model.module.state_dict()
            src_params = self.src_model.state_dict()
            with torch.no_grad():
                for name, param in ema_params.items():
                    param.copy_(src_params[name])

    def before_val_epoch(self, runner) -> None:
        self._swap_ema_parameters()

    def after_val_epoch(self, runner, metrics: Optional[Dict[str, float]] = None) -> None:
        self._swap_ema_parameters()

    def before_test_epoch(self, runner) -> None:
        self._swap_ema_parameters()

    def after_test_epoch(self, runner, metrics: Optional[Dict[str, float]] = None) -> None:
        self._swap_ema_parameters()

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        checkpoint['ema_state_dict'] = weights_to_cpu(self.ema_model.state_dict())
        # Swap dict entries, not tensors (the state_dict shares the model's tensors): state_dict
        # now holds the EMA weights, to deploy, and ema_state_dict the raw ones.
        self._swap_ema_state_dict(checkpoint)

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        if 'ema_state_dict' in checkpoint and runner._resume:
            # The file's state_dict holds the EMA weights: swap back, so the runner loads the raw
            # weights into the model, and restore the averaged model (with its `steps`).
            self._swap_ema_state_dict(checkpoint)
            checkpoint.pop('raw_state_dict', None)
            self.ema_model.load_state_dict(checkpoint['ema_state_dict'], strict=self.strict_load)
        else:
            if 'ema_state_dict' not in checkpoint:
                action = 'Resuming from' if runner._resume else 'Loading'
                runner.logger.warning(f'{action} a checkpoint without `ema_state_dict`: EMAHook '
                                      'starts the averaged model from a copy of its `state_dict`.')
            load_state_dict(self.ema_model.module, checkpoint['state_dict'],
                            strict=self.strict_load, logger=runner.logger,
                            what="EMA model (EMAHook's averaged copy)")

    @torch.no_grad()
    def _swap_ema_parameters(self) -> None:
        """Swap the values of the model's parameters (and buffers, when they are averaged;
        otherwise the copy's buffers mirror the model's anyway) with the averaged model's. An
        entry kept in another dtype (``ema_dtype``) is not swapped, which would round the average:
        the model's raw value is put aside and the average copied in, and the next call puts the
        raw value back."""
        avg_param = (itertools.chain(self.ema_model.module.parameters(),
                                     self.ema_model.module.buffers())
                     if self.ema_model.update_buffers else self.ema_model.module.parameters())
        src_param = (itertools.chain(self.src_model.parameters(), self.src_model.buffers())
                     if self.ema_model.update_buffers else self.src_model.parameters())
        putting_back, aside = self._raw_aside is not None, []
        # Copy values, never rebind tensors: the averaging plan and the optimizer hold them.
        for p_avg, p_src in zip(avg_param, src_param):
            if p_avg.dtype != p_src.dtype:
                if putting_back:
                    p_src.copy_(self._raw_aside.pop(0))
                else:
                    aside.append(p_src.clone())
                    p_src.copy_(p_avg)
                continue
            tmp = p_avg.clone()
            p_avg.copy_(p_src)
            p_src.copy_(tmp)
        self._raw_aside = None if putting_back else aside

    @staticmethod
    def _swap_ema_state_dict(checkpoint: dict) -> None:
        """Saving: ``state_dict`` gets the average, ``ema_state_dict`` the raw weights. Entries
        whose dtypes differ instead keep the average in ``ema_state_dict``, put it into
        ``state_dict`` in the model's dtype and move the raw weight to ``raw_state_dict``.
        Loading (``raw_state_dict`` present or not) undoes exactly that."""
        model_state = checkpoint['state_dict']
        ema_state = checkpoint['ema_state_dict']
        loading = 'raw_state_dict' in checkpoint
        raw_state = checkpoint.setdefault('raw_state_dict', {})
        for key in ema_state:
            if not key.startswith('module.'):
                continue
            name = key[len('module.'):]
            if name in raw_state and loading:
                model_state[name] = raw_state[name]
            elif ema_state[key].dtype != model_state[name].dtype and not loading:
                raw_state[name] = model_state[name]
                model_state[name] = ema_state[key].to(model_state[name].dtype)
            else:
                ema_state[key], model_state[name] = model_state[name], ema_state[key]
        if not raw_state:
            del checkpoint['raw_state_dict']

    def _ema_started(self, runner) -> bool:
        if self.enabled_by_epoch:
            return runner.epoch + 1 >= self.begin_epoch
        return runner.iter + 1 >= self.begin_iter
