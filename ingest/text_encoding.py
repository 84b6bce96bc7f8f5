"""UTF-16 and UTF-32 text told from its first bytes.

torch.profiler and NCCL write UTF-8, but a trace re-saved by an editor or PowerShell
(`Out-File` writes UTF-16) is still JSON to Python's json.loads, which reads those
encodings from bytes: such a file was once skipped as "a .json that is no trace" and
the folder reported as holding none. It is named as what it is instead (one line, the
file's failure). Light on purpose (imports only re): sources.py sniffs with it.
"""

from __future__ import annotations

import re

# Byte-order marks of the wide encodings, the 4-byte ones first (UTF-32-LE's starts
# like UTF-16-LE's); JSON text without one is told by the NULs beside its first
# characters, which are ASCII (RFC 4627 section 3).
_WIDE_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
              (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))
_WIDE_NULS = ((re.compile(rb"[\x01-\x7f]\x00\x00\x00|\x00\x00\x00[\x01-\x7f]"), "UTF-32"),
              (re.compile(rb"(?:[\x01-\x7f]\x00){2}|(?:\x00[\x01-\x7f]){2}"), "UTF-16"))


def wide_text_encoding(head: bytes) -> str | None:
    """'UTF-16' or 'UTF-32' when these first bytes start text in that encoding (a BOM,
    or NULs beside ASCII as in `{\\0"\\0`), else None: such a trace is named as what it
    is, never read as binary data, cut JSON or no trace."""
    for bom, name in _WIDE_BOMS:
        if head.startswith(bom):
            return name
    return next((name for nuls, name in _WIDE_NULS if nuls.match(head[:4])), None)


def wide_text_problem(encoding: str) -> str:
    return (f"{encoding} text, not UTF-8: stepscope reads traces in UTF-8 (convert it, "
            f"e.g. iconv -f {encoding} -t UTF-8)")
