"""The `ranks` table's `distributed_info` without the job-sized rank lists (docs/schema.md,
`ranks`; issue 44).

Every rank's trace lists its process groups in `distributedInfo.pg_config`, each with
every member rank, and the default group holds every rank of the job: the object grows
with the job (12 KB of JSON per rank at 2,048 ranks), so the column grows with the square
of the ranks, and DuckDB holds the whole uncommitted column in the writer until the
commit, which reads it back in vectors of 2,048 rows (+51 MB on top of the writer at
2,048 ranks, benchmarks/README.md "The writer's growth in ranks").

A group's `ranks` list of at least MIN_RANGE_RANKS ranks that steps evenly
(`range(first, first + count * step, step)`: the default group, a data-parallel group) is
stored as the object `{"stepscope_range": [first, step, count]}` in its place, the same
key in the same position; `analyzers/sql/export/rank_meta.sql` puts the list back (the export's
`distributedInfo` is the trace's own). Shorter lists, and lists that do not step evenly,
are stored as the trace gave them; an object whose text already holds the key
`stepscope_range` is stored without spaces, so that what is expanded was always written
here.
"""

from __future__ import annotations

import json
from typing import Any

RANGE_KEY = "stepscope_range"
# Shorter lists cost at most a few hundred bytes per group and rank, and stay as the trace
# wrote them (a small job's stored object is the raw one).
MIN_RANGE_RANKS = 64
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def stored_text(info: dict[str, Any]) -> str | None:
    """The JSON text stored for `info`: each long, evenly stepping `ranks` list of its
    `pg_config` entries written as a range; None where `info` is not valid JSON (NaN,
    cycles, deep nesting). An object whose text already holds the key RANGE_KEY is
    written without spaces, which the expansion's pattern (`": [` and `, `) never matches,
    so that only what was written here is expanded."""
    text = _json(info)
    if text is None:
        return None
    if f'"{RANGE_KEY}"' in text:
        return json.dumps(info, separators=(",", ":"), allow_nan=False)
    groups = info.get("pg_config")
    if not isinstance(groups, list):
        return text
    compacted = [_compact_group(group) for group in groups]
    if all(new is old for new, old in zip(compacted, groups, strict=True)):
        return text
    return json.dumps({**info, "pg_config": compacted})


def _json(value: Any) -> str | None:
    try:
        return json.dumps(value, allow_nan=False)
    except (ValueError, TypeError, RecursionError):
        return None


def _compact_group(group: Any) -> Any:
    """One `pg_config` entry, its `ranks` written as a range where it is one."""
    if not isinstance(group, dict):
        return group
    span = _range_of(group.get("ranks"))
    if span is None:
        return group
    return {**group, "ranks": {RANGE_KEY: list(span)}}


def _range_of(ranks: Any) -> tuple[int, int, int] | None:
    """(first, step, count) of a list of at least MIN_RANGE_RANKS 32-bit integers that
    steps evenly by a step other than 0; None for anything else."""
    if not isinstance(ranks, list) or len(ranks) < MIN_RANGE_RANKS:
        return None
    if not all(type(r) is int for r in ranks):  # bool is not a rank
        return None
    first, step = ranks[0], ranks[1] - ranks[0]
    if not (_INT32_MIN <= min(first, ranks[-1]) and max(first, ranks[-1]) <= _INT32_MAX):
        return None  # the export expands ranges as BIGINT: no rank is that large anyway
    if step == 0 or ranks != list(range(first, first + len(ranks) * step, step)):
        return None
    return first, step, len(ranks)
