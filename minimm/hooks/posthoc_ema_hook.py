"""PostHocEMAHook: keep several power-function EMAs and snapshots of them, so that the EMA length
can be chosen after training (EDM2, Karras et al. 2024). A minimm addition; MMEngine has none.

Which EMA length is best is known only once training is over. This hook keeps one
:class:`~minimm.model.PowerFunctionEMA` per ``sigma_rels`` entry (EDM2 keeps two: 0.05 and 0.10),
all updated from the model in one fused pass (each weight is read once for all of them), and
every ``snapshot_interval`` iterations writes each one's weights to
``<work_dir>/posthoc_ema/sigma_<sigma>_iter_<iter>.pth``, with the number of averaging calls
(``step``), the exponent (``gamma``) and the names of the averaged entries inside (the others,
buffers mirrored from the model, are the model's at that moment). After training,
:func:`minimm.model.posthoc_ema.synthesize` (or ``minimm posthoc-ema WORK_DIR --sigma-rel 0.08``)
combines the snapshots into the EMA of any other length, as if it had been tracked.

Snapshots are written like checkpoints (minimm/checkpoint.py: a temporary file renamed into
place), and the averaged models go into every checkpoint (``posthoc_ema``), so a resumed run
continues them exactly. On several processes every rank keeps and updates its EMAs (they agree:
DDP keeps the weights equal, and SyncBuffersHook syncs their buffers with the model's) and rank 0
alone writes the snapshots; nothing reads them during training, so no rank waits for them.
The hook does not touch the model's weights: validation and checkpoints see the raw model
(combine it with EMAHook for an EMA there).
"""
import os.path as osp
from typing import Optional, Sequence

from ..checkpoint import save_checkpoint, unwrap_model, weights_to_cpu
from ..dist import is_main_process
from ..model.averaged_model import PowerFunctionEMA
from ..model.averaging_group import AveragingGroup
from ..registry import HOOKS
from ..sharded_checkpoint import is_sharded, save_sharded_checkpoint
from .hook import DATA_BATCH, Hook

SNAPSHOT_DIR = 'posthoc_ema'


def snapshot_name(sigma_rel: float, iteration: int) -> str:
    return f'sigma_{sigma_rel:.3f}_iter_{iteration:07d}.pth'


@HOOKS.register_module()
class PostHocEMAHook(Hook):
    """Keeps one PowerFunctionEMA per width and writes snapshots of them.

    Args:
        sigma_rels: the relative widths of the EMAs to keep (1 to 8 of them, each in (0, 0.3)).
        snapshot_interval: write a snapshot of each every this many iterations (and at the last).
        update_buffers, ema_dtype: as for the averaged models (see
            :class:`~minimm.model.averaged_model.BaseAveragedModel`).
    """
    priority = 'NORMAL'
    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {
        'before_run': 'model -> ema',
        'after_train_iter': 'model -> ema file:posthoc_ema/*(rank0)',
        'before_save_checkpoint': 'ema -> checkpoint:posthoc_ema',
        'after_load_checkpoint': 'checkpoint:posthoc_ema -> ema',
    }

    checked_in_init = ('sigma_rels', 'snapshot_interval')  # the config check asks (values.py)

    def __init__(self, sigma_rels: Sequence[float] = (0.05, 0.10), snapshot_interval: int = 1000,
                 update_buffers: bool = False, ema_dtype=None) -> None:
        if not isinstance(sigma_rels, (list, tuple)):
            raise ValueError(f'PostHocEMAHook: sigma_rels={sigma_rels!r} must be a list or a tuple '
                             'of widths in (0, 0.3)')
        sigma_rels = tuple(sigma_rels)
        most = AveragingGroup.MAX_MODELS
        if not 1 <= len(sigma_rels) <= most or len(set(sigma_rels)) != len(sigma_rels):
            raise ValueError(f'PostHocEMAHook: sigma_rels={sigma_rels!r} must hold 1 to '
                             f'{most} different widths')
        named = {}  # a width's snapshots and checkpoint entry are named by it to 3 decimals
        for sigma_rel in (s for s in sigma_rels if isinstance(s, (float, int))):
            name = f'{sigma_rel:.3f}'
            if name in named:
                raise ValueError(f'PostHocEMAHook: sigma_rels {named[name]!r} and {sigma_rel!r} '
                                 f'would both be saved as sigma_{name}: give widths that differ '
                                 'within 3 decimals')
            named[name] = sigma_rel
        if (isinstance(snapshot_interval, bool) or not isinstance(snapshot_interval, int)
                or snapshot_interval < 1):
            raise ValueError(f'PostHocEMAHook: snapshot_interval={snapshot_interval!r} must be a '
                             'positive int')
        self.sigma_rels = sigma_rels
        self.snapshot_interval = snapshot_interval
        self.ema_args = dict(update_buffers=update_buffers, ema_dtype=ema_dtype)
        self.ema_models = []
        self._group: Optional[AveragingGroup] = None
        self.snapshot_dir: Optional[str] = None

    def before_run(self, runner) -> None:
        self.src_model = unwrap_model(runner.model)
        self.ema_models = [PowerFunctionEMA(self.src_model, sigma_rel=s, **self.ema_args)
                           for s in self.sigma_rels]
        self.snapshot_dir = osp.join(runner.work_dir, SNAPSHOT_DIR)
        self._group = AveragingGroup(self.ema_models)
        how = self._group.describe(self.src_model)
        runner.logger.info(f'PostHocEMAHook: sigma_rels {list(self.sigma_rels)}, {how}')

    def after_train_iter(self, runner, batch_idx: int, data_batch: DATA_BATCH = None,
                         outputs: Optional[dict] = None) -> None:
        self._group.update_parameters(self.src_model)  # one fused pass for all the EMAs
        last = self.is_last_train_iter(runner)
        if self.every_n_train_iters(runner, self.snapshot_interval) or last:
            self.save_snapshots(runner.iter + 1)

    def save_snapshots(self, iteration: int) -> None:
        """Write each EMA's weights, its averaging-call count and its exponent (rank 0 only; on a
        sharded model every rank writes its shards, each snapshot a folder)."""
        sharded = is_sharded(self.src_model)
        if not sharded and not is_main_process():
            return
        for sigma_rel, ema in zip(self.sigma_rels, self.ema_models):
            snapshot = dict(sigma_rel=sigma_rel, gamma=ema.gamma, step=int(ema.steps),
                            iter=iteration, averaged=list(ema.avg_parameters),
                            state_dict=weights_to_cpu(ema.module.state_dict()))
            path = osp.join(self.snapshot_dir, snapshot_name(sigma_rel, iteration))
            (save_sharded_checkpoint if sharded else save_checkpoint)(snapshot, path)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        checkpoint['posthoc_ema'] = {f'{s:.3f}': weights_to_cpu(ema.state_dict())
                                     for s, ema in zip(self.sigma_rels, self.ema_models)}

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        saved = checkpoint.get('posthoc_ema')
        if not runner._resume:
            return
        if saved is None:
            runner.logger.warning('Resuming from a checkpoint without `posthoc_ema`: '
                                  'PostHocEMAHook starts its EMAs afresh.')
            return
        for sigma_rel, ema in zip(self.sigma_rels, self.ema_models):
            key = f'{sigma_rel:.3f}'
            if key not in saved:
                raise KeyError(f'PostHocEMAHook: the checkpoint has EMAs for sigma_rels '
                               f'{sorted(saved)}, not {key}; resume with the same sigma_rels')
            ema.load_state_dict(saved[key])
