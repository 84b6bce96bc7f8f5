"""Property-based fuzzing of the trace readers (issue 9): mutate real traces (truncate,
flip bytes, drop keys, change types, nest deeply, huge numbers) and check that a reader
never raises anything but a one-line per-file reason, and that an ingest with one
mutated rank still ingests the other ranks.

Profiles (env STEPSCOPE_FUZZ_PROFILE): `ci` (default: 300 reader examples, 30 ingest
examples) and `long` (3,000 and 300), run once for the issue's note; see benchmarks/README.
"""

from __future__ import annotations

import gzip
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from conftest import REAL_TRACES, SAMPLES, write_trace
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stepscope.ingest import read_trace
from stepscope.ingest.errors import TraceFileError

PROFILES = {"ci": (300, 30), "long": (3000, 300), "smoke": (10, 3)}
PROFILE = os.environ.get("STEPSCOPE_FUZZ_PROFILE", "ci")
READER_EXAMPLES, INGEST_EXAMPLES = PROFILES[PROFILE]
EVENTS_KEPT = 300  # a real trace's first events: small enough for hundreds of examples
COMMON = {"deadline": None, "database": None, "derandomize": PROFILE == "ci",
          "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large,
                                    HealthCheck.function_scoped_fixture]}


def _real_traces() -> list[Path]:
    found = [SAMPLES / "ddp" / "rank0.json.gz"]
    hta = REAL_TRACES / "HolisticTraceAnalysis" / "tests" / "data"
    found += [p for p in (hta / "trace_filter" / "sampled_rank-0.json.gz",
                          hta / "nccl_parser_config" / "nccl_data.json.gz") if p.is_file()]
    return found


@cache
def _base(index: int) -> dict[str, Any]:
    """A real trace cut to its first events (top-level keys all kept)."""
    trace = json.loads(gzip.open(_real_traces()[index]).read())
    trace["traceEvents"] = trace["traceEvents"][:EVENTS_KEPT]
    return trace


HUGE = st.sampled_from([10**30, -(10**30), 2**63, 2**64, 1e308, -1e308, float("nan"),
                        float("inf"), 1e-320, 2**31, -1])
ODD_VALUE = st.one_of(st.none(), st.booleans(), HUGE, st.text(max_size=8),
                      st.lists(st.integers(), max_size=3),
                      st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


def _paths(doc: Any, prefix: tuple[Any, ...] = (), limit: int = 4) -> list[tuple[Any, ...]]:
    """Paths to values of a trace: top-level keys, and the keys of a few events."""
    out: list[tuple[Any, ...]] = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            out.append((*prefix, key))
            if key == "traceEvents" and isinstance(value, list):
                for i in range(0, min(len(value), 60), 7):
                    out += _paths(value[i], (*prefix, key, i), limit - 1)
            elif limit > 1 and isinstance(value, dict | list):
                out += _paths(value, (*prefix, key), limit - 1)
    elif isinstance(doc, list) and limit > 1:
        for i, value in enumerate(doc[:3]):
            out.append((*prefix, i))
            out += _paths(value, (*prefix, i), limit - 1)
    return out


def _set(doc: Any, path: tuple[Any, ...], value: Any, drop: bool = False) -> None:
    for step in path[:-1]:
        doc = doc[step]
    if drop:
        del doc[path[-1]]
    else:
        doc[path[-1]] = value


@st.composite
def mutated_trace(draw: st.DrawFn) -> bytes:
    """A real trace with one to three mutations, as bytes (maybe gzipped later)."""
    doc = json.loads(json.dumps(_base(draw(st.integers(0, len(_real_traces()) - 1)))))
    nests: dict[str, str] = {}
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["drop", "type", "nest", "huge", "bytes"]))
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        try:
            if kind == "drop":
                _set(doc, path, None, drop=True)
            elif kind == "type":
                _set(doc, path, draw(ODD_VALUE))
            elif kind == "nest":  # written as text below: json.dumps cannot go deep
                depth = draw(st.sampled_from([1, 5, 100, 900, 3000, 20000]))
                opener = draw(st.sampled_from(["[", '{"a":']))
                closer = "]" if opener == "[" else "}"
                marker = f"__nest_{len(nests)}__"
                nests[f'"{marker}"'] = opener * depth + "1" + closer * depth
                _set(doc, path, marker)
            elif kind == "huge":
                _set(doc, path, draw(HUGE))
        except (KeyError, IndexError, TypeError):
            continue
    text = json.dumps(doc)  # NaN/Infinity tokens included, as Python writes them
    for marker, nested in nests.items():
        text = text.replace(marker, nested)
    data = text.encode()
    if draw(st.booleans()):
        data = b"\xef\xbb\xbf" + data
    edit = draw(st.sampled_from(["none", "truncate", "flip"]))
    if edit == "truncate":
        data = data[: draw(st.integers(0, len(data)))]
    elif edit == "flip":
        buf = bytearray(data)
        for _ in range(draw(st.integers(1, 6))):
            at = draw(st.integers(0, len(buf) - 1))
            buf[at] = draw(st.integers(0, 255))
        data = bytes(buf)
    return data


def _one_line_reason(exc: TraceFileError) -> None:
    assert exc.problem and "\n" not in exc.problem
    assert "Traceback" not in exc.problem and "internal error" not in exc.problem


@pytest.mark.fuzz
@settings(max_examples=READER_EXAMPLES, **COMMON)
@given(data=mutated_trace(), gz=st.booleans())
def test_reader_gives_tables_or_a_one_line_reason(tmp_path_factory: pytest.TempPathFactory,
                                                  data: bytes, gz: bool) -> None:
    folder = tmp_path_factory.mktemp("fuzz")
    path = write_trace(folder / ("rank1.json.gz" if gz else "rank1.json"), data)
    try:
        tables = read_trace(path)
    except TraceFileError as exc:
        _one_line_reason(exc)
        assert exc.file == str(path)
        return
    assert tables.n_events > 0
    assert any(tables.tables[name].num_rows for name in ("cpu_ops", "gpu_ops",
                                                         "gpu_annotations"))


@pytest.mark.fuzz
@settings(max_examples=INGEST_EXAMPLES, **COMMON)
@given(data=mutated_trace())
def test_one_mutated_rank_never_sinks_the_run(tmp_path_factory: pytest.TempPathFactory,
                                              data: bytes) -> None:
    """The loader (without the analyzers, for speed): the mutated rank fails alone, with
    one reason naming it, and the good rank is in the database."""
    import duckdb

    from stepscope.ingest import ingest

    folder = tmp_path_factory.mktemp("run")
    write_trace(folder / "job" / "rank0.json", {**_base(0), "distributedInfo": {"rank": 0}})
    bad = write_trace(folder / "job" / "rank1.json", data)
    db = folder / "f.duckdb"
    result = ingest([folder / "job"], db=db, jobs=2)
    assert [f for f, _ in result.failures] in ([], [str(bad)])
    for _, problem in result.failures:
        _one_line_reason(TraceFileError(str(bad), problem))
    assert 0 in result.ranks and result.exit_code in (0, 3)
    con = duckdb.connect(str(db), read_only=True)
    try:
        status, n_ranks = con.execute("SELECT status, n_ranks FROM runs").fetchone() or ("", 0)
        ranks = [r[0] for r in con.execute("SELECT rank FROM ranks ORDER BY rank").fetchall()]
    finally:
        con.close()
    assert ranks == sorted(result.ranks) and n_ranks == len(ranks)
    assert status == ("partial" if result.failures else "complete")
