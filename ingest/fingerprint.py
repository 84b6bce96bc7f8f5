"""A cheap fingerprint of a set of trace files' content, for telling two nights apart.

`stepscope nightly` names a run by its job and the traces' start time; two different
nights whose traces start in the same second would then replace each other. The name
therefore also carries `fingerprint(files)`: a BLAKE2b digest over each file's size and
a sample of its bytes (the first and last 64 KiB and 14 blocks of 4 KiB spread evenly
in between), combined independently of the files' order and folder. A gzip file's last
bytes hold the CRC-32 and length of all its text, so for compressed traces the sample
covers the whole content; for plain JSON two different traces would need the same size
and the same bytes at every sampled offset. Reading costs ~120 KiB per file, whatever
its size.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

EDGE_BYTES = 64 << 10
BLOCK_BYTES = 4 << 10
INNER_BLOCKS = 14
DIGEST_BYTES = 6


def file_digest(path: Path) -> bytes:
    """The digest of one file's size and sampled bytes."""
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        h.update(size.to_bytes(8, "little"))
        if size <= 2 * EDGE_BYTES + INNER_BLOCKS * BLOCK_BYTES:
            h.update(fh.read())
            return h.digest()
        h.update(fh.read(EDGE_BYTES))
        span = size - 2 * EDGE_BYTES - BLOCK_BYTES
        for i in range(INNER_BLOCKS):
            fh.seek(EDGE_BYTES + span * i // max(1, INNER_BLOCKS - 1))
            h.update(fh.read(BLOCK_BYTES))
        fh.seek(size - EDGE_BYTES)
        h.update(fh.read(EDGE_BYTES))
    return h.digest()


def fingerprint(files: Iterable[Path]) -> str:
    """12 hex digits over the files' digests (order and paths do not matter)."""
    h = hashlib.blake2b(digest_size=DIGEST_BYTES)
    for digest in sorted(file_digest(p) for p in files):
        h.update(digest)
    return h.hexdigest()
