"""`diff PATH_A PATH_B` when both paths fail: the first error (A's) is shown first, never
only B's (the project's rule: the first error, then what followed)."""

from __future__ import annotations

from pathlib import Path

from conftest import cli_in_process, kineto_trace, write_trace


def _half_bad(folder: Path) -> Path:
    """A folder whose rank 1 reads and whose rank 0 is truncated JSON."""
    write_trace(folder / "rank1.json", kineto_trace(rank=1))
    write_trace(folder / "rank0.json", '{"traceEvents": [')
    return folder


def test_a_partial_and_b_without_traces_shows_a_first(tmp_path: Path) -> None:
    a = _half_bad(tmp_path / "a")
    (tmp_path / "b").mkdir()
    rc, err = cli_in_process(("diff", a, tmp_path / "b", "--db", tmp_path / "x.duckdb"))
    assert rc == 2
    assert len(err) == 2
    assert err[0].startswith(f"error: {a / 'rank0.json'}: ")
    assert err[1].startswith("error: no trace files") and err[1].endswith(str(tmp_path / "b"))


def test_a_partial_and_b_unreadable_lists_a_before_b(tmp_path: Path) -> None:
    a = _half_bad(tmp_path / "a")
    b = tmp_path / "b"
    write_trace(b / "rank0.json", "not json")
    rc, err = cli_in_process(("diff", a, b, "--db", tmp_path / "x.duckdb"))
    assert rc == 1
    assert [line.split(": ")[1] for line in err[:2]] == [str(a / "rank0.json"),
                                                         str(b / "rank0.json")]
    assert err[2].startswith("error: nothing ingested into run 'b'")
    assert len(err) == 3


def test_both_empty_folders_name_the_first(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    rc, err = cli_in_process(("diff", tmp_path / "a", tmp_path / "b",
                              "--db", tmp_path / "x.duckdb"))
    assert rc == 2
    assert err == [f"error: no trace files (.json, .json.gz, archives of them, Flight "
                   f"Recorder dumps or NCCL logs) found in {tmp_path / 'a'}"]
