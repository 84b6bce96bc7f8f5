"""`stepscope export --format perfetto`: the same events as the Chrome trace-event export
(analyzers/export.py, the same SQL and the same chunks), written as Perfetto's protobuf
trace by Google's `perfetto` package (`StreamingTraceProtoBuilder`, one TracePacket at a
time, so memory stays the JSON export's). Mapping (docs/timeline.md, "Export"): a track
per rank (`process_name`) and a child track per thread or stream (`thread_name`); each
complete event a begin and an end TrackEvent on its track with its args as debug
annotations, at the JSON's times plus the origin (ns on the reference rank's clock:
Perfetto's times are unsigned); each flow end an instant on its track carrying the
flow's id (outgoing at `s`, terminating at `f`). Per event in Python: protobuf
messages are built one by one."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import IO, Any

import duckdb

CHUNK_ROWS = 20_000
SEQUENCE = 1


def available() -> bool:
    """Whether the `perfetto` package (stepscope[perfetto]) is installed."""
    try:
        import perfetto.trace_builder.proto_builder  # noqa: F401
    except ImportError:
        return False
    return True


def _uid(text: str) -> int:
    """A stable 63-bit id for a track or a flow."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest()) >> 1


class PerfettoWriter:
    """Takes the export's event lines (JSON objects of the trace-event format) and writes
    them as TracePackets; the same interface as export._EventWriter."""

    def __init__(self, out: IO[bytes], origin_ns: int) -> None:
        from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket, TrackEvent
        from perfetto.trace_builder.proto_builder import StreamingTraceProtoBuilder

        self.builder = StreamingTraceProtoBuilder(out)
        self.te, self.tp = TrackEvent, TracePacket
        self.declared: set[tuple[int, int | None]] = set()
        self.count = 0
        self.first = True
        self.origin = origin_ns  # Perfetto's times are unsigned: ns on the reference clock

    def rows(self, cursor: duckdb.DuckDBPyConnection) -> None:
        while chunk := cursor.fetchmany(CHUNK_ROWS):
            self.lines(ev for (ev,) in chunk)

    def lines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.event(json.loads(line))
            self.count += 1

    def _packet(self) -> Any:
        p = self.builder.create_packet()
        p.trusted_packet_sequence_id = SEQUENCE
        if self.first:
            p.sequence_flags = self.tp.SEQ_INCREMENTAL_STATE_CLEARED
            self.first = False
        return p

    def _track(self, pid: int, tid: int | None, name: str | None = None) -> int:
        """The track of a rank (tid None) or of one of its threads, declared on first use
        (and again when a name comes)."""
        key = (pid, tid)
        uuid = _uid(f"{pid}/{tid}")
        if key in self.declared and name is None:
            return uuid
        if tid is not None:
            self._track(pid, None)
        self.declared.add(key)
        p = self._packet()
        d = p.track_descriptor
        d.uuid = uuid
        if tid is None:
            d.process.pid = pid
            d.process.process_name = name or f"rank {pid}"
        else:
            d.parent_uuid = _uid(f"{pid}/None")
            d.name = name or f"thread {tid}"
        self.builder.write_packet(p)
        return uuid

    def _track_event(self, ts_us: float, kind: int, track: int, ev: dict[str, Any]) -> Any:
        p = self._packet()
        p.timestamp = self.origin + round(ts_us * 1000)
        t = p.track_event
        t.type = kind
        t.track_uuid = track
        if kind != self.te.TYPE_SLICE_END:
            t.name = str(ev.get("name", ""))
            if ev.get("cat"):
                t.categories.append(str(ev["cat"]))
        return p

    def event(self, ev: dict[str, Any]) -> None:
        ph, pid, tid = ev.get("ph"), int(ev.get("pid", 0)), ev.get("tid")
        if ph == "M":
            name = str(ev.get("args", {}).get("name", ""))
            if ev.get("name") == "process_name":
                self._track(pid, None, name)
            elif ev.get("name") == "thread_name" and tid is not None:
                self._track(pid, int(tid), name)
            return
        track = self._track(pid, int(tid) if tid is not None else None)
        if ph == "X":
            begin = self._track_event(ev["ts"], self.te.TYPE_SLICE_BEGIN, track, ev)
            _annotate(begin.track_event, ev.get("args") or {})
            self.builder.write_packet(begin)
            end = self._track_event(ev["ts"] + ev.get("dur", 0), self.te.TYPE_SLICE_END,
                                    track, ev)
            self.builder.write_packet(end)
        elif ph in ("s", "f"):
            p = self._track_event(ev["ts"], self.te.TYPE_INSTANT, track, ev)
            flows = (p.track_event.flow_ids if ph == "s"
                     else p.track_event.terminating_flow_ids)
            flows.append(_uid(f"flow/{ev.get('cat')}/{ev.get('id')}"))
            self.builder.write_packet(p)


def _annotate(track_event: Any, args: dict[str, Any]) -> None:
    """The event's args as debug annotations (numbers as numbers, the rest as text)."""
    for key, value in args.items():
        if value is None:
            continue
        a = track_event.debug_annotations.add()
        a.name = str(key)
        if isinstance(value, bool):
            a.bool_value = value
        elif isinstance(value, int) and -(1 << 63) <= value < (1 << 63):
            a.int_value = value
        elif isinstance(value, float):
            a.double_value = value
        elif isinstance(value, str):
            a.string_value = value
        else:
            a.string_value = json.dumps(value)


__all__ = ["PerfettoWriter", "available"]
