"""The type and range of every NCCL Inspector field the reader uses, declared once and
checked in bulk by DuckDB (nccl/inspector_check.sql) before any value is stored.

A JSON value of the wrong type was cast or stored as it came: `coll_sn: true` read as 1,
a message size written as the text "1024" as 1024, `coll` an object stored as its JSON
text. Each field now states the JSON type it takes (a JSON boolean is no integer, a text
no number, 1.5 no rank) and its range; a line outside them fails the file alone, with
one line naming the field, the count of such lines and the first such value. A field
absent or null is missing: the reader's required fields (header.id, header.n_ranks,
header.rank, the op's name and execution time) are checked for that after reading (inspector.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stepscope.ingest.errors import TraceFileError

# The JSON type each kind takes, as the messages name it.
KIND_NAMES = {"object": "a JSON object", "text": "a string", "int": "an integer",
              "number": "a number"}
MAX_EXEC_TIME_US = 86_400e6
TIMESTAMP_LIMIT = 2 ** 53  # µs: 285 years; op_groups.sql multiplies spans by 10 in BIGINT


@dataclass(frozen=True)
class Field:
    """One field of an Inspector line: `part` (header, metadata, coll_perf, p2p_perf),
    `key` in it ('' for the part itself), the JSON `kind` it takes, and for numbers the
    range: `low` <= value, value < `high` for an int, value <= `high` for a number
    (always finite), and value < header.`below` when that field is given."""

    part: str
    key: str
    kind: str
    low: float = 0.0
    high: float = math.inf
    below: str = ""
    range_text: str = ""

    @property
    def name(self) -> str:
        return f"{self.part}.{self.key}" if self.key else self.part

    def as_param(self, pos: int) -> dict[str, object]:
        return {"pos": pos, "part": self.part, "key": self.key, "kind": self.kind,
                "low": self.low, "high": self.high, "below": self.below}


def _int(part: str, key: str, high: float, text: str, low: float = 0.0,
         below: str = "") -> Field:
    return Field(part, key, "int", low, high, below, text)


def _perf(kind: str, op: str, extra: tuple[Field, ...] = ()) -> tuple[Field, ...]:
    """The fields of `coll_perf` (kind 'coll') or `p2p_perf` ('p2p')."""
    part = f"{kind}_perf"
    return (Field(part, "", "object"), Field(part, op, "text"),
            _int(part, f"{kind}_sn", 2.0 ** 63, "outside [0, 2^63)"), *extra,
            _int(part, f"{kind}_msg_size_bytes", 2.0 ** 63, "outside [0, 2^63)"),
            # NCCL's watchdog aborts an op after 10 minutes by default: over a day is no
            # measurement, and 1e308 µs would sum to infinity in a report.
            Field(part, f"{kind}_exec_time_us", "number", 0.0, MAX_EXEC_TIME_US,
                  range_text="negative, not finite or over a day (86,400,000,000 us)"),
            Field(part, f"{kind}_timing_source", "text"),
            Field(part, f"{kind}_algobw_gbs", "number", range_text="negative or not finite"),
            Field(part, f"{kind}_busbw_gbs", "number", range_text="negative or not finite"))


# In the order they are checked: a part before its fields, header.n_ranks before the
# ranks it bounds, so the first problem shown is the cause, never a follow-on.
FIELDS: tuple[Field, ...] = (
    Field("header", "", "object"), Field("header", "id", "text"),
    Field("header", "comm_name", "text"),
    _int("header", "n_ranks", 2.0 ** 31, "outside [1, 2^31)", low=1.0),
    _int("header", "rank", 2.0 ** 31, "outside [0, header.n_ranks)", below="n_ranks"),
    _int("header", "nnodes", 2.0 ** 31, "outside [1, 2^31)", low=1.0),
    Field("metadata", "", "object"),
    Field("metadata", "inspector_output_format_version", "text"),
    _int("metadata", "dump_timestamp_us", TIMESTAMP_LIMIT, "outside [0, 2^53)"),
    Field("metadata", "hostname", "text"),
    _int("metadata", "pid", 2.0 ** 31, "outside [0, 2^31)"),
    *_perf("coll", "coll"),
    *_perf("p2p", "p2p", (_int("p2p_perf", "p2p_peer", 2.0 ** 31, "outside [0, header.n_ranks)",
                               below="n_ranks"),)),
)


PARTS = ("header", "metadata", "coll_perf", "p2p_perf")


def check_params() -> dict[str, object]:
    """The parameters of nccl/inspector_check.sql: $fields (FIELDS, each with its `slot`,
    the 1-based place of its key among its part's keys) and, per part, the JSON paths of
    its keys ($header_paths, ...): a part is parsed once, for all its fields at a time."""
    keys: dict[str, list[str]] = {part: [] for part in PARTS}
    fields = []
    for pos, field in enumerate(FIELDS):
        if field.key:
            keys[field.part].append(field.key)
        fields.append({**field.as_param(pos), "slot": len(keys[field.part])})
    return {"fields": fields, **{f"{part}_paths": [f"$.{key}" for key in keys[part]]
                                 for part in PARTS}}


def raise_first_problem(rows: list[tuple[int, str, int, str]], display: str) -> None:
    """TraceFileError for the first (field position, problem, count, first value) row of
    nccl/inspector_check.sql, problems being 'type' or 'range'; nothing when none."""
    if not rows:
        return
    pos, problem, count, value = min(rows, key=lambda row: (row[0], row[1] != "type"))
    field = FIELDS[pos]
    what = (f"not {KIND_NAMES[field.kind]}" if problem == "type"
            else field.range_text)
    raise TraceFileError(display, f"{count} NCCL Inspector line(s) with {field.name} {what} "
                         f"(first: {_shown(value)})")


def _shown(value: str) -> str:
    """A JSON value as the message shows it: at most 40 characters."""
    return value if len(value) <= 40 else value[:37] + "..."
