"""What went wrong reading a trace's events, in one line naming the event and the field,
without the paths of temporary copies.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from stepscope.ingest.json_read import read_parameters
from stepscope.ingest.sql_files import execute_statements, statements


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def conversion_problem(exc: BaseException) -> str:
    """A value DuckDB could not convert: an event's time (`ts`, `dur`) that is NaN or
    beyond what nanoseconds in 64 bits hold (±292 years) says so, in words."""
    text = first_line(exc)
    if "INT64" in text or "BIGINT" in text:
        return ("an event's time (ts or dur) is not a number or out of range: it must be "
                f"finite microseconds within ±2^63 ns ({text})")
    return f"could not be analysed ({text})"


def explain_read_error(exc: Exception) -> str:
    """Turn a DuckDB read error on the events array into a one-line problem, without the
    path of the temporary copy DuckDB read (the user's file is named by the caller)."""
    text = first_line(exc)
    if isinstance(exc, duckdb.InterruptException):
        return "cancelled"
    if "Malformed JSON" in str(exc) or "JSON" in text:
        detail = re.sub(r'^.*?Malformed JSON in file "[^"]*"', "", text).strip(" ,:")
        detail = re.sub(r'^.*?JSON transform error in file "[^"]*",?', "", detail).strip(" ,:")
        detail = re.sub(r"\brecord/value (\d+)", r"event \1", detail)
        return f"invalid JSON in traceEvents ({detail or text})"
    return f"could not be read ({without_paths(text)})"


def without_paths(text: str) -> str:
    """DuckDB's message with the quoted file names it carries (temporary copies) left out."""
    return re.sub(r'\s*(?:in )?file "[^"]*",?', "", text)


# a value's JSON type as words, for the field-type message
JSON_TYPE_WORDS = {"VARCHAR": "text", "OBJECT": "an object", "ARRAY": "a list",
                   "BOOLEAN": "true/false", "BIGINT": "a number", "UBIGINT": "a number",
                   "DOUBLE": "a number"}


_FIELD_WANTS = {"ts": "a number (microseconds)", "dur": "a number (microseconds)",
                "args": "an object"}


def bad_field(con: duckdb.DuckDBPyConnection, events_file: Path, exact: bool) -> str | None:
    """After the events could not be read or converted: which event's `ts`, `dur` or
    `args` has the wrong type, in one line ("event 12 of traceEvents ('aten::mm'): ts is
    text ("abc"), not a number (microseconds)"); None when none has (another problem)."""
    stmts = statements("read/bad_field.sql")
    try:
        execute_statements(con, stmts[:-1], read_parameters(events_file))
        row = con.execute(stmts[-1], {"exact": exact}).fetchone()
    except duckdb.Error:
        return None
    if row is None:
        return None
    n, name, field_name, json_type, text = row
    what = f" ({_short_event_name(name)!r})" if name else ""
    shown = JSON_TYPE_WORDS.get(str(json_type), str(json_type).lower())
    return (f"event {n} of traceEvents{what}: {field_name} is {shown} ({text}), not "
            f"{_FIELD_WANTS[field_name]}")


def _short_event_name(name: str, width: int = 60) -> str:
    """An event's name cut to `width` characters for a one-line message."""
    return name if len(name) <= width else name[:width - 1] + "…"
