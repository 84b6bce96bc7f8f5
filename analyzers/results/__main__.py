"""`python -m stepscope.analyzers.results docs/`: regenerate the published JSON Schemas."""

import sys
from pathlib import Path

from stepscope.analyzers.results.serialize import write_schemas

for written in write_schemas(Path(sys.argv[1] if len(sys.argv) > 1 else "docs")):
    print(written)
