"""minidet: a downstream package written the way OpenMMLab's are (MMDetection 3.x, MMPretrain...),
the smallest that shows how a package plugs its own hooks and models into minimm's Runner.

* ``minidet/registry.py`` makes *child* registries of minimm's root ones; the package never
  registers into minimm's.
* ``minidet/engine/hooks/`` and ``minidet/models/`` register a hook and a model in those children.
* ``configs/digits_mlp.py`` says ``default_scope = 'minidet'``: the Runner then builds
  ``type='CheckInvalidLossHook'`` from minidet's ``HOOKS`` and ``type='CheckpointHook'`` from
  minimm's (the parent), and imports the package's modules when a lookup first needs them.

To use it, put ``tutorials/minidet`` on the import path: ``pip install -e tutorials/minidet``
(what OpenMMLab's packages ask for), or ``PYTHONPATH=tutorials/minidet``. Then
``minimm train tutorials/minidet/configs/digits_mlp.py``.
"""
__version__ = '0.1.0'
