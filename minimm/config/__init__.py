"""Config: ``.py`` config files with ``_base_`` inheritance, command-line overrides and dumping.

``config.py`` loads and merges (Config, ConfigDict), ``dump.py`` writes a config back as Python,
``cfg_options.py`` parses ``--cfg-options``; the same split as MMEngine's ``mmengine.config``.
"""
from .cfg_options import DictAction, parse_cfg_options
from .config import Config, ConfigDict

__all__ = ['Config', 'ConfigDict', 'DictAction', 'parse_cfg_options']
