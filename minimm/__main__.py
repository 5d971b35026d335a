"""``python -m minimm ...`` is the ``minimm`` command."""
import sys

from .cli import command_line

sys.exit(command_line())
