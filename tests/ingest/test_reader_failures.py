"""Reader failures by class (issue 43, audit round 10, the ingest side): each class of a
file's problem is one line naming the file (never a silent skip), and the machine's
failures are the machine's line and exit code. New fixtures, built here, beside the
audit's own cases (tests/cli/test_audit_round10_inputs.py).

Each case asserts the exit code and the start of the first error line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import kineto_trace, write_trace

from stepscope.cli import main

NOTHING = "error: nothing ingested into run"


def _ingest(capsys: pytest.CaptureFixture[str], folder: Path, db: Path) -> tuple[int, list[str]]:
    rc = main(["ingest", str(folder), "--db", str(db), "--run", "r", "--quiet"])
    return rc, capsys.readouterr().err.splitlines()


def _one_trace(events: int = 0) -> str:
    extra = [{"ph": "i", "name": "mark", "pid": 100, "tid": 100, "ts": 1500.0 + i, "s": "t"}
             for i in range(events)]
    return json.dumps(kineto_trace(rank=0, world_size=1, extra_events=extra))


# --- a trace in UTF-16 or UTF-32: named, never skipped as "no trace" (round 10 "UTF-32",
# round 9's UTF-16 traces) --------------------------------------------------------------

ENCODED: dict[str, tuple[Callable[[str], bytes], str]] = {
    "utf-16 with a BOM": (lambda t: t.encode("utf-16"), "UTF-16"),
    "utf-16-le without a BOM": (lambda t: t.encode("utf-16-le"), "UTF-16"),
    "utf-16-be without a BOM": (lambda t: t.encode("utf-16-be"), "UTF-16"),
    "utf-32 with a BOM": (lambda t: t.encode("utf-32"), "UTF-32"),
    "utf-32-le without a BOM": (lambda t: t.encode("utf-32-le"), "UTF-32"),
    "utf-16 gzipped": (lambda t: t.encode("utf-16"), "UTF-16"),  # write_trace gzips it
}


@pytest.mark.parametrize("case", list(ENCODED))
@pytest.mark.parametrize("events", [0, 3000], ids=["small", "over 64 KiB"])
def test_a_wide_encoding_is_named(case: str, events: int, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A small file was skipped as a non-trace .json (json.loads reads UTF-16/32 bytes),
    a large UTF-16-LE one too (no `"traceEvents"` in its bytes): "no trace files", exit
    2. Now the file's line names its encoding, then "nothing ingested" (exit 1)."""
    encode, encoding = ENCODED[case]
    name = "rank0.json.gz" if "gzip" in case else "rank0.json"
    write_trace(tmp_path / "t" / name, encode(_one_trace(events)))
    rc, err = _ingest(capsys, tmp_path / "t", tmp_path / "db.duckdb")
    assert rc == 1, err
    assert err[0] == (f"error: {tmp_path / 't' / name}: {encoding} text, not UTF-8: stepscope "
                      f"reads traces in UTF-8 (convert it, e.g. iconv -f {encoding} -t UTF-8)")
    assert len(err) == 2 and err[1].startswith(NOTHING)


def test_the_same_trace_in_utf8_ingests(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The control: the trace of the cases above, in UTF-8 (with a BOM too), ingests."""
    write_trace(tmp_path / "t" / "rank0.json", b"\xef\xbb\xbf" + _one_trace(3000).encode())
    rc, err = _ingest(capsys, tmp_path / "t", tmp_path / "db.duckdb")
    assert rc == 0 and not err
