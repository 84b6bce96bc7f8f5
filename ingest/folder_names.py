"""Whether a path as written names a folder, whatever is on disk: a name that ends with
'/' or whose last part is '.' or '..' ('x.duckdb/.' would open or create 'x.duckdb', 'out/'
would write a file named 'out'). pathlib drops a trailing '/.' (Path('x/.') is Path('x')),
so the check reads the text the user gave."""

from __future__ import annotations

import os


def names_a_folder(text: str) -> bool:
    """True for 'x/', 'x/.', 'x/..', '.', '..' (and the same with os.sep)."""
    if text.endswith(("/", os.sep)):
        return True
    return os.path.basename(text) in (".", "..")


def folder_ending(text: str) -> str:
    """How `text` ends, as the message about it shows it: '/', '/.' or '/..'."""
    if text.endswith(("/", os.sep)):
        return "/"
    return "/" + os.path.basename(text) if "/" in text else os.path.basename(text)
