"""minimm.utils: the helpers of mmengine.utils that hooks import, against MMEngine's documented
behaviour."""
import io
import os

import pytest
import torch.nn as nn

from minimm.utils import (ProgressBar, check_file_exist, digit_version, is_list_of,
                          is_method_overridden, is_seq_of, is_str, is_tuple_of, mkdir_or_exist,
                          scandir)


def test_sequence_checks():
    assert is_str('a') and not is_str(b'a')
    assert is_seq_of([1, 2], int) and is_seq_of((1, 2), int) and is_seq_of([], str)
    assert not is_seq_of([1, 'a'], int) and not is_seq_of(1, int)
    assert is_seq_of([1, 2.], (int, float))
    assert is_seq_of((1, 2), int, seq_type=tuple) and not is_seq_of([1, 2], int, seq_type=tuple)
    assert is_list_of([1], int) and not is_list_of((1, ), int)
    assert is_tuple_of((1, ), int) and not is_tuple_of([1], int)
    with pytest.raises(TypeError, match='seq_type must be a type'):
        is_seq_of([1], int, seq_type='list')


def test_is_method_overridden():
    class Base:
        def f(self):
            pass

    class Sub(Base):
        def f(self):
            pass

    assert is_method_overridden('f', Base, Sub) and is_method_overridden('f', Base, Sub())
    assert not is_method_overridden('f', Base, Base)
    assert is_method_overridden('forward', nn.Module, nn.Linear)


def test_paths(tmp_path):
    target = tmp_path / 'a' / 'b'
    mkdir_or_exist(str(target))
    mkdir_or_exist(str(target))  # exists: no error
    mkdir_or_exist('')
    assert target.is_dir()
    (target / 'x.py').write_text('')
    (tmp_path / 'a' / 'Y.PY').write_text('')
    (tmp_path / 'a' / '.hidden.py').write_text('')
    assert sorted(scandir(str(tmp_path / 'a'), '.py', recursive=True)) == [os.path.join('b', 'x.py')]
    assert sorted(scandir(tmp_path / 'a', '.py', recursive=True, case_sensitive=False)) == \
        ['Y.PY', os.path.join('b', 'x.py')]
    assert list(scandir(str(tmp_path / 'a'), '.py')) == []
    check_file_exist(str(target / 'x.py'))
    with pytest.raises(FileNotFoundError, match='missing.py'):
        check_file_exist(str(tmp_path / 'missing.py'))


def test_progress_bar_counts_and_draws():
    out = io.StringIO()
    bar = ProgressBar(4, bar_width=8, file=out)
    for _ in range(2):
        bar.update()
    assert bar.completed == 2
    assert out.getvalue().startswith('[        ] 0/4, elapsed: 0s, ETA:')
    last = out.getvalue().split('\r')[-1]
    assert last.startswith('[>>>') and ' 2/4, ' in last and 'task/s' in last
    unknown = ProgressBar(file=io.StringIO())
    unknown.update(3)
    assert unknown.file.getvalue().split('completed: ')[-1].startswith('3, elapsed')


def test_digit_version_orders_versions():
    assert digit_version('1.13.0') == (1, 13, 0, 0, 0, 0)
    assert digit_version('2.14.1+cu130') == (2, 14, 1, 0, 0, 0)
    assert digit_version('1.8.0rc1') == (1, 8, 0, 0, -1, 1)
    ordered = ['1.7.0a1', '1.7.0b2', '1.7.0rc1', '1.7.0', '1.7.0.post1', '1.7.1', '1.10']
    assert sorted(ordered, key=digit_version) == ordered
    with pytest.raises(ValueError, match='failed to parse'):
        digit_version('latest')
