"""An NCCL Inspector op's sequence number (coll_sn / p2p_sn) counts the communicator's ops
from 0: a negative one is no op of a real communicator, and matching ops across ranks by
it would pair unrelated ops. Such a file fails alone with one line and the count of such
lines, as one with header.rank outside [0, header.n_ranks) does."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from stepscope.ingest.errors import TraceFileError


def check_sequence_numbers(table: pa.Table, display: str) -> None:
    """TraceFileError (one line) when a line's `seq` is below 0."""
    count = pc.sum(pc.cast(pc.fill_null(pc.less(table.column("seq"), 0), False),
                           pa.int64())).as_py() or 0
    if count:
        raise TraceFileError(display, f"{count} NCCL Inspector line(s) with a sequence number "
                             "(coll_sn / p2p_sn) below 0")
