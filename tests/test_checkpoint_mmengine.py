"""A trusted checkpoint written by MMEngine loads without mmengine installed (issue 24, item 3).

The file is crafted here: classes named as MMEngine 0.10 names them (``HistoryBuffer`` in
``mmengine.logging.history_buffer``, ``ConfigDict`` in ``mmengine.config.config``, which pickles
itself as addict's ``Dict`` does), pickled with numpy scalars beside them; then the fake modules
are removed and ``import mmengine`` is made to fail before the file is read.
"""
import sys
import types

import numpy as np
import pytest
import torch

from minimm.checkpoint import CheckpointError, load_checkpoint_file
from minimm.config import ConfigDict as MinimmConfigDict
from minimm.logging.history_buffer import HistoryBuffer as MinimmHistoryBuffer
from toy import ToyModel, toy_runner

pytestmark = pytest.mark.ops_backend  # toy_runner's model trains through the ops


class HistoryBuffer:
    """MMEngine's fields: numpy arrays of values and counts, and max_length."""

    def __init__(self, values, counts):
        self.max_length = 1000000
        self._log_history = np.array(values)
        self._count_history = np.array(counts)


class ConfigDict(dict):
    """addict's pickling: the state is the dict itself."""

    def __getstate__(self):
        return self

    def __setstate__(self, state):
        self.update(state)


def _write_mmengine_checkpoint(path, monkeypatch):
    modules = {'mmengine': None, 'mmengine.logging': None,
               'mmengine.logging.history_buffer': HistoryBuffer,
               'mmengine.config': None, 'mmengine.config.config': ConfigDict}
    with monkeypatch.context() as patch:
        for name, cls in modules.items():
            module = types.ModuleType(name)
            if cls is not None:
                cls.__module__ = name
                setattr(module, cls.__name__, cls)
            patch.setitem(sys.modules, name, module)
        torch.manual_seed(3)
        source = ToyModel()
        torch.save({
            'meta': {'epoch': 1, 'iter': 3, 'seed': np.int64(0), 'mmengine_version': '0.10.7',
                     'cfg': ConfigDict(model=ConfigDict(type='ToyModel'), lr=np.float64(0.1))},
            'state_dict': source.state_dict(),
            'message_hub': {
                'log_scalars': {'train/loss': HistoryBuffer([0.5, 0.25, 0.125], [1, 1, 2])},
                'runtime_info': {'epoch': 1, 'iter': 3},
                'resumed_keys': {'train/loss': True, 'epoch': True, 'iter': True}},
        }, path)
    return source


def test_a_trusted_mmengine_checkpoint_loads_without_mmengine(tmp_path, monkeypatch):
    path = str(tmp_path / 'mmengine.pth')
    source = _write_mmengine_checkpoint(path, monkeypatch)
    monkeypatch.setitem(sys.modules, 'mmengine', None)  # `import mmengine` now fails
    checkpoint = load_checkpoint_file(path, trusted=True)
    cfg = checkpoint['meta']['cfg']
    assert isinstance(cfg, MinimmConfigDict) and cfg.model.type == 'ToyModel'
    assert cfg.lr == 0.1 and isinstance(checkpoint['meta']['seed'], np.integer)
    buffer = checkpoint['message_hub']['log_scalars']['train/loss']
    assert isinstance(buffer, MinimmHistoryBuffer)
    assert [a.tolist() for a in buffer.data] == [[0.5, 0.25, 0.125], [1, 1, 2]]
    assert buffer.mean() == 0.875 / 4

    runner = toy_runner(tmp_path / 'w', max_=2, val=False, resume=True,
                        load_from=dict(path=path, trusted=True))
    runner.load_or_resume()
    assert (runner.epoch, runner.iter) == (1, 3)
    assert runner.message_hub.get_scalar('train/loss').current() == 0.125
    for key, value in source.state_dict().items():
        assert torch.equal(runner.model.state_dict()[key], value), key
    runner.train()  # and training goes on from there
    assert runner.iter == 6


def test_an_uninstalled_module_is_named_not_called_corrupt(tmp_path, monkeypatch):
    path = str(tmp_path / 'other.pth')
    with monkeypatch.context() as patch:
        module = types.ModuleType('somepackage')
        HistoryBuffer.__module__ = 'somepackage'
        module.HistoryBuffer = HistoryBuffer
        patch.setitem(sys.modules, 'somepackage', module)
        torch.save({'x': HistoryBuffer([1.0], [1])}, path)
    monkeypatch.setitem(sys.modules, 'somepackage', None)
    with pytest.raises(CheckpointError, match="module 'somepackage', which is not installed"):
        load_checkpoint_file(path, trusted=True)
