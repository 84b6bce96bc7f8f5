"""Nothing is written outside its place (issue 43): every command that writes, found by
walking the parser (stepscope.cli.build_parser, as test_option_matrix.py does), is given
its trace folder as a PATH and an output that lands among the traces or on the database:
a new file inside the input folder, the same reached through `..`, through a symbolic
link to the folder, as `.`-relative from inside the folder, the input folder itself
(`--out-dir`), the database and its `.wal`.

Each must be refused before any work: exit 2, one line "error: OPTION VALUE: ..." that
says why (pinned below), nothing new in the trace folder, the database unchanged and no
report folder made. A new command with an output option fails test_every_writer_is_tried
until it has a base command line here.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest
from audit8_inputs import cli
from conftest import kineto_trace, write_trace

from stepscope.cli import build_parser

OUTPUT_OPTIONS = ("--out", "--out-dir")
# a base command line per command that writes, its input the trace folder {t}
BASE: dict[str, tuple[str, ...]] = {
    "report": ("report", "{t}", "--db", "{db}"),
    "diff": ("diff", "{t}", "base", "--db", "{db}"),
    "hang": ("hang", "{t}", "--db", "{db}"),
    "export": ("export", "{t}", "--db", "{db}"),
    "plan": ("plan", "--from", "{t}", "--db", "{db}"),
    "nightly": ("nightly", "{t}", "--job", "j", "--db", "{db}", "--run", "n1"),
}
AMONG_TRACES = "; writing there would put files among the traces. Choose a place outside the traces"
# (the output as given, relative to the current folder {cwd}; what the line says)
FILE_PLACES = {
    "a new file in the input folder": ("{t}/new.out", "is a file inside the input folder {t}"),
    "through ..": ("{root}/elsewhere/../t/new.out", "is a file inside the input folder {t}"),
    "through a link to the folder": ("{root}/link_to_t/new.out",
                                     "is a file inside the input folder {t}"),
    "relative, from inside the folder": ("./new.out", "is a file inside the input folder {t}"),
    "a subfolder's file through ..": ("{t}/sub/../new.out",
                                      "is a file inside the input folder {t}"),
    "the database": ("{db}", "is the database {db}"),
    "the database's .wal": ("{db}.wal", "is the database {db}"),
    "the database through ..": ("{t}/../db.duckdb", "is the database {db}"),
}
FOLDER_PLACES = {
    "a new folder in the input folder": ("{t}/reports",
                                         "is a folder inside the input folder {t}"),
    "through ..": ("{root}/elsewhere/../t/reports", "is a folder inside the input folder {t}"),
    "a link to the folder": ("{root}/link_to_t", "is the input folder {t}"),
    "a new folder under a link to it": ("{root}/link_to_t/reports",
                                        "is a folder inside the input folder {t}"),
    "the input folder": ("{t}", "is the input folder {t}"),
    "., from inside the folder": (".", "is the input folder {t}"),
    "the database": ("{db}", "is a file, not a folder"),
}


def writers() -> dict[str, str]:
    """Each command that writes a file and its output option, from the parser."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = {}
    for name, command in sub.choices.items():
        for action in command._actions:
            option = next((o for o in action.option_strings if o in OUTPUT_OPTIONS), None)
            if option is not None:
                found[name] = option
    return found


WRITERS = writers()


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trace folder t/ (two ranks, a sub/ folder), a stepscope database with run 'base',
    a folder elsewhere/ beside them and link_to_t -> t."""
    base = tmp_path_factory.mktemp("places")
    for rank in range(2):
        write_trace(base / "t" / f"rank{rank}.json.gz", kineto_trace(rank=rank, world_size=2))
    (base / "t" / "sub").mkdir()
    (base / "elsewhere").mkdir()
    (base / "link_to_t").symlink_to(base / "t", target_is_directory=True)
    rc, err, _ = cli(("ingest", str(base / "t"), "--db", str(base / "db.duckdb"), "--run",
                      "base", "--quiet"))
    assert rc == 0, err
    return base


def test_every_writer_is_tried() -> None:
    """The commands with an output option are exactly those with a base here, each with
    --out or --out-dir (plan, report, diff, hang, export, nightly)."""
    assert set(WRITERS) == set(BASE)
    assert WRITERS["nightly"] == "--out-dir" and WRITERS["report"] == "--out"


def _snapshot(root: Path) -> tuple[set[str], int]:
    names = {str(p.relative_to(root)) for p in (root / "t").rglob("*")}
    return names, (root / "db.duckdb").stat().st_mtime_ns


def _check_refused(root: Path, command: str, value: str, said: str,
                   monkeypatch: pytest.MonkeyPatch) -> None:
    fill = {"t": str(root / "t"), "db": str(root / "db.duckdb"), "root": str(root)}
    monkeypatch.chdir(root / "t")  # the relative cases are written from inside the folder
    option = WRITERS[command]
    before = _snapshot(root)
    argv = tuple(a.format(**fill) for a in (*BASE[command], option, value))
    rc, lines, out = cli(argv)
    err = [x for x in lines if not x.startswith("note: ")]  # report's "--db is unused"
    assert rc == 2 and len(err) == 1, (rc, lines)
    shown = Path(value.format(**fill))  # as pathlib spells it: './new.out' is 'new.out'
    assert err[0].startswith(f"error: {option} {shown}: "), err
    assert said.format(**fill) in err[0], err
    if "inside the input" in said or "is the input" in said:
        assert err[0].endswith(AMONG_TRACES), err
    assert not out
    assert _snapshot(root) == before
    assert not (root / "stepscope-nightly").exists() and not (root / "t" / "reports").exists()


@pytest.mark.parametrize("place", sorted(FILE_PLACES))
@pytest.mark.parametrize("command", sorted(c for c in BASE if c != "nightly"))
def test_out_file_among_the_traces_or_the_db(root: Path, command: str, place: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    value, said = FILE_PLACES[place]
    _check_refused(root, command, value, said, monkeypatch)


@pytest.mark.parametrize("place", sorted(FOLDER_PLACES))
def test_nightly_out_dir_among_the_traces(root: Path, place: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    value, said = FOLDER_PLACES[place]
    _check_refused(root, "nightly", value, said, monkeypatch)


def test_nightly_default_folder_inside_the_input(root: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --out-dir the reports go to ./stepscope-nightly/RUN/: run from inside the
    trace folder, that is among the traces, and refused alike."""
    monkeypatch.chdir(root / "t")
    before = _snapshot(root)
    rc, err, _ = cli(("nightly", ".", "--job", "j", "--db", str(root / "db.duckdb"),
                      "--run", "n1"))
    assert rc == 2 and len(err) == 1, err
    assert err[0] == ("error: --out-dir stepscope-nightly/n1: is a folder inside the input "
                      f"folder .{AMONG_TRACES}"), err
    assert _snapshot(root) == before


def test_a_place_beside_the_traces_is_written(root: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The check refuses only what is among the traces: a file beside the folder, whose
    name starts like it (t.md next to t/), is written."""
    monkeypatch.chdir(tmp_path)
    out = root / "t.md"
    rc, err, _ = cli(("report", str(root / "t"), "--db", str(root / "db.duckdb"), "--out",
                      str(out)))
    assert rc == 0, err
    assert out.read_text().startswith("#") and os.path.getsize(out) > 100
    out.unlink()


@pytest.mark.parametrize("job", ["j\n", "a/b", "..", ".", "./..", " j"])
def test_nightly_job_is_one_folder_name(root: Path, job: str, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """--job names runs and folders: the whole name is checked (a trailing newline got
    past the old `^...$` pattern), with --run's own validator (check_folder_name)."""
    monkeypatch.chdir(tmp_path)
    rc, err, _ = cli(("nightly", str(root / "t"), "--job", job, "--db",
                      str(tmp_path / "n.duckdb"), "--out-dir", str(tmp_path / "n")))
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: --job '"), err
    assert "(it names runs and folders: one folder name, no '/', not '.' or '..')" in err[0]
    assert not list(tmp_path.iterdir())
