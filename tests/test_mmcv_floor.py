"""``import minimm.mmcv`` stands on the shared floor only, as DESIGN principle 7 says.

MMCV 1.x and MMEngine share only the lowest layer in minimm: the Registry class, ``Priority``,
checkpoint file I/O, the native ops, the collectives (and the plain helpers under them: ``utils``,
``plain_data``, ``work_dir``). A learner of MMCV 1.x who imports ``minimm.mmcv`` should not find
MMEngine's runner built underneath. Counted in a fresh interpreter, since this test process has
long since imported everything.

What counts as MMEngine-only (each is a module MMCV 1.7.2 has no counterpart of, or has its own
in ``minimm/mmcv/``):

- ``minimm.runner``: MMEngine's Runner, loops and hook dispatch (MMCV's runners are in
  ``minimm/mmcv/``);
- ``minimm.hooks``: MMEngine's hooks (MMCV's are ``minimm/mmcv/hooks/``);
- ``minimm.model``: BaseModel, the data preprocessor, the wrappers, averaged models (MMCV 1.x
  models are plain ``nn.Module`` with ``train_step``; its wrappers are ``minimm/mmcv/parallel``);
- ``minimm.logging``: MessageHub, HistoryBuffer, MMLogger, the visualizer (MMCV logs through
  ``LogBuffer`` and its logger hooks);
- ``minimm.optim``: OptimWrapper and the parameter schedulers (MMCV has ``optimizer/`` and the
  updater hooks);
- ``minimm.dataset`` and ``minimm.evaluator``: MMEngine's data and metric pipeline;
- ``minimm.config.top_level_keys``: the Runner's config keys.

``minimm.config`` itself is allowed: ``Config`` is MMCV 1.x's too (``mmcv.Config``), and the
Registry's build functions and MMCV's Pavi logger hook use it.
"""
import subprocess
import sys

MMENGINE_ONLY = ('minimm.runner', 'minimm.hooks', 'minimm.model', 'minimm.logging',
                 'minimm.optim', 'minimm.dataset', 'minimm.evaluator',
                 'minimm.config.top_level_keys')


def _loaded_after(statement: str) -> list:
    code = (f'import sys\n{statement}\n'
            "print('\\n'.join(m for m in sys.modules if m.startswith('minimm')))")
    out = subprocess.run([sys.executable, '-c', code], check=True, capture_output=True, text=True)
    return out.stdout.split()


def test_import_minimm_mmcv_loads_no_mmengine_only_module():
    loaded = _loaded_after('import minimm.mmcv')
    assert 'minimm.mmcv.epoch_based_runner' in loaded  # the oracle: the probe sees what loads
    upward = [m for m in loaded if any(m == p or m.startswith(p + '.') for p in MMENGINE_ONLY)]
    assert not upward, f'import minimm.mmcv loaded MMEngine-only modules: {upward}'


def test_both_worlds_share_one_priority():
    from minimm.mmcv import Priority as MMCVPriority
    from minimm.mmcv import get_priority as mmcv_get_priority
    from minimm.runner.priority import Priority, get_priority
    assert MMCVPriority is Priority and mmcv_get_priority is get_priority
