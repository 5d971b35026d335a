"""BaseLoop: what every loop has, a runner and a dataloader (MMEngine's
``mmengine/runner/base_loop.py``); ``loops.py`` holds the four loops built on it."""
from typing import Union

from torch.utils.data import DataLoader


class BaseLoop:
    """Holds the runner and a dataloader (built from a dict by the runner when needed).
    Subclasses write ``run``."""

    def __init__(self, runner, dataloader: Union[DataLoader, dict]):
        self.runner = runner
        if isinstance(dataloader, dict):
            # The builder seeds the workers from the runner's `randomness` settings itself.
            self.dataloader = runner.build_dataloader(dataloader)
        else:
            self.dataloader = dataloader

    def run(self):
        raise NotImplementedError
