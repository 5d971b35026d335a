"""NeptuneLoggerHook, MMCV 1.x's: ``neptune.new`` in ``self.neptune`` (imported when the hook is
built), the run it starts in ``self.run``, each tag appended with ``run[tag].log`` at
``iter + 1``. As in MMCV, ``reset_flag`` defaults to True and ``before_run`` does not look for the
last logger hook. Left out: nothing."""
from typing import Dict, Optional

from ...dist_utils import master_only

from ..hook import HOOKS
from .base import LoggerHook


@HOOKS.register_module()
class NeptuneLoggerHook(LoggerHook):
    """Log to Neptune; ``init_kwargs`` go to ``neptune.init`` (``project``, ``api_token`` (better
    the ``NEPTUNE_API_TOKEN`` variable), ``name``, ``mode``...)."""

    def __init__(self, init_kwargs: Optional[Dict] = None, interval: int = 10,
                 ignore_last: bool = True, reset_flag: bool = True, with_step: bool = True,
                 by_epoch: bool = True):
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
        self.import_neptune()
        self.init_kwargs = init_kwargs
        self.with_step = with_step

    def import_neptune(self) -> None:
        try:
            import neptune.new as neptune
        except ImportError:
            raise ImportError('Please run "pip install neptune-client" to install neptune')
        self.neptune = neptune
        self.run = None

    @master_only
    def before_run(self, runner) -> None:
        if self.init_kwargs:
            self.run = self.neptune.init(**self.init_kwargs)
        else:
            self.run = self.neptune.init()

    @master_only
    def log(self, runner) -> None:
        tags = self.get_loggable_tags(runner)
        if tags:
            for tag_name, tag_value in tags.items():
                if self.with_step:
                    self.run[tag_name].log(tag_value, step=self.get_iter(runner))
                else:
                    tags['global_step'] = self.get_iter(runner)
                    self.run[tag_name].log(tags)

    @master_only
    def after_run(self, runner) -> None:
        self.run.stop()
