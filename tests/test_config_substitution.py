"""Config text substitutions, as MMEngine 0.10 makes them: ``{{_base_.x}}``, predefined variables,
``{{$ENV:default}}``; in-place edits of ``_base_``; and errors that name the file, the line and the
construct for what is not supported."""
import os.path as osp
import textwrap

import pytest
import torch

from minimm.config import Config


def write(path, text):
    path.write_text(textwrap.dedent(text))
    return str(path)


# The shape of MMDetection 3.x's configs: a dataset base that defines ``backend_args`` and a
# pipeline, and a child (RTMDet-style) that reuses them through ``{{_base_.x}}``.
DATASET_BASE = '''
    from torch.optim import SGD

    backend_args = None
    train_pipeline = [
        dict(type='LoadImageFromFile', backend_args=backend_args),
        dict(type='LoadAnnotations', with_bbox=True),
    ]
    train_dataloader = dict(batch_size=2, dataset=dict(type='CocoDataset', pipeline=train_pipeline))
    optim_wrapper = dict(optimizer=dict(type=SGD, lr=0.01))
'''


def test_base_vars_are_substituted_at_any_depth(tmp_path):
    write(tmp_path / 'base.py', DATASET_BASE)
    child = write(tmp_path / 'child.py', '''
        _base_ = './base.py'
        train_pipeline_stage2 = [
            dict(type='LoadImageFromFile', backend_args={{_base_.backend_args}}),
            dict(type='Resize', scale=(640, 640)),
        ]
        custom_hooks = [dict(type='PipelineSwitchHook', switch_epoch=280,
                             switch_pipeline=train_pipeline_stage2)]
        val_pipeline = {{ _base_.train_pipeline }}
        nested = dict(a=[({{_base_.train_dataloader.batch_size}}, 'x')],
                      optimizer_type={{_base_.optim_wrapper.optimizer.type}})
    ''')
    cfg = Config.fromfile(child)
    assert cfg.train_pipeline_stage2[0] == dict(type='LoadImageFromFile', backend_args=None)
    assert cfg.custom_hooks[0].switch_pipeline[0].backend_args is None
    assert cfg.val_pipeline == cfg.train_pipeline == [
        dict(type='LoadImageFromFile', backend_args=None),
        dict(type='LoadAnnotations', with_bbox=True)]
    assert cfg.nested.a == [(2, 'x')] and type(cfg.nested.a[0]) is tuple
    # Any object, not only literals: here a class, which could not be written into the text.
    assert cfg.nested.optimizer_type is torch.optim.SGD


def test_base_var_equals_the_python_style_reference(tmp_path):
    write(tmp_path / 'base.py', 'model = dict(type="M", depth=18, stages=[1, 2])\n')
    child = write(tmp_path / 'child.py', '''
        _base_ = ['./base.py']
        a = {{_base_.model}}
        b = _base_.model
    ''')
    cfg = Config.fromfile(child)
    assert cfg.a == cfg.b == cfg.model == dict(type='M', depth=18, stages=[1, 2])


def test_in_place_edit_of_base_reaches_the_result(tmp_path):
    write(tmp_path / 'base.py', 'train_dataloader = dict(batch_size=16, num_workers=4)\n')
    child = write(tmp_path / 'child.py', '''
        _base_ = './base.py'
        train_batch_size_per_gpu = 32
        _base_.train_dataloader.batch_size = train_batch_size_per_gpu
    ''')
    cfg = Config.fromfile(child)
    assert cfg.train_dataloader == dict(batch_size=32, num_workers=4)


def test_delete_replaces_a_nested_base_dict(tmp_path):
    write(tmp_path / 'base.py', '''
        model = dict(type='RetinaNet', backbone=dict(type='ResNet', depth=50, frozen_stages=1),
                     neck=dict(type='FPN', in_channels=[256, 512, 1024, 2048]))
    ''')
    child = write(tmp_path / 'child.py', '''
        _base_ = './base.py'
        model = dict(backbone=dict(_delete_=True, type='SwinTransformer', embed_dims=96),
                     neck=dict(in_channels=[96, 192, 384, 768]))
    ''')
    cfg = Config.fromfile(child)
    assert cfg.model.backbone == dict(type='SwinTransformer', embed_dims=96)
    assert cfg.model.neck == dict(type='FPN', in_channels=[96, 192, 384, 768])


def test_predefined_variables_inside_strings(tmp_path):
    (tmp_path / 'configs').mkdir()
    path = write(tmp_path / 'configs' / 'rtmdet_tiny_8xb32.py', '''
        work_dir = './work_dirs/{{fileBasenameNoExtension}}'
        name = f'{{fileBasename}}'
        where = '{{ fileDirname }}'
        ext = '{{fileExtname}}'
    ''')
    cfg = Config.fromfile(path)
    assert cfg.work_dir == './work_dirs/rtmdet_tiny_8xb32'
    assert cfg.name == 'rtmdet_tiny_8xb32.py'
    assert cfg.where == osp.dirname(path).replace('\\', '/')
    assert cfg.ext == '.py'
    raw = Config.fromfile(path, use_predefined_variables=False)
    assert raw.work_dir == './work_dirs/{{fileBasenameNoExtension}}'


def test_environment_variables(tmp_path, monkeypatch):
    path = write(tmp_path / 'env.py', '''
        lr = {{$MINIMM_TEST_LR:0.01}}
        data_root = '{{$MINIMM_TEST_ROOT:data/coco/}}'
    ''')
    monkeypatch.delenv('MINIMM_TEST_LR', raising=False)
    monkeypatch.delenv('MINIMM_TEST_ROOT', raising=False)
    cfg = Config.fromfile(path)
    assert cfg.lr == 0.01 and cfg.data_root == 'data/coco/'
    monkeypatch.setenv('MINIMM_TEST_LR', '0.5')
    monkeypatch.setenv('MINIMM_TEST_ROOT', '/mnt/coco/')
    cfg = Config.fromfile(path)
    assert cfg.lr == 0.5 and cfg.data_root == '/mnt/coco/'
    no_default = write(tmp_path / 'no_default.py', 'x = 1\ny = {{$MINIMM_TEST_UNSET:}}\n')
    monkeypatch.delenv('MINIMM_TEST_UNSET', raising=False)
    with pytest.raises(KeyError, match=r'no_default.py:2: `MINIMM_TEST_UNSET` is not set'):
        Config.fromfile(no_default)


@pytest.mark.parametrize('line, error, message', [
    ('x = {{_base_.missing}}', KeyError, r'child.py:3: \{\{_base_.missing\}\}: the merged _base_ '
     r"config has no key 'missing'"),
    ('x = {{_base_.model.head}}', KeyError, r"child.py:3: .*: model has no key 'head'"),
    ('x = {{_base_.model.stages[0]}}', SyntaxError,
     r'child.py:3: \{\{_base_.model.stages\[0\]\}\} is not a substitution'),
    ('x = {{ workDir }}', SyntaxError, r'child.py:3: \{\{ workDir \}\} is not a substitution'),
    ("x = 'prefix-{{_base_.model.type}}'", ValueError,
     r'child.py:3: \{\{_base_.model.type\}\} is part of a longer string'),
    ('x = "{{_base_.model.type}}"', SyntaxError,
     r'child.py:3: \{\{_base_.model.type\}\} inside a string literal'),
    ('with read_base():\n    from .base import *', SyntaxError,
     r'child.py:3: the lazy-import config style'),
])
def test_unsupported_syntax_names_file_line_and_construct(tmp_path, line, error, message):
    write(tmp_path / 'base.py', 'model = dict(type="M", stages=[1, 2])\n')
    child = tmp_path / 'child.py'
    child.write_text(f"_base_ = './base.py'\ny = 1\n{line}\n")
    with pytest.raises(error, match=message):
        Config.fromfile(str(child))
