"""The small helpers MMEngine keeps in ``mmengine.utils`` that hooks and downstream code import.

``misc.py`` (type checks of sequences, ``is_method_overridden``, ``import_object``),
``manager.py`` (``ManagerMixin``: named global instances), ``path.py`` (folders and files),
``progressbar.py`` (``ProgressBar``), ``version_utils.py`` (``digit_version``) and
``dl_utils/`` (``TORCH_VERSION``, torch's ``_BatchNorm``-style base classes), in MMEngine's file
names. This package imports nothing else of minimm: the registry, config and logging stand on it.
Left out: the rest of ``mmengine.utils`` (``Timer``, ``track_*_progress``, most of ``dl_utils``,
package helpers).
"""
from .manager import ManagerMixin
from .misc import import_object, is_list_of, is_method_overridden, is_seq_of, is_str, is_tuple_of
from .path import check_file_exist, is_filepath, mkdir_or_exist, scandir
from .progressbar import ProgressBar
from .version_utils import digit_version

__all__ = ['ManagerMixin', 'import_object', 'is_str', 'is_seq_of', 'is_list_of', 'is_tuple_of',
           'is_method_overridden', 'check_file_exist', 'is_filepath', 'mkdir_or_exist', 'scandir',
           'ProgressBar', 'digit_version']
