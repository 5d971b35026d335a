"""ClosureHook: run any ``fn(runner)`` at one stage, without writing a class (as MMCV 1.7's).

The function becomes an *instance* attribute, so ``get_triggered_stages`` (which inspects the
class) never lists it and ``get_hook_info`` does not show it.
"""
from .hook import HOOKS, Hook


@HOOKS.register_module()
class ClosureHook(Hook):

    def __init__(self, fn_name: str, fn):
        assert hasattr(self, fn_name)
        assert callable(fn)
        setattr(self, fn_name, fn)
