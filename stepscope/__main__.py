"""`python -m stepscope`: the CLI. Python puts the current folder first on the import
path for `-m`; a folder holding `inspect.py` or `json.py` would then replace the standard
library's modules (the command died with exit 3 and no output), so it is taken off
before anything else is imported (stepscope itself is already found; `-P` does the same)."""

import os
import sys

if not sys.flags.safe_path and sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from stepscope.cli import entry

entry()
