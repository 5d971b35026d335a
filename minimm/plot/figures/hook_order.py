"""Pictures of hook order: one training iteration as hooks against stages, and the priority line.

The hooks are not typed in by hand: they come from the real registration, a minimm ``Runner``
with its default hooks (MMEngine 0.10's six) for the MMEngine side, and ``register_training_hooks``
of ``minimm.mmcv`` (MMCV 1.7's) for the MMCV side. So the pictures change when the code does.
A hook is drawn in a stage when its class overrides it (``get_triggered_stages``); MMEngine and
MMCV call every hook at every stage, the others being the base class's no-ops.
"""
import tempfile
from typing import Dict, List, NamedTuple, Sequence

from ...priority import Priority, get_priority

# What the model's train_step does in each world; the MMCV optimizer step lives in a hook.
TRAIN_STEP = {
    'MMEngine': ('model.train_step(\n  data, optim_wrapper)\n\nforward, loss,\nbackward and\n'
                 'optimizer step:\nall done here'),
    'MMCV 1.x': ('model.train_step(\n  data, optimizer)\n\nforward and loss\nonly: backward and\n'
                 'step come later,\nin OptimizerHook'),
}
NOTES = {'OptimizerHook': 'backward + optimizer step', 'ParamSchedulerHook': 'steps LR schedule',
         'LrUpdaterHook': "sets this iteration's LR", 'EMAHook': 'averages the new weights',
         # MMCV's EvalHook acts in before_train_iter only once (the `start` evaluation).
         'EvalHook': {
             'before_train_iter': ('once, at the first iteration,\n'
                                   'if by_epoch=False and start is set'),
             'after_train_iter': 'evaluates every interval\niterations if by_epoch=False'}}
COLOURS = {'MMEngine': '#4c72b0', 'MMCV 1.x': '#dd8452'}


class HookRow(NamedTuple):
    name: str
    priority: int
    stages: Sequence[str]


def rows_of(hooks) -> List[HookRow]:
    """Registered hooks (in call order) as rows of name, priority number and triggered stages."""
    return [HookRow(type(h).__name__, get_priority(h.priority), h.get_triggered_stages())
            for h in hooks]


def mmengine_rows(custom_hooks=()) -> List[HookRow]:
    """The hooks a minimm ``Runner`` registers by default (plus ``custom_hooks``), in order."""
    import torch

    from ...runner import Runner
    with tempfile.TemporaryDirectory() as work_dir:
        runner = Runner(model=torch.nn.Linear(1, 1), work_dir=work_dir,
                        custom_hooks=list(custom_hooks), log_level='ERROR')
        return rows_of(runner.hooks)


def mmcv_rows() -> List[HookRow]:
    """The hooks ``register_training_hooks`` of ``minimm.mmcv`` registers for a typical MMCV 1.x
    config (step LR with warm-up, an optimizer hook, checkpoints, a text logger), plus
    ``EvalHook`` at ``LOW`` as the downstream training scripts (mmdet's ``train_detector``) did."""
    import logging

    import torch
    from torch.utils.data import DataLoader

    from ...mmcv import EpochBasedRunner, EvalHook
    from ..lr import NoOpModel
    model = NoOpModel()
    runner = EpochBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                              logger=logging.getLogger('minimm.plot.figures'), max_epochs=1)
    runner.register_training_hooks(
        lr_config=dict(policy='step', step=[1], warmup='linear', warmup_iters=5),
        optimizer_config=dict(grad_clip=None), checkpoint_config=dict(interval=1),
        log_config=dict(interval=10, hooks=[dict(type='TextLoggerHook')]))
    runner.register_hook(EvalHook(DataLoader(range(1))), priority='LOW')
    return rows_of(runner.hooks)


def _note(name: str, stage: str) -> str:
    note = next((note for key, note in NOTES.items() if name.endswith(key)), '')
    return note.get(stage, '') if isinstance(note, dict) else note


def draw_iteration(ax, world: str, rows: Sequence[HookRow]) -> None:
    """Three columns on ``ax``: before_train_iter hooks, train_step, after_train_iter hooks."""
    columns = [('before_train_iter', [r for r in rows if 'before_train_iter' in r.stages]),
               ('train_step', None),
               ('after_train_iter', [r for r in rows if 'after_train_iter' in r.stages])]
    height = max(len(hooks or ()) for _, hooks in columns)
    ax.set(xlim=(-0.1, 3.2), ylim=(-height - 0.9, 1.0))
    ax.axis('off')
    for x, (title, hooks) in zip((0.0, 1.1, 2.2), columns):
        ax.text(x + 0.45, 0.45, title, ha='center', fontsize=10, weight='bold', family='monospace')
        if hooks is None:
            ax.add_patch(_box(x, -height + 0.1, height - 0.3, COLOURS[world], 0.9))
            ax.text(x + 0.45, -height / 2 + 0.1, TRAIN_STEP[world], ha='center', va='center',
                    fontsize=8, color='white', weight='bold')
            continue
        for i, row in enumerate(hooks):
            note = _note(row.name, title)
            ax.add_patch(_box(x, -i - 0.85, 0.75, COLOURS[world], 0.9 if note else 0.25))
            label = f'{i + 1}. {row.name}\npriority {row.priority} ({_level(row.priority)})'
            if note:
                label += f'\n{note}'
            ax.text(x + 0.45, -i - 0.47, label, ha='center', va='center', fontsize=7.5,
                    color='white' if note else 'black')
    ax.annotate('', xy=(3.15, -height - 0.6), xytext=(0.0, -height - 0.6),
                arrowprops=dict(arrowstyle='->', color='grey'))
    ax.text(1.55, -height - 0.85, 'time within one training iteration; top to bottom = call order',
            ha='center', fontsize=8, color='grey')
    ax.set_title(world, fontsize=12, color=COLOURS[world], weight='bold')


def _box(x: float, y: float, height: float, colour: str, alpha: float):
    from matplotlib.patches import FancyBboxPatch
    return FancyBboxPatch((x, y), 0.9, height, boxstyle='round,pad=0.02', facecolor=colour,
                          alpha=alpha, edgecolor=colour)


def _level(value: int) -> str:
    try:
        return Priority(value).name
    except ValueError:
        return 'custom'


def draw_priority_line(ax, worlds: Dict[str, Sequence[HookRow]]) -> None:
    """A 0-100 number line with the named levels, and each world's hooks placed on it."""
    ax.set(xlim=(-6, 106), ylim=(-len(worlds) * 4.2 - 0.5, 2.2))
    ax.axhline(0, color='black', lw=1)
    for level in Priority:
        ax.plot([level.value] * 2, [-0.25, 0.25], color='black')
        ax.text(level.value, 0.5, f'{level.name}\n{level.value}', ha='center', fontsize=7.5)
    for w, (world, rows) in enumerate(worlds.items()):
        base = -1.2 - w * 4.2
        ax.text(-3.5, base, world, fontsize=10, weight='bold', color=COLOURS[world], va='top')
        placed: List[int] = []
        for row in rows:
            # Stack a label under any neighbour close enough for the two to overlap.
            level = sum(abs(row.priority - other) < 14 for other in placed)
            placed.append(row.priority)
            y = base - 0.75 * level - 0.6
            ax.plot([row.priority, row.priority], [0, y], color=COLOURS[world], lw=0.6, alpha=0.5,
                    zorder=1)
            ax.text(row.priority, y, f'{row.name} ({row.priority})', ha='center', va='top',
                    fontsize=7.5, zorder=3,
                    bbox=dict(boxstyle='round,pad=0.2', fc='white', ec=COLOURS[world]))
    ax.axis('off')
    ax.set_title('Hook priorities: lower runs first; equal priorities keep registration order',
                 fontsize=10)


def save_iteration_figure(worlds: Dict[str, Sequence[HookRow]], out: str) -> str:
    from .. import require_pyplot, save_figure
    plt = require_pyplot()
    fig, axes = plt.subplots(1, len(worlds), figsize=(7 * len(worlds), 5), squeeze=False)
    for ax, (world, rows) in zip(axes[0], worlds.items()):
        draw_iteration(ax, world, rows)
    return save_figure(fig, out)


def save_priority_figure(worlds: Dict[str, Sequence[HookRow]], out: str) -> str:
    from .. import require_pyplot, save_figure
    plt = require_pyplot()
    fig, ax = plt.subplots(figsize=(12, 1.4 + 2.4 * len(worlds)))
    draw_priority_line(ax, worlds)
    return save_figure(fig, out, dpi=72)
