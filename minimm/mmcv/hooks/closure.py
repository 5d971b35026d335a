"""ClosureHook: run a plain function ``fn(runner)`` at one stage, without writing a class.

``ClosureHook('after_train_epoch', fn)`` stores ``fn`` on the instance under the stage's name.
Because it is an instance attribute, not a method of the class, ``get_triggered_stages`` (and so
``get_hook_info``) does not list it, as in MMCV.
"""
from .hook import HOOKS, Hook


@HOOKS.register_module()
class ClosureHook(Hook):

    def __init__(self, fn_name: str, fn):
        assert hasattr(self, fn_name), f'{fn_name} is not a method of Hook'
        assert callable(fn)
        setattr(self, fn_name, fn)
