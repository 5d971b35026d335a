"""``Hook`` and ``HOOKS``: the base of every MMCV 1.x hook, and the registry configs name them in.

A runner calls its hooks at ten *stages*, always with one argument, the runner itself; a hook
reads what it needs from it (``runner.outputs``, ``runner.log_buffer``, ``runner.iter``...).
The train and val stages of an epoch or an iteration *funnel* into one generic method: the base
``before_train_epoch`` and ``before_val_epoch`` both just call ``before_epoch``. So a hook that
overrides only ``after_epoch`` acts after train **and** after val epochs. Compare
``minimm/hooks/hook.py`` (MMEngine), whose stages take ``batch_idx``, ``data_batch``, ``outputs``.
``HOOKS`` is a registry of its own, so MMCV and MMEngine hooks cannot be mixed by mistake.
"""
from minimm.registry import Registry

from ..registry import build_from_cfg
from ..utils import is_method_overridden

HOOKS = Registry('hook', build_func=build_from_cfg)


class Hook:
    """Override the stages you need; every one of them does nothing here."""

    # The ten stages, in the order a training run first meets them.
    stages = ('before_run', 'before_train_epoch', 'before_train_iter', 'after_train_iter',
              'after_train_epoch', 'before_val_epoch', 'before_val_iter', 'after_val_iter',
              'after_val_epoch', 'after_run')

    # -- once per run ------------------------------------------------------------------------
    def before_run(self, runner):
        pass

    def after_run(self, runner):
        pass

    # -- the generic methods: override one to act in train and val alike ---------------------
    def before_epoch(self, runner):
        pass

    def after_epoch(self, runner):
        pass

    def before_iter(self, runner):
        pass

    def after_iter(self, runner):
        pass

    # -- the stages the runners call; each passes on to its generic method (the names and the
    #    funnels are MMCV's API: a hook overrides either level) --------------------------------
    def before_train_epoch(self, runner):
        self.before_epoch(runner)

    def after_train_epoch(self, runner):
        self.after_epoch(runner)

    def before_val_epoch(self, runner):
        self.before_epoch(runner)

    def after_val_epoch(self, runner):
        self.after_epoch(runner)

    def before_train_iter(self, runner):
        self.before_iter(runner)

    def after_train_iter(self, runner):
        self.after_iter(runner)

    def before_val_iter(self, runner):
        self.before_iter(runner)

    def after_val_iter(self, runner):
        self.after_iter(runner)

    # -- helpers for "every n" hooks; the counters are 0-based, so the n-th is count + 1 == n.
    #    An interval n <= 0 means "never".
    def every_n_epochs(self, runner, n):
        return n > 0 and (runner.epoch + 1) % n == 0

    def every_n_inner_iters(self, runner, n):
        return n > 0 and (runner.inner_iter + 1) % n == 0

    def every_n_iters(self, runner, n):
        return n > 0 and (runner.iter + 1) % n == 0

    def end_of_epoch(self, runner):
        """Whether this is the last batch of the loader being run."""
        return runner.inner_iter + 1 == len(runner.data_loader)

    def is_last_epoch(self, runner):
        return runner.epoch + 1 == runner._max_epochs

    def is_last_iter(self, runner):
        return runner.iter + 1 == runner._max_iters

    def get_triggered_stages(self):
        """The stages at which this hook does something, in ``Hook.stages`` order: those its class
        overrides, directly or through the generic method they pass on to (``get_hook_info``
        prints them). A function set on an instance, as ``ClosureHook`` does, is not seen."""
        # generic method -> the two stages that pass on to it (MMCV calls this map by this name)
        method_stages_map = {
            'before_epoch': ('before_train_epoch', 'before_val_epoch'),
            'after_epoch': ('after_train_epoch', 'after_val_epoch'),
            'before_iter': ('before_train_iter', 'before_val_iter'),
            'after_iter': ('after_train_iter', 'after_val_iter'),
        }
        generic_of = {stage: method for method, pair in method_stages_map.items() for stage in pair}

        def overridden(name):
            return is_method_overridden(name, Hook, self)

        return [stage for stage in Hook.stages
                if overridden(stage) or overridden(generic_of.get(stage, stage))]
