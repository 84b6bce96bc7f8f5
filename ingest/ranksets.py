"""`--ranks 0-63,512`: the subset of a job's ranks to ingest (a quick first look)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from stepscope.ingest.errors import UsageError
from stepscope.ingest.number_text import list_items

_PART = re.compile(r"([0-9]{1,4000})(?:-([0-9]{1,4000}))?", re.ASCII)  # \d: any script's
MAX_RANK = 2**31 - 1  # ranks are INTEGER columns


@dataclass(frozen=True)
class RankSet:
    """Inclusive rank ranges, merged and sorted; `str()` gives the canonical spec."""

    ranges: tuple[tuple[int, int], ...]

    def __contains__(self, rank: object) -> bool:
        return isinstance(rank, int) and any(lo <= rank <= hi for lo, hi in self.ranges)

    def __str__(self) -> str:
        return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in self.ranges)

    @property
    def size(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self.ranges)


def parse_ranks(spec: str) -> RankSet:
    """'0-63,512' -> RankSet; raises UsageError naming the bad part."""
    parts = list_items(spec)  # ASCII digits only, no space around an item but a comma's
    if any(not p for p in parts):
        raise UsageError(f"--ranks '{spec}': give ranks and ranges like 0-63,512")
    ranges: list[tuple[int, int]] = []
    for part in parts:
        match = _PART.fullmatch(part)
        if match is None:
            raise UsageError(f"--ranks '{spec}': '{part}' is not a rank or a range like 0-63")
        lo = int(match.group(1))
        hi = int(match.group(2)) if match.group(2) is not None else lo
        if hi < lo:
            raise UsageError(f"--ranks '{spec}': the range '{part}' runs backwards")
        if hi > MAX_RANK:
            raise UsageError(f"--ranks '{spec}': rank {hi} is out of range (0 to {MAX_RANK})")
        ranges.append((lo, hi))
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return RankSet(tuple(merged))
