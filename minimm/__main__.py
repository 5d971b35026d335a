"""``python -m minimm ...`` is the ``minimm`` command."""
from .cli import main

main()
