"""The small helpers MMEngine keeps in ``mmengine.utils`` that hooks and downstream code import.

``misc.py`` (type checks of sequences, ``is_method_overridden``), ``path.py`` (folders and files),
``progressbar.py`` (``ProgressBar``) and ``version_utils.py`` (``digit_version``), in MMEngine's
file names. Left out: the rest of ``mmengine.utils`` (``Timer``, ``ManagerMixin``, which minimm
keeps in ``minimm.logging.manager``, ``track_*_progress``, ``dl_utils``, package helpers).
"""
from .misc import is_list_of, is_method_overridden, is_seq_of, is_str, is_tuple_of
from .path import check_file_exist, is_filepath, mkdir_or_exist, scandir
from .progressbar import ProgressBar
from .version_utils import digit_version

__all__ = ['is_str', 'is_seq_of', 'is_list_of', 'is_tuple_of', 'is_method_overridden',
           'check_file_exist', 'is_filepath', 'mkdir_or_exist', 'scandir', 'ProgressBar',
           'digit_version']
