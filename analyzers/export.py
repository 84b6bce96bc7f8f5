"""`stepscope export`: one trace-event file of every chosen rank on the aligned clock
(docs/timeline.md, "Export"), for Perfetto's UI and chrome://tracing.

Every rank is a process `rank N (host)`, with a thread per CPU thread and per GPU stream
holding the original events (names, categories, args), on the clock of the lowest rank's
host (clock_offsets, analyzers/clocks.py). Tracks no profiler writes: per rank the
breakdown's categories as slices (the Timeline's segments), the critical path of each
step with a flow at each jump between ranks, and per collective instance flows from the
members that waited to the last arrival.

Each section is one SQL query (analyzers/sql/export/) whose rows are the events' JSON
text, built in DuckDB; they are fetched in chunks and written as they come, so memory
stays bounded whatever the job's size. The sizes are counted first (in DuckDB) and
stated before anything is written.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import duckdb

from stepscope.analyzers._memory import Bound
from stepscope.analyzers._sql import install_macros, run_script, sql
from stepscope.analyzers.export_perfetto import PerfettoWriter
from stepscope.analyzers.results import CriticalPath
from stepscope.ingest.errors import TERMINAL_UNSAFE, UsageError, terminal_safe

CHUNK_ROWS = 20_000
BATCH_RANKS = 64  # ranks whose breakdown segments are held at once
# DuckDB's memory while the export runs (analyzers/_memory.py): at its default limit
# DuckDB keeps the run's table blocks and the sections' joins cached, 700+ MB at 1,024
# simulated ranks whatever the chunking of the rows fetched (benchmarks/README.md)
EXPORT_MEMORY_LIMIT = 256 << 20  # 128 MiB: the header query runs out at 1,024 ranks
SECTIONS = {"meta": "export/meta.sql", "cpu": "export/cpu.sql", "gpu": "export/gpu.sql",
            "flows": "export/flows.sql"}
BREAKDOWN_TID = 1 << 41
PATH_TID = BREAKDOWN_TID + 1


def _re2_class(pattern: str) -> str:
    """A Python character class as RE2 (DuckDB's regex) reads it, in ASCII: every
    character outside printable ASCII as \\x{HH}."""
    return "".join(ch if " " <= ch <= "~" else f"\\x{{{ord(ch):x}}}" for ch in pattern)


# The characters terminal_safe escapes (C1 codes, DEL, bidirectional controls): DuckDB's
# to_json leaves them raw, valid JSON but a CSI or a reversed line in `head e.json`.
UNSAFE_RE2 = _re2_class(TERMINAL_UNSAFE.pattern)
# The bytes an event gains when its unsafe characters become 6-byte \\uXXXX escapes.
_ESCAPE_GROWTH = (f"CASE WHEN regexp_matches(ev, '{UNSAFE_RE2}') THEN "
                  f"6 * len(regexp_extract_all(ev, '{UNSAFE_RE2}')) - "
                  f"strlen(array_to_string(regexp_extract_all(ev, '{UNSAFE_RE2}'), '')) "
                  "ELSE 0 END")


@dataclass(frozen=True)
class ExportSize:
    """What an export holds: events and bytes of JSON per section."""

    events: dict[str, int]
    bytes: dict[str, int]

    @property
    def total_events(self) -> int:
        return sum(self.events.values())

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes.values())


class Export:
    """An export of run `run` being prepared on `con` (a read-only connection is fine:
    only temporary tables and macros are created)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, run: str,
                 ranks: Sequence[int] | None = None, steps: Sequence[int] | None = None,
                 ) -> None:
        self.con, self.run = con, run
        install_macros(con)
        run_script(con, "export/scope.sql", {"run": run, "ranks": _ints(ranks),
                                            "steps": _ints(steps)})
        chosen = con.execute(sql("export/chosen.sql")).fetchall()
        self.clocks = {int(r): (int(o), float(d), int(ref), int(origin))
                       for r, o, d, ref, origin in chosen}
        self.ranks = sorted(self.clocks)
        self.windows = {(int(r), int(s)): int(ws) for r, s, ws in
                        con.execute(sql("export/windows.sql")).fetchall()}
        self.steps = sorted({s for _, s in self.windows})
        self.origin = chosen[0][4] if chosen else 0

    def _section_queries(self) -> Iterator[tuple[str, str, dict[str, object]]]:
        for name, file in SECTIONS.items():
            yield name, sql(file), {"run": self.run}

    def _breakdowns(self) -> Iterator[tuple[str, dict[str, object]]]:
        """Per step and batch of BATCH_RANKS ranks, the Timeline's segments
        (detail/timeline.sql) registered as x_seg, and the query that turns them into
        slices: one batch's segments in memory at a time."""
        for step in self.steps:
            for lo in range(0, len(self.ranks), BATCH_RANKS):
                batch = self.ranks[lo:lo + BATCH_RANKS]
                segments = self.con.sql(sql("detail/timeline.sql"), params={
                    "run": self.run, "step": step, "ranks": batch}
                ).to_arrow_table()
                self.con.register("x_seg", segments)
                yield sql("export/breakdown.sql"), {"step": step}
                self.con.unregister("x_seg")

    def size(self, path: CriticalPath | None) -> ExportSize:
        """Events and bytes per section, counted in DuckDB before writing."""
        events: dict[str, int] = {}
        nbytes: dict[str, int] = {}
        for name, query, params in self._section_queries():
            events[name], nbytes[name] = self._count(query, params)
        events["breakdown"] = nbytes["breakdown"] = 0
        for query, params in self._breakdowns():
            n, b = self._count(query, params)
            events["breakdown"] += n
            nbytes["breakdown"] += b
        lines = list(path_events(path, self.clocks, self.windows))
        events["critical_path"], nbytes["critical_path"] = len(lines), sum(map(len, lines))
        return ExportSize(events, nbytes)

    def _count(self, query: str, params: dict[str, object]) -> tuple[int, int]:
        """A section's events and JSON bytes as written (escapes and the ",\n" after
        each included), in DuckDB."""
        (n, b), = self.con.sql(query, params=params).aggregate(
            f"count(*), coalesce(sum(strlen(ev) + {_ESCAPE_GROWTH}), 0)").fetchall()
        return int(n), int(b) + int(n) * 2

    def write(self, out: IO[str], path: CriticalPath | None) -> int:
        """Write the whole file; returns the events written."""
        ranks = {str(r): json.loads(meta) for r, meta in
                 self.con.execute(sql("export/rank_meta.sql"), {"run": self.run}).fetchall()}
        out.write('{"displayTimeUnit":"ns","otherData":'
                  + json.dumps({"stepscope": {"run": self.run, "origin_ns": self.origin,
                                              "clock": "aligned (clock_offsets)",
                                              "ranks": ranks}})
                  + ',"traceEvents":[\n')
        writer = _EventWriter(out)
        self.events(writer, path)
        out.write("\n]}\n")
        return writer.count

    def events(self, writer: _EventWriter | PerfettoWriter, path: CriticalPath | None) -> None:
        """Every event, section by section, a chunk of rows at a time, to `writer`."""
        for _name, query, params in self._section_queries():
            writer.rows(self.con.execute(query, params))
        for query, params in self._breakdowns():
            writer.rows(self.con.execute(query, params))
        writer.lines(path_events(path, self.clocks, self.windows))


class _EventWriter:
    """Writes event lines separated by commas, a chunk of rows at a time, each with its
    terminal controls as JSON escapes (the same characters to a JSON reader)."""

    def __init__(self, out: IO[str]) -> None:
        self.out, self.count = out, 0

    def rows(self, cursor: duckdb.DuckDBPyConnection) -> None:
        while chunk := cursor.fetchmany(CHUNK_ROWS):
            self.lines(ev for (ev,) in chunk)

    def lines(self, lines: Iterator[str] | list[str]) -> None:
        for line in lines:
            if self.count:
                self.out.write(",\n")
            self.out.write(terminal_safe(line))
            self.count += 1


def aligned_us(t: int, clock: tuple[int, float, int, int]) -> float:
    """Time t of a rank (ns, its own clock) in µs on the export's clock."""
    off, drift, ref, origin = clock
    return round((t - off - origin) / 1e3 - drift * 1e-9 * (t - ref), 3)


def path_events(path: CriticalPath | None, clocks: dict[int, tuple[int, float, int, int]],
                windows: dict[tuple[int, int], int]) -> Iterator[str]:
    """The critical path of each step as slices on each rank's `critical path` thread and
    a flow at each jump between ranks. A run's start is in ms from the reference rank's
    window start on the path's own time line (critical_path.py: the chain of what set
    each start, durations on each rank's clock, so it needs no clock); the reference
    window's start is put on the aligned clock. Bounded: the report keeps at most a few
    dozen runs per step."""
    if path is None:
        return
    flow = 0
    for step in path.steps:
        ws = windows.get((step.reference_rank, step.step))
        if ws is None or step.reference_rank not in clocks:
            continue
        base = aligned_us(ws, clocks[step.reference_rank])
        prev: tuple[int, float] | None = None
        for run in step.runs:
            if run.rank not in clocks:
                prev = None
                continue
            ts = round(base + run.start_ms * 1e3, 3)
            dur = round(run.ms * 1e3, 3)
            yield json.dumps({"ph": "X", "cat": "stepscope critical path",
                              "name": f"critical path: {run.category}", "pid": run.rank,
                              "tid": PATH_TID, "ts": ts, "dur": dur,
                              "args": {"step": step.step, "segments": run.segments}})
            if prev is not None and prev[0] != run.rank:
                flow += 1
                yield json.dumps({"ph": "s", "cat": "critical path jump", "id": f"cp{flow}",
                                  "name": "critical path", "pid": prev[0], "tid": PATH_TID,
                                  "ts": prev[1]})
                yield json.dumps({"ph": "f", "bp": "e", "cat": "critical path jump",
                                  "id": f"cp{flow}", "name": "critical path",
                                  "pid": run.rank, "tid": PATH_TID, "ts": ts})
            prev = (run.rank, round(ts + dur - 0.001, 3))


def _ints(values: Sequence[int] | None) -> list[int] | None:
    return None if values is None else [int(v) for v in values]


def _write(out: Path, export: Export, path: CriticalPath | None) -> int:
    with out.open("w", encoding="utf-8") as fh:
        return export.write(fh, path)


def _write_perfetto(out: Path, export: Export, path: CriticalPath | None) -> int:
    with out.open("wb") as fh:
        writer = PerfettoWriter(fh, int(export.origin))
        export.events(writer, path)
        return writer.count


def export_chrome(con: duckdb.DuckDBPyConnection, run: str, out: Path,
                  ranks: Sequence[int] | None = None, steps: Sequence[int] | None = None,
                  path: CriticalPath | None = None,
                  announce: Callable[[ExportSize], None] | None = None,
                  fmt: str = "chrome-json") -> ExportSize:
    """Write run `run`'s Chrome trace-event JSON (fmt "perfetto": the same events as
    Perfetto's protobuf trace, analyzers/export_perfetto.py) to `out`; `announce` is
    told the size (of the JSON) before the file is opened."""
    with Bound(con, EXPORT_MEMORY_LIMIT) as bound:
        export = bound.fit(lambda: Export(con, run, ranks, steps))
        if not export.ranks:
            raise UsageError(f"{run}: none of the ranks asked for is in the run")
        size = bound.fit(lambda: export.size(path))
        if announce is not None:
            announce(size)
        write = _write_perfetto if fmt == "perfetto" else _write
        bound.fit(lambda: write(out, export, path))
    return size



def present(con: duckdb.DuckDBPyConnection, run: str) -> tuple[list[int], list[int]]:
    """The run's ranks and steps, sorted: what `--ranks` and `--steps` choose among."""
    ranks, steps = con.execute(sql("export/present.sql"), {"run": run}).fetchone() or ([], [])
    return [int(r) for r in ranks], [int(s) for s in steps]


__all__ = ["Export", "ExportSize", "export_chrome", "path_events", "present"]
