"""Read one PyTorch Flight Recorder dump (pickle, or the JSON of the `_json` API).

A dump is what one rank's NCCL process-group watchdog wrote when a collective timed out
(`TORCH_NCCL_DUMP_ON_TIMEOUT=1`, file `<TORCH_NCCL_DEBUG_INFO_TEMP_FILE prefix><rank>`):
the rank's process groups (`pg_config`, keyed by pg_name), the last enqueued / started /
completed sequence number per group (`pg_status`, keyed by the rank-local pg_id) and the
ring buffer of recent collectives and P2P ops (`entries`). Fields and versions:
../shared/reference/trace-formats.md §3a; checked against real torch dumps of FR format
"2.9" (NCCL 2.27.3) and the JSON form of format "2.10".

The pickle is untrusted and is loaded with `ingest.nccl.safe_pickle` (plain data only).
Each dump becomes three small tables (docs/schema.md): `fr_dumps`, `fr_groups`,
`fr_entries`. Nothing here knows the run or the database.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from stepscope.ingest.errors import TraceFileError, one_line
from stepscope.ingest.limits import format_size, max_trace_bytes
from stepscope.ingest.nccl.safe_pickle import (
    MAX_BUILD_BYTES,
    OBJECT_BYTES,
    TooLargeError,
    UnsafePickleError,
    load_plain,
)
from stepscope.ingest.ranksets import MAX_RANK

BACKEND_PREFIXES = ("nccl", "ncclx", "xccl", "gloo", "rccl", "rcclx", "mccl", "hccl")
_P2P_NAME = re.compile(r"^(send|recv)\s+(\d{1,9})\s*(->|<-)\s*(\d{1,9})$")
_TRAILING_RANK = re.compile(r"(\d+)(?:\.(?:json|pkl|pickle))?$", re.IGNORECASE)
# A dump is one rank's ring buffer (TORCH_FR_BUFFER_SIZE entries, 2,000 by default): a
# few MB; 20,000 entries with 20 stack frames each are 19 MB of pickle, 37 MB of JSON.
# It is parsed whole, so it is refused past this size (or the per-file limit if lower).
MAX_FR_BYTES = 64 << 20
INT64 = (-(1 << 63), (1 << 63) - 1)

ENTRY_SCHEMA = pa.schema([
    ("record_id", pa.int64()), ("pg_id", pa.int64()), ("pg_name", pa.string()),
    ("pg_desc", pa.string()), ("collective_seq_id", pa.int64()), ("p2p_seq_id", pa.int64()),
    ("op_id", pa.int64()), ("profiling_name", pa.string()), ("backend", pa.string()),
    ("op", pa.string()), ("is_p2p", pa.bool_()), ("peer_local_rank", pa.int32()),
    ("peer_rank", pa.int32()), ("state", pa.string()), ("retired", pa.bool_()),
    ("time_created_ns", pa.int64()), ("time_started_ns", pa.int64()),
    ("time_completed_ns", pa.int64()), ("duration_ms", pa.float64()),
    ("timeout_ms", pa.int64()), ("input_sizes", pa.list_(pa.list_(pa.int64()))),
    ("output_sizes", pa.list_(pa.list_(pa.int64()))), ("input_dtypes", pa.list_(pa.string())),
    ("output_dtypes", pa.list_(pa.string())), ("thread_id", pa.string()),
    ("thread_name", pa.string()), ("frames", pa.string()),
])
GROUP_SCHEMA = pa.schema([
    ("pg_name", pa.string()), ("pg_desc", pa.string()), ("ranks", pa.list_(pa.int32())),
    ("pg_id", pa.int64()), ("pg_id_source", pa.string()), ("last_enqueued_seq", pa.int64()),
    ("last_started_seq", pa.int64()), ("last_completed_seq", pa.int64()),
])


@dataclass
class FrDump:
    """One rank's Flight Recorder dump, as rows for the fr_* tables."""

    file: str
    format: str                      # pickle | json
    version: str | None
    comm_lib_version: str | None
    rank: int
    rank_source: str                 # file_name | pg_config
    rank_conflict: str | None        # set when the name and pg_config disagree
    entries: pa.Table
    groups: pa.Table
    n_entries: int = 0
    only_active: bool = False
    warnings: list[str] = field(default_factory=list)


def read_flight_recorder(path: Path, display: str, max_bytes: int | None = None) -> FrDump:
    """Parse one dump; raises TraceFileError (one line) for anything unreadable, and for
    a dump past MAX_FR_BYTES or the per-file limit `max_bytes` (ingest.limits), before
    reading it."""
    data = _read_capped(path, display, max_bytes)
    # JSON starts with '{'; anything else is a pickle (protocols 0-1 are ASCII text)
    fmt = "json" if data.lstrip()[:1] == b"{" else "pickle"
    raw = _decode(data, fmt, display)
    return _build(raw, fmt, display)


def _read_capped(path: Path, display: str, max_bytes: int | None) -> bytes:
    limit = max_trace_bytes(max_bytes)
    try:
        size = path.stat().st_size
        if size > min(limit, MAX_FR_BYTES):
            raise TraceFileError(display, _too_large(size, limit))
        data = path.read_bytes()
    except OSError as exc:
        raise TraceFileError(display, f"cannot read ({exc.strerror or exc})") from None
    if not data:
        raise TraceFileError(display, "empty file")
    return data


def _too_large(size: int, limit: int) -> str:
    if size > limit:
        return (f"{format_size(size)}, more than {format_size(limit)}, the per-trace limit "
                "(raise it with --max-trace-size or STEPSCOPE_MAX_TRACE_SIZE if it is real)")
    return (f"{format_size(size)}, more than a Flight Recorder dump holds (at most "
            f"{format_size(MAX_FR_BYTES)}: one rank's last TORCH_FR_BUFFER_SIZE entries)")


def json_build_bytes(data: bytes) -> int:
    """What json.loads would build, roughly: every value (at most one per ',', '[' or
    '{') as an object, plus the text; counted at C speed, nothing parsed."""
    values = data.count(b",") + data.count(b"[") + data.count(b"{") + 1
    return values * OBJECT_BYTES + len(data)


def _decode(data: bytes, fmt: str, display: str) -> dict[str, Any]:
    try:
        if fmt == "json" and json_build_bytes(data) > MAX_BUILD_BYTES:
            raise TooLargeError(f"parsing it would take more than {MAX_BUILD_BYTES >> 20} "
                                "MiB of memory (far more values than a dump holds)")
        raw = load_plain(data) if fmt == "pickle" else json.loads(data)
    except UnsafePickleError as exc:
        raise TraceFileError(display, f"refused to load this pickle: {exc}; a Flight "
                             "Recorder dump holds only plain data (nothing was executed)"
                             ) from None
    except TooLargeError as exc:
        raise TraceFileError(display, f"refused to load this Flight Recorder dump: {exc}"
                             ) from None
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        what = "pickle" if fmt == "pickle" else "JSON"
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TraceFileError(display, f"not a readable Flight Recorder {what} ({detail})"
                             ) from None
    if not isinstance(raw, dict) or not ({"pg_config", "entries"} & raw.keys()):
        raise TraceFileError(display, "not a Flight Recorder dump: no pg_config or entries "
                             "at the top level")
    return raw


def _build(raw: dict[str, Any], fmt: str, display: str) -> FrDump:
    config = _as_dict(raw.get("pg_config"), "pg_config", display)
    members = {str(k): _ranks(v, display) for k, v in config.items()}
    entries_raw = raw.get("entries") or []
    if not isinstance(entries_raw, list):
        raise TraceFileError(display, "Flight Recorder entries is not a list")
    rows = [_entry_row(e, i, members, display) for i, e in enumerate(entries_raw)]
    rank, source, conflict = _resolve_rank(display, members)
    version = raw.get("version")
    lib = raw.get("comm_lib_version", raw.get("nccl_version"))
    dump = FrDump(
        file=display, format=fmt, version=None if version is None else str(version),
        comm_lib_version=None if lib is None else str(lib), rank=rank, rank_source=source,
        rank_conflict=conflict, entries=pa.Table.from_pylist(rows, schema=ENTRY_SCHEMA),
        groups=_groups_table(config, members, raw.get("pg_status"), rows, display),
        n_entries=len(rows),
        only_active=bool(rows) and all(r["state"] != "completed" for r in rows),
    )
    return dump


def _as_dict(value: Any, what: str, display: str) -> dict[Any, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TraceFileError(display, f"Flight Recorder {what} is not a mapping")
    return value


def _ranks(cfg: Any, display: str) -> list[int]:
    """`"ranks": "[0, 1]"` (a string in every known version) or a list."""
    text = cfg.get("ranks") if isinstance(cfg, dict) else None
    if isinstance(text, list):
        values = text
    elif isinstance(text, str):
        try:
            values = json.loads(text)
        except ValueError:
            raise TraceFileError(display, f"pg_config ranks {text[:40]!r} is not a list"
                                 ) from None
    else:
        return []
    if not isinstance(values, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_RANK
            for v in values):
        raise TraceFileError(display, "pg_config ranks holds something other than ranks "
                             f"(integers from 0 to {MAX_RANK})")
    return [int(v) for v in values]


def _int(value: Any) -> int | None:
    """Ints from pickles; numeric strings from the JSON form; 0/None/'' as missing."""
    if isinstance(value, bool) or value is None:
        return None
    number: int | None = None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and re.fullmatch(r"-?\d{1,19}", value.strip()):
        number = int(value)
    return number if number is not None and INT64[0] <= number <= INT64[1] else None


def _checked(e: dict[str, Any], key: str) -> int | None:
    """`_int` of an entry's field, but a number that no 64-bit field holds (2**70, a
    NaN, 2.5), a boolean (True is an int in Python, no id or time), a list or mapping, or
    text that is no number ("soon"; the JSON form's digits are read) fails the dump: each
    was stored as missing, in silence."""
    value = e.get(key)
    if isinstance(value, bool | list | tuple | dict):
        raise ValueError(f"{key} is not a whole number ({type(value).__name__} "
                         f"{str(value)[:40]})")
    if isinstance(value, int) and not isinstance(value, bool) \
            and not INT64[0] <= value <= INT64[1]:
        raise ValueError(f"{key} is out of range (a {value.bit_length()}-bit integer; "
                         "64 bits at most)")
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(f"{key} is not a whole number ({value!r})")
    if isinstance(value, float) and not INT64[0] <= value <= INT64[1]:
        raise ValueError(f"{key} is out of range ({value!r}; 64 bits at most)")
    number = _int(value)
    if number is None and isinstance(value, str) and value.strip():  # "soon": no number
        raise ValueError(f"{key} is not a whole number within 64 bits "
                         f"({one_line(value[:40])!r})")
    return number


def _time(value: Any) -> int | None:
    ns = _int(value)
    return ns if ns else None  # the JSON form writes 0 for "not observed"


def _sizes(value: Any) -> list[list[int]] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple):
        raise ValueError("sizes is not a list")
    out = []
    for shape in value:
        if not isinstance(shape, list | tuple) or not all(_int(d) is not None for d in shape):
            raise ValueError("a tensor shape is not a list of integers")
        out.append([int(_int(d) or 0) for d in shape])
    return out


def _strings(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple):
        raise ValueError("dtypes is not a list")
    return [str(v) for v in value]


def split_profiling_name(name: str) -> tuple[str | None, str, int | None]:
    """'nccl:all_reduce' -> ('nccl', 'all_reduce', None); 'nccl:send 0->3' -> send to 3;
    'nccl:recv 0<-3' -> recv from 3 (peers are group-local ranks)."""
    backend, _, op = name.partition(":") if ":" in name else (None, "", name)
    if backend is not None and backend not in BACKEND_PREFIXES:
        backend, op = None, name
    match = _P2P_NAME.match(op.strip())
    if match:
        return backend, match.group(1), int(match.group(4))
    return backend, op.strip(), None


def _entry_row(e: Any, index: int, members: dict[str, list[int]],
               display: str) -> dict[str, Any]:
    if not isinstance(e, dict):
        raise TraceFileError(display, f"Flight Recorder entry {index} is not a mapping")
    try:
        return _entry_fields(e, members)
    except (ValueError, TypeError) as exc:
        raise TraceFileError(display, f"Flight Recorder entry {index}: {exc}") from None


def _entry_fields(e: dict[str, Any], members: dict[str, list[int]]) -> dict[str, Any]:
    pg = e.get("process_group")
    if not isinstance(pg, list | tuple) or len(pg) < 2:
        raise ValueError("process_group is not a (name, description) pair")
    pg_name, pg_desc = str(pg[0]), str(pg[1])
    name = e.get("profiling_name")
    if name is None:
        raise ValueError("profiling_name is missing")
    if not isinstance(name, str):  # 7 was "missing" too: say what it is
        raise ValueError(f"profiling_name is not text ({type(name).__name__} "
                         f"{one_line(repr(name))[:40]})")
    backend, op, peer_local = split_profiling_name(name)
    group = members.get(pg_name, [])
    peer = group[peer_local] if peer_local is not None and peer_local < len(group) else None
    state = e.get("state")
    if state not in ("scheduled", "started", "completed"):
        raise ValueError(f"unknown state {state!r}")
    frames = e.get("frames")
    duration = e.get("duration_ms")
    return {
        "record_id": _checked(e, "record_id"), "pg_id": _checked(e, "pg_id"),
        "pg_name": pg_name, "pg_desc": pg_desc,
        "collective_seq_id": _checked(e, "collective_seq_id"),
        "p2p_seq_id": _checked(e, "p2p_seq_id"), "op_id": _checked(e, "op_id"),
        "profiling_name": name, "backend": backend, "op": op,
        "is_p2p": bool(e.get("is_p2p", peer_local is not None)),
        "peer_local_rank": peer_local, "peer_rank": peer, "state": state,
        "retired": bool(e.get("retired")) if e.get("retired") is not None else None,
        "time_created_ns": _time(_checked(e, "time_created_ns")),
        "time_started_ns": _time(_checked(e, "time_discovered_started_ns")),
        "time_completed_ns": _time(_checked(e, "time_discovered_completed_ns")),
        "duration_ms": float(duration) if isinstance(duration, int | float)
        and not isinstance(duration, bool) else None,
        "timeout_ms": _checked(e, "timeout_ms"),
        "input_sizes": _sizes(e.get("input_sizes")),
        "output_sizes": _sizes(e.get("output_sizes")),
        "input_dtypes": _strings(e.get("input_dtypes")),
        "output_dtypes": _strings(e.get("output_dtypes")),
        "thread_id": None if e.get("thread_id") is None else str(e.get("thread_id")),
        "thread_name": None if e.get("thread_name") is None else str(e.get("thread_name")),
        "frames": json.dumps(frames) if frames else None,
    }


def rank_from_dump_name(display: str) -> int | None:
    """The number a dump's file name ends with (`<prefix><rank>`, `.json`/`.pkl` aside);
    TraceFileError when it is past the largest rank."""
    name = display.replace("\\", "/").rsplit("/", 1)[-1].rsplit("!", 1)[-1]
    match = _TRAILING_RANK.search(name)
    if match is None:
        return None
    digits = match.group(1)
    if len(digits) > 10 or int(digits) > MAX_RANK:
        raise TraceFileError(display, f"its name ends with {digits[:40]} (`<prefix><rank>`), "
                             f"which is not a rank (0 to {MAX_RANK}); rename it like _dump_3")
    return int(digits)


def _resolve_rank(display: str, members: dict[str, list[int]]) -> tuple[int, str, str | None]:
    """The dump's global rank: the number its file name ends with (`<prefix><rank>`),
    checked against pg_config (a rank belongs to every group in its own pg_config)."""
    from_name = rank_from_dump_name(display)
    common: set[int] | None = None
    for ranks in members.values():
        if ranks:
            common = set(ranks) if common is None else common & set(ranks)
    from_config = next(iter(common)) if common is not None and len(common) == 1 else None
    if from_name is not None:
        conflict = None
        if common is not None and from_name not in common:
            conflict = (f"its name says rank {from_name} but its pg_config groups only all "
                        f"contain {sorted(common)[:8]}")
        return from_name, "file_name", conflict
    if from_config is not None:
        return from_config, "pg_config", None
    raise TraceFileError(display, "cannot tell which rank this Flight Recorder dump is: "
                         "its name does not end with the rank (`<prefix><rank>`) and its "
                         "pg_config does not single one out; rename it like _dump_3")


def _groups_table(config: dict[Any, Any], members: dict[str, list[int]], status: Any,
                  rows: list[dict[str, Any]], display: str) -> pa.Table:
    status = _as_dict(status, "pg_status", display)
    ids = _pg_ids(config, status, rows)
    out = []
    for pg_name, cfg in config.items():
        pg_name = str(pg_name)
        pg_id, source = ids.get(pg_name, (None, None))
        st = status.get(str(pg_id), {}) if pg_id is not None else {}
        st = st if isinstance(st, dict) else {}
        out.append({
            "pg_name": pg_name,
            "pg_desc": str(cfg.get("desc")) if isinstance(cfg, dict) else None,
            "ranks": members[pg_name], "pg_id": pg_id, "pg_id_source": source,
            "last_enqueued_seq": _int(st.get("last_enqueued_collective")),
            "last_started_seq": _int(st.get("last_started_collective")),
            "last_completed_seq": _int(st.get("last_completed_collective")),
        })
    return pa.Table.from_pylist(out, schema=GROUP_SCHEMA)


def _pg_ids(config: dict[Any, Any], status: dict[Any, Any],
            rows: list[dict[str, Any]]) -> dict[str, tuple[int, str]]:
    """pg_name -> rank-local pg_id. The entries name both; groups without entries get
    theirs from creation order (pg_ids and numeric pg_names both grow as groups are
    created), used only when it agrees with every pair the entries show."""
    known = {r["pg_name"]: r["pg_id"] for r in rows if r["pg_id"] is not None}
    out = {name: (pg_id, "entries") for name, pg_id in known.items()}
    names = [str(n) for n in config]
    ids = [i for i in (_int(k) for k in status) if i is not None]
    if len(names) != len(ids) or not all(n.isdigit() for n in names):
        return out
    by_order = dict(zip(sorted(names, key=int), sorted(ids), strict=True))
    if any(by_order.get(name) != pg_id for name, pg_id in known.items()):
        return out
    for name, pg_id in by_order.items():
        out.setdefault(name, (pg_id, "creation_order"))
    return out
