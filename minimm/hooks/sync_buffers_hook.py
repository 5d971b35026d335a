"""SyncBuffersHook: make every rank's BatchNorm statistics the same before they are used.

DistributedDataParallel averages *gradients*, so parameters stay identical across ranks, but
*buffers* — BatchNorm's ``running_mean``/``running_var``, updated in each rank's forward from its
own batches — drift apart (minimm's wrapper, like MMEngine's Runner, turns off DDP's per-forward
``broadcast_buffers``). This hook averages them across ranks with
:func:`minimm.dist.all_reduce_params` (``op='mean'``: one packed all-reduce per dtype):

* after every training epoch, so validation and the checkpoint see the same statistics on every
  rank;
* before a validation epoch, unless ``after_train_epoch`` just did it — with
  ``IterBasedTrainLoop`` validation happens in the middle of the single training "epoch", and
  without this the buffers would not be synced before it (mmengine#517, fixed by PR#982).

Integer buffers (``num_batches_tracked``) are averaged in integer arithmetic, rounded to the
nearest integer instead of MMEngine's truncation; equal counts stay exact (see
``minimm/dist/collectives.py``). Whether the run is distributed is decided when the hook is built
(after the Runner initialised the process group), as in MMEngine.

**The averaged copies too** (different from MMEngine, whose hook syncs only the model): the
copies other hooks keep (EMAHook's ``ema_model``, PostHocEMAHook's ``ema_models``) hold buffers
of their own — mirrored from each rank's model every iteration, or averaged from them — which
differ between ranks just as the model's do. They go into the same packed all-reduce, so
validation, the checkpoint's ``state_dict`` and every rank see the same EMA statistics. In MMEngine
0.10.7 they stay per-rank and the checkpoint keeps rank 0's (Megvii-BaseDetection/YOLOX#1176).
"""
import itertools

from ..dist import all_reduce_params, is_distributed
from ..registry import HOOKS
from .agreement_check import averaged_copies
from .hook import Hook


@HOOKS.register_module()
class SyncBuffersHook(Hook):
    """Average the model's buffers across ranks after each train epoch and before validation."""

    priority = 'NORMAL'
    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {'after_train_epoch before_val_epoch': 'model.buffers -> model.buffers'}

    def __init__(self) -> None:
        self.distributed = is_distributed()
        # Set by after_train_epoch, so the validation right after it does not sync again.
        self.called_in_train = False

    def after_train_epoch(self, runner) -> None:
        if self.distributed:
            self._sync(runner)
            self.called_in_train = True

    def before_val_epoch(self, runner) -> None:
        if self.distributed:
            if not self.called_in_train:
                self._sync(runner)
            self.called_in_train = False

    @staticmethod
    def _sync(runner) -> None:
        # The copies' own module buffers only: their `steps` counters agree already.
        copies = [copy.module.buffers() for copy in averaged_copies(runner)]
        all_reduce_params(itertools.chain(runner.model.buffers(), *copies), op='mean')

