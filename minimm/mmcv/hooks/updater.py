"""The two bases of MMCV 1.x's schedule hooks, side by side: ``LrUpdaterHook`` sets each param
group's ``lr``, ``MomentumUpdaterHook`` its ``momentum`` (``betas[0]`` for Adam-like optimizers).
Neither is registered: a config names a policy, a subclass whose ``get_lr(runner, base_lr)`` (or
``get_momentum(runner, base_momentum)``) says what the value is at the runner's epoch or iteration.

Both follow the same calendar:

    before_run          remember each group's starting value: ``base_lr`` / ``base_momentum``
    before_train_epoch  a per-epoch hook (``by_epoch=True``) writes this epoch's regular value
    before_train_iter   a per-iteration hook writes this iteration's regular value; during the
                        warm-up (its first ``warmup_iters`` iterations) either kind writes the
                        regular value scaled by ``schedule.warmup_factor`` instead

Values come as a list (one per param group), or as a dict of lists for a dict of optimizers.
MMCV exposes both classes from its ``lr_updater``/``momentum_updater`` modules; so do minimm's.
"""
from .hook import Hook
from .schedule import check_warmup, for_each_group, map_values, warmup_factor, zip_groups


def value_for_iteration(hook, cur_iter, regular, warmed_up):
    """What ``hook`` writes before iteration ``cur_iter``, or None to leave the groups alone.
    A per-epoch hook wrote its regular value at the epoch's start: it writes again only while
    warming up, and once at iteration ``warmup_iters``, to replace the last warmed-up value."""
    warming = hook.warmup is not None
    if warming and cur_iter < hook.warmup_iters:
        return warmed_up(cur_iter)
    if not hook.by_epoch or (warming and cur_iter == hook.warmup_iters):
        return regular
    return None


class LrUpdaterHook(Hook):
    """Args: ``by_epoch``: change the lr before each epoch, else before each iteration;
    ``warmup``: None, 'constant', 'linear' or 'exp'; ``warmup_iters``: its length (in epochs with
    ``warmup_by_epoch``); ``warmup_ratio``: the first warmed-up lr is that share of the regular."""

    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {'before_run': 'optimizer -> lr', 'before_train_epoch before_train_iter': '-> lr'}

    def __init__(self, by_epoch=True, warmup=None, warmup_iters=0, warmup_ratio=0.1,
                 warmup_by_epoch=False):
        check_warmup(warmup, warmup_iters, warmup_ratio, '"constant", "linear" and "exp"')
        self.by_epoch = by_epoch
        self.warmup = warmup
        self.warmup_ratio = warmup_ratio
        self.warmup_by_epoch = warmup_by_epoch
        # Counted in epochs, the warm-up's length in iterations is unknown until the first
        # train epoch shows the loader's length (before_train_epoch fills it in).
        self.warmup_epochs = warmup_iters if warmup_by_epoch else None
        self.warmup_iters = None if warmup_by_epoch else warmup_iters
        self.base_lr = []  # each group's starting lr
        self.regular_lr = []  # the policy's lr now, before any warm-up

    def before_run(self, runner):
        # A resumed optimizer's groups keep 'initial_lr' from the first run: the schedule goes
        # on from the lr it started with, not from the decayed one.
        self.base_lr = for_each_group(runner.optimizer,
                                      lambda group: group.setdefault('initial_lr', group['lr']))

    def before_train_epoch(self, runner):
        # IterBasedRunner never calls this, so there a per-epoch hook leaves the lr alone: a
        # quirk of MMCV's that minimm keeps (tests/test_mmcv_lr_updater.py pins it down).
        if self.warmup_iters is None:
            self.warmup_iters = self.warmup_epochs * len(runner.data_loader)
        if self.by_epoch:
            self.regular_lr = self.get_regular_lr(runner)
            self._set_lr(runner, self.regular_lr)

    def before_train_iter(self, runner):
        # Still None here: warm-up by epoch on a runner without train epochs (IterBasedRunner).
        assert isinstance(self.warmup_iters, int), 'warmup_iters is not known yet'
        if not self.by_epoch:
            self.regular_lr = self.get_regular_lr(runner)
        lr = value_for_iteration(self, runner.iter, self.regular_lr, self.get_warmup_lr)
        if lr is not None:
            self._set_lr(runner, lr)

    def get_lr(self, runner, base_lr):
        """The policy: the lr of a group that started at ``base_lr``, at this point of the run."""
        raise NotImplementedError(f'{type(self).__name__} must define get_lr(runner, base_lr)')

    def get_regular_lr(self, runner):
        return map_values(self.base_lr, lambda base_lr: self.get_lr(runner, base_lr))

    def get_warmup_lr(self, cur_iters):
        factor = warmup_factor(self.warmup, cur_iters, self.warmup_iters, self.warmup_ratio)
        return map_values(self.regular_lr, lambda lr: lr * factor)

    def _set_lr(self, runner, lr_groups):
        for group, lr in zip_groups(runner.optimizer, lr_groups):
            group['lr'] = lr


class MomentumUpdaterHook(Hook):
    """Args as LrUpdaterHook's, without ``warmup_by_epoch`` (as in MMCV 1.7)."""

    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {'before_run': 'optimizer -> lr', 'before_train_epoch before_train_iter': '-> lr'}

    def __init__(self, by_epoch=True, warmup=None, warmup_iters=0, warmup_ratio=0.9):
        # MMCV's message omits 'exp', which it accepts all the same.
        check_warmup(warmup, warmup_iters, warmup_ratio, '"constant" and "linear"')
        self.by_epoch = by_epoch
        self.warmup = warmup
        self.warmup_iters = warmup_iters
        self.warmup_ratio = warmup_ratio
        self.base_momentum = []  # each group's starting momentum
        self.regular_momentum = []  # the policy's momentum now, before any warm-up

    def before_run(self, runner):

        def initial(group):
            # a group without either key fails here with a KeyError, as in MMCV
            current = group['momentum'] if 'momentum' in group else group['betas'][0]
            return group.setdefault('initial_momentum', current)

        self.base_momentum = for_each_group(runner.optimizer, initial)

    def before_train_epoch(self, runner):
        if self.by_epoch:
            self.regular_momentum = self.get_regular_momentum(runner)
            self._set_momentum(runner, self.regular_momentum)

    def before_train_iter(self, runner):
        if not self.by_epoch:
            self.regular_momentum = self.get_regular_momentum(runner)
        momentum = value_for_iteration(self, runner.iter, self.regular_momentum,
                                       self.get_warmup_momentum)
        if momentum is not None:
            self._set_momentum(runner, momentum)

    def get_momentum(self, runner, base_momentum):
        """The policy: the momentum of a group that started at ``base_momentum``, now."""
        raise NotImplementedError(
            f'{type(self).__name__} must define get_momentum(runner, base_momentum)')

    def get_regular_momentum(self, runner):
        return map_values(self.base_momentum, lambda base: self.get_momentum(runner, base))

    def get_warmup_momentum(self, cur_iters):
        factor = warmup_factor(self.warmup, cur_iters, self.warmup_iters, self.warmup_ratio)
        # MMCV divides where the lr hook multiplies: a warming-up momentum starts *above* its
        # regular value, even above 1. Its own tests pin this down (1.9), so minimm keeps it.
        return map_values(self.regular_momentum, lambda momentum: momentum / factor)

    def _set_momentum(self, runner, momentum_groups):
        for group, momentum in zip_groups(runner.optimizer, momentum_groups):
            if 'momentum' in group:
                group['momentum'] = momentum
            elif 'betas' in group:
                group['betas'] = (momentum, group['betas'][1])
