"""Hook registration and dispatch: how the Runner orders its hooks and calls them.

Read this file top to bottom to learn the whole hook machinery of MMEngine 0.10's ``Runner``:

1. **The default hooks.** ``DEFAULT_HOOKS`` is registered first, updated by the ``default_hooks``
   argument (a ``None`` value removes one); then the ``custom_hooks``.
2. **Ordering by priority.** ``register_hook`` inserts each hook after the last one whose priority
   number is lower or equal, so equal priorities keep registration order, and a default hook runs
   before a custom hook of the same priority.
3. **Dispatch.** The loops call ``runner.call_hook(stage, **kwargs)``; every hook that has a
   method of that name runs it, in priority order, looked up at that moment, as in MMEngine (so a
   hook may rebind its method during a run). Every ``Hook`` has all 22 stages, most of them
   no-ops: calling those costs under 1 % of an iteration (``minimm bench overhead``), too little
   for a per-stage table of the hooks that implement each stage.

Different from MMEngine: priorities are validated when a hook is registered, the caller's hook dict
is never mutated, and an exception raised inside a hook keeps its class and gains a note naming the
hook and the stage (MMEngine re-raises a ``TypeError`` as a plain ``TypeError``). Added:
``profile_hooks`` (see ``hook_profiler.py``).
"""
from typing import Dict, List, Optional, Union

from ..hooks import Hook
from ..priority import get_priority, priority_name
from ..registry import HOOKS
from .hook_profiler import HookProfiler

DEFAULT_HOOKS = dict(
    runtime_info=dict(type='RuntimeInfoHook'),
    timer=dict(type='IterTimerHook'),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    logger=dict(type='LoggerHook'),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', interval=1),
)


class HookDispatchMixin:
    """The Runner's hook methods: ``register_hook(s)``, ``call_hook``, ``get_hooks_info``."""

    def _init_hooks(self, profile_hooks: bool = False) -> None:
        self._hooks: List[Hook] = []
        self._hook_profiler = HookProfiler() if profile_hooks else None

    @property
    def hooks(self) -> List[Hook]:
        """The registered hooks in call order (register new ones with ``register_hook``)."""
        return self._hooks

    def register_hook(self, hook: Union[Hook, dict],
                      priority: Union[int, str, None] = None) -> None:
        """Insert ``hook`` by priority: after every hook whose priority number is <= its own.

        The priority comes from the ``priority`` argument, else ``hook['priority']`` of a config,
        else the hook's ``priority`` attribute; it is validated now, before the hook is built.
        """
        if not isinstance(hook, (Hook, dict)):
            raise TypeError(f'hook should be an instance of Hook or dict, but got {hook}')
        if isinstance(hook, dict):
            cfg = dict(hook)  # never mutate the caller's dict (MMEngine pops 'priority' from it)
            cfg_priority = cfg.pop('priority', None)
            if priority is None:
                priority = cfg_priority
            if priority is not None:
                get_priority(priority)
            hook_obj = HOOKS.build(cfg)
            if not isinstance(hook_obj, Hook):
                raise TypeError(f'{cfg["type"]} built a {type(hook_obj).__name__}, not a Hook')
        else:
            hook_obj = hook
        if priority is not None:
            hook_obj.priority = priority
        value = get_priority(hook_obj.priority)
        index = len(self._hooks)
        while index and value < get_priority(self._hooks[index - 1].priority):
            index -= 1
        self._hooks.insert(index, hook_obj)

    def register_default_hooks(self, hooks: Optional[dict] = None) -> None:
        """Register ``DEFAULT_HOOKS`` updated by ``hooks`` (a ``None`` value removes a default)."""
        merged = dict(DEFAULT_HOOKS)
        for name, hook in (hooks or {}).items():
            if hook is not None and not isinstance(hook, (dict, Hook)):
                raise TypeError(f'default_hooks[{name!r}] must be a dict, a Hook or None, '
                                f'but got {type(hook)}')
            merged[name] = hook
        for hook in merged.values():
            if hook is not None:
                self.register_hook(hook)

    def register_custom_hooks(self, hooks: List[Union[Hook, dict]]) -> None:
        for hook in hooks:
            self.register_hook(hook)

    def register_hooks(self, default_hooks=None, custom_hooks=None) -> None:
        self.register_default_hooks(default_hooks)
        if custom_hooks is not None:
            self.register_custom_hooks(custom_hooks)

    def call_hook(self, fn_name: str, **kwargs) -> None:
        """Call stage ``fn_name`` on every hook that has it, in priority order."""
        for hook in self._hooks:
            if not hasattr(hook, fn_name):
                continue
            try:
                if self._hook_profiler is None:
                    getattr(hook, fn_name)(self, **kwargs)
                else:
                    self._hook_profiler.call(hook, fn_name, getattr(hook, fn_name), self,
                                             **kwargs)
            except BaseException as e:
                # The exception keeps its class (callers may catch it); the note says where
                # (add_note exists from Python 3.11 on; older Pythons just re-raise).
                if hasattr(e, 'add_note'):
                    e.add_note(f'raised in {type(hook).__qualname__}.{fn_name} (hook {hook!r})')
                raise

    def get_hooks_info(self) -> str:
        """Per stage, the hooks that run in it: ``(PRIORITY    ) ClassName`` lines."""
        stage_hooks: Dict[str, List[str]] = {stage: [] for stage in Hook.stages}
        for hook in self._hooks:
            line = f'({priority_name(hook.priority):<12}) {type(hook).__name__:<35}'
            for stage in hook.get_triggered_stages():
                stage_hooks[stage].append(line)
        return '\n'.join(f'{stage}:\n' + '\n'.join(lines) + '\n -------------------- '
                         for stage, lines in stage_hooks.items() if lines)
