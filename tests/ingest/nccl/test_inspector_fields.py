"""Every NCCL Inspector field is typed and bounded (issue 43; audit rounds 9, 12, 13:
`coll_sn: true`, a message size "1024", n_ranks 1.5, header.rank "0", `coll` an object or
a list were stored). Generated from the declared table (ingest/nccl/inspector_fields.py):
for every field, each JSON type it does not take and each value outside its range fails
the file with one line naming the field and counting the bad lines; the bounds
themselves and a field left out or null (when not required) are read.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import write_trace

from stepscope.cli import main
from stepscope.ingest import TraceFileError
from stepscope.ingest.nccl.inspector import read_inspector
from stepscope.ingest.nccl.inspector_fields import FIELDS, Field

N_RANKS = 4
# Not a JSON null: a missing value, which only these fields may not be.
REQUIRED = {"header.id": "header.id", "header.n_ranks": "header.n_ranks",
            "header.rank": "header.rank", "coll_perf.coll": "coll_perf.coll / p2p_perf.p2p",
            "coll_perf.coll_exec_time_us": "the execution time",
            "p2p_perf.p2p": "coll_perf.coll / p2p_perf.p2p",
            "p2p_perf.p2p_exec_time_us": "the execution time"}


def _line(kind: str) -> dict[str, Any]:
    """One valid line of a collective ('coll') or a P2P op ('p2p')."""
    perf = {f"{kind}_sn": 3, f"{kind}_msg_size_bytes": 4096, f"{kind}_exec_time_us": 25.5,
            f"{kind}_timing_source": "kernel_gpu", f"{kind}_algobw_gbs": 2.0,
            f"{kind}_busbw_gbs": 1.5, kind: "AllGather" if kind == "coll" else "Send"}
    if kind == "p2p":
        perf["p2p_peer"] = 1
    return {"header": {"id": "0x7f8c", "comm_name": "dp", "rank": 2, "n_ranks": N_RANKS,
                       "nnodes": 1},
            "metadata": {"inspector_output_format_version": "v4.0", "git_rev": "",
                         "dump_timestamp_us": 1748030377748202, "hostname": "node0",
                         "pid": 7},
            f"{kind}_perf": perf}


def _kind(field: Field) -> str:
    """The op kind whose line holds `field` (a header or metadata field: a collective's)."""
    return field.part.removesuffix("_perf") if field.part.endswith("_perf") else "coll"


def _with(field: Field, value: Any) -> dict[str, Any]:
    line = _line(_kind(field))
    if field.key:
        line[field.part][field.key] = value
    else:
        line[field.part] = value
    return line


def _read(tmp_path: Path, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    path = tmp_path / "node0-pid7.log"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return read_inspector(path, "F").to_pylist()


WRONG_TYPES: dict[str, list[Any]] = {
    "object": [True, "x", 1, 1.5, [1]],
    "text": [True, False, 1, 1.5, {"a": 1}, ["AllReduce"]],
    "int": [True, False, "1", "0", 1.5, 2.0, 1e3, {"n": 1}, [1]],
    "number": [True, "1.5", "NaN", {"v": 1}, [1.0]],
}
WANTED = {"object": "a JSON object", "text": "a string", "int": "an integer",
          "number": "a number"}


def _wrong_type_cases() -> list[Any]:
    return [pytest.param(pos, value, id=f"{field.name}={json.dumps(value)}")
            for pos, field in enumerate(FIELDS) for value in WRONG_TYPES[field.kind]]


@pytest.mark.parametrize(("pos", "value"), _wrong_type_cases())
def test_a_value_of_another_json_type_fails_the_file(pos: int, value: Any,
                                                     tmp_path: Path) -> None:
    """Two bad lines among three: the line names the field, counts 2, shows the value."""
    field = FIELDS[pos]
    bad = _with(field, value)
    with pytest.raises(TraceFileError) as err:
        _read(tmp_path, [bad, _line(_kind(field)), bad])
    assert str(err.value) == (f"F: 2 NCCL Inspector line(s) with {field.name} not "
                              f"{WANTED[field.kind]} (first: "
                              f"{json.dumps(value, separators=(',', ':'))})")


def _out_of_range(field: Field) -> list[Any]:
    """Values of the right JSON type outside `field`'s range."""
    if field.kind == "int":
        high = N_RANKS if field.below else int(field.high)
        return [int(field.low) - 1, high, 2 ** 64 - 1, 2 ** 70]
    if field.kind == "number":
        values: list[Any] = [-1, -1e-9, math.nan, math.inf, -math.inf]
        return values + ([field.high * 2] if math.isfinite(field.high) else [])
    return []


def _range_cases() -> list[Any]:
    return [pytest.param(pos, value, id=f"{field.name}={value!r}")
            for pos, field in enumerate(FIELDS) for value in _out_of_range(field)]


@pytest.mark.parametrize(("pos", "value"), _range_cases())
def test_a_value_outside_its_range_fails_the_file(pos: int, value: Any,
                                                  tmp_path: Path) -> None:
    field = FIELDS[pos]
    with pytest.raises(TraceFileError) as err:
        _read(tmp_path, [_with(field, value)])
    assert str(err.value).startswith(
        f"F: 1 NCCL Inspector line(s) with {field.name} {field.range_text} (first: "), err


def _bounds(field: Field) -> list[Any]:
    """The values at `field`'s bounds, which it takes."""
    if field.kind == "int":
        high = N_RANKS if field.below else int(field.high)
        return [int(field.low), high - 1]
    if field.kind == "number":
        return [0, 0.0] + ([field.high] if math.isfinite(field.high) else [1.7e308])
    return []


@pytest.mark.parametrize(("pos", "value"), [
    pytest.param(pos, value, id=f"{field.name}={value!r}")
    for pos, field in enumerate(FIELDS) for value in _bounds(field)])
def test_the_bounds_are_read(pos: int, value: Any, tmp_path: Path) -> None:
    field = FIELDS[pos]
    if field.key == "n_ranks" and value < 3:  # header.rank 2 must stay below it
        value_line = _with(field, value)
        value_line["header"]["rank"] = 0
    else:
        value_line = _with(field, value)
    (row,) = _read(tmp_path, [value_line])
    assert value in row.values() or float(value) in row.values(), (row, value)


@pytest.mark.parametrize("name", [field.name for field in FIELDS if field.key])
def test_a_null_or_missing_value(name: str, tmp_path: Path) -> None:
    """null is a missing value: a required field's lines fail ('without ...'), another
    field is stored as missing, the same as when the key is left out."""
    field = next(f for f in FIELDS if f.name == name)
    left_out = _line(_kind(field))
    del left_out[field.part][field.key]
    for line in (_with(field, None), left_out):
        if name in REQUIRED:
            with pytest.raises(TraceFileError, match=(
                    f"^F: 1 NCCL Inspector line\\(s\\) without {REQUIRED[name]}$")):
                _read(tmp_path, [line])
        else:
            (row,) = _read(tmp_path, [line])
            assert None in row.values()


def test_valid_lines_are_stored_as_written(tmp_path: Path) -> None:
    rows = _read(tmp_path, [_line("coll"), _line("p2p")])
    assert [(r["kind"], r["nccl_op"], r["seq"], r["comm_rank"], r["peer_comm_rank"],
             r["msg_bytes"], r["exec_time_us"], r["bus_bw_gbs"]) for r in rows] == [
        ("coll", "AllGather", 3, 2, None, 4096, 25.5, 1.5),
        ("p2p", "Send", 3, 2, 1, 4096, 25.5, 1.5)]


def test_the_first_field_in_table_order_is_named(tmp_path: Path) -> None:
    """n_ranks 1.5 makes every rank's bound unknown: n_ranks is named, never header.rank
    (a follow-on); the count is that field's own."""
    bad_size = _line("coll")
    bad_size["header"]["n_ranks"] = 1.5
    bad_sn = _line("coll")
    bad_sn["coll_perf"]["coll_sn"] = True
    with pytest.raises(TraceFileError, match=r"^F: 1 NCCL Inspector line\(s\) with "
                       r"header\.n_ranks not an integer \(first: 1\.5\)$"):
        _read(tmp_path, [bad_sn, bad_size, bad_sn])


def test_a_long_value_is_cut_in_the_line(tmp_path: Path) -> None:
    line = _line("coll")
    line["header"]["rank"] = "r" * 5000
    with pytest.raises(TraceFileError) as err:
        _read(tmp_path, [line])
    assert len(str(err.value)) < 200 and str(err.value).endswith('rrr...)'), err.value


def test_the_file_fails_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Through the CLI: a bad file beside a good one fails alone with one line; the good
    file's ops are stored and the run is partial (exit 3, README's exit codes)."""
    bad = _line("coll")
    bad["coll_perf"]["coll_sn"] = True
    write_trace(tmp_path / "t" / "node0-pid7.log", json.dumps(bad) + "\n")
    write_trace(tmp_path / "t" / "node1-pid8.log", json.dumps(_line("coll")) + "\n")
    db = tmp_path / "db.duckdb"
    rc = main(["ingest", str(tmp_path / "t"), "--db", str(db), "--run", "r", "--quiet"])
    err = capsys.readouterr().err.splitlines()
    assert rc == 3, err
    errors = [line for line in err if line.startswith("error:")]
    assert errors == [f"error: {tmp_path / 't' / 'node0-pid7.log'}: 1 NCCL Inspector "
                      "line(s) with coll_perf.coll_sn not an integer (first: true)"], err
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT source_file, seq FROM nccl_ops").fetchall() == [
            (str(tmp_path / "t" / "node1-pid8.log"), 3)]
