"""ClosureHook: run any ``fn(runner)`` at one stage without writing a class (as MMCV 1.7's). The
function is an *instance* attribute, which ``get_triggered_stages`` and ``get_hook_info`` ignore."""
from .hook import HOOKS, Hook


@HOOKS.register_module()
class ClosureHook(Hook):

    def __init__(self, fn_name: str, fn):
        assert hasattr(self, fn_name)
        assert callable(fn)
        setattr(self, fn_name, fn)
