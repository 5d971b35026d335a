"""``python -m minimm.plot.figures OUT_DIR`` draws the tutorials' pictures into OUT_DIR."""
from . import main

main()
