"""The fixtures and the check of audit round 7 (issue 43): test_audit_round7.py and
test_audit_round7_options.py. Every hostile input is built in code (the one Flight
Recorder dump is a real one from tests/data, changed), in one folder per module."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import os
import pickle
import shutil
import socket
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import REAL_TRACES, kineto_trace, write_trace
from conftest import cli_in_process as cli

from stepscope.ingest.nccl.safe_pickle import load_plain

Case = tuple[tuple[str, ...], dict[str, str] | None, int, str]

FR_DUMP = (REAL_TRACES / "nvidia-resiliency-ext" / "tests" / "attribution" / "unit"
           / "fr_traces" / "lock_gil_1st" / "_dump_8")
ESC = "\x1b[2J"


def _fr(base: Path, folder: str, change: Any) -> None:
    """A real Flight Recorder dump (nvidia-resiliency-ext, rank 8) with `change` applied
    to its loaded value, pickled again into `folder`/nccl_trace_rank_8."""
    raw = load_plain(FR_DUMP.read_bytes())
    change(raw)
    (base / folder).mkdir()
    (base / folder / "nccl_trace_rank_8").write_bytes(pickle.dumps(raw, protocol=4))


def _set_first_entry(field: str, value: Any) -> Any:
    def change(raw: dict[str, Any]) -> None:
        raw["entries"][0][field] = value
    return change


def _kineto(base: Path, folder: str, edit: Any, world: int = 1) -> None:
    """A one-rank (or `world`-rank) trace with `edit` applied to each trace dict."""
    for r in range(world):
        trace = kineto_trace(rank=r, world_size=world)
        edit(trace)
        write_trace(base / folder / f"rank{r}.json", json.dumps(trace, allow_nan=True))


def _first(kind: str, field: str, value: Any) -> Any:
    def edit(trace: dict[str, Any]) -> None:
        for ev in trace["traceEvents"]:
            if ev.get("cat") == kind:
                ev[field] = value
                return
    return edit


def _arg_of(name: str, arg: str, value: Any) -> Any:
    def edit(trace: dict[str, Any]) -> None:
        for ev in trace["traceEvents"]:
            if ev.get("name") == name:
                ev["args"][arg] = value
    return edit


def _dist(field: str, value: Any) -> Any:
    def edit(trace: dict[str, Any]) -> None:
        trace["distributedInfo"][field] = value
    return edit


def _top(field: str, value: Any) -> Any:
    def edit(trace: dict[str, Any]) -> None:
        trace[field] = value
    return edit


def _foreign_db(path: Path, version: str | None, rows: bool = True) -> None:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE schema_info(key VARCHAR, value VARCHAR)")
    if rows and version is not None:
        con.execute("INSERT INTO schema_info VALUES ('schema_version', ?)", [version])
    con.close()


def _tar(path: Path, members: list[tarfile.TarInfo], data: dict[str, bytes]) -> None:
    with tarfile.open(path, "w") as tf:
        for info in members:
            body = data.get(info.name)
            if body is not None:
                info.size = len(body)
            tf.addfile(info, io.BytesIO(body) if body is not None else None)


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    return info


def _archives(base: Path, one: bytes) -> None:
    (base / "tfifo").mkdir()
    _tar(base / "tfifo" / "job.tar", [_member("rank0.json", tarfile.FIFOTYPE)], {})
    (base / "tdev").mkdir()
    dev = _member("rank0.json", tarfile.CHRTYPE)
    dev.devmajor, dev.devminor = 1, 3
    _tar(base / "tdev" / "job.tar", [dev], {})
    (base / "thard").mkdir()
    _tar(base / "thard" / "job.tar", [_member("rank0.json", tarfile.LNKTYPE, "/etc/passwd")],
         {})
    (base / "tsym").mkdir()
    _tar(base / "tsym" / "job.tar", [_member("rank0.json", tarfile.SYMTYPE, "/etc/hostname")],
         {})
    (base / "tmany").mkdir()
    _tar(base / "tmany" / "job.tar", [_member(f"notes{i}.txt") for i in range(5000)],
         {f"notes{i}.txt": b"x" for i in range(5000)})
    (base / "zesc").mkdir()
    with zipfile.ZipFile(base / "zesc" / "job.zip", "w") as z:
        z.writestr(f"rank0{ESC}.json", b"not json")
        z.writestr("rank1.json", one)
    (base / "zbidi").mkdir()
    with zipfile.ZipFile(base / "zbidi" / "job.zip", "w") as z:
        z.writestr("rank0\u202enosj.json", b"not json")
        z.writestr("rank1.json", one)
    (base / "znest").mkdir()
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        z.writestr("rank0.json", one)
    with zipfile.ZipFile(base / "znest" / "job.zip", "w") as z:
        z.writestr("inner.zip", inner.getvalue())
    (base / "zempty").mkdir()
    (base / "zempty" / "rank0.zip").write_bytes(b"")
    (base / "tgzbad").mkdir()
    (base / "tgzbad" / "job.tar.gz").write_bytes(gzip.compress(b"\x00" * 1024 + b"junk" * 300))
    (base / "gzzero").mkdir()
    (base / "gzzero" / "rank0.json.gz").write_bytes(gzip.compress(b"\x00" * (64 << 20)))


def _traces(base: Path) -> None:
    _kineto(base, "tsbig", _first("kernel", "ts", 1e300))
    _kineto(base, "tsneg", _first("kernel", "ts", -1e20))
    _kineto(base, "tsdigits", _first("kernel", "dur", int("9" * 400)))
    _kineto(base, "basefloat", _top("baseTimeNanoseconds", 1e30))
    _kineto(base, "worldinf", _dist("world_size", float("inf")))
    _kineto(base, "rankhalf", _dist("rank", 2.5))
    _kineto(base, "rankbool", _dist("rank", True))
    _kineto(base, "bigdims", _arg_of("aten::mm", "Input Dims",
                                     [[2**63 - 1, 2], [2, 2**63 - 1]]), world=2)
    _kineto(base, "negdims", _arg_of("aten::mm", "Input Dims", [[-64, 128], [128, -256]]),
            world=2)
    _kineto(base, "tidhuge", _first("kernel", "tid", 2**70), world=2)
    _kineto(base, "corrhuge", _first("kernel", "args", {"correlation": 2**64, "device": 0,
                                                        "stream": 7}), world=2)
    _kineto(base, "longname", _first("kernel", "name", "k" * (1 << 20)), world=2)
    _kineto(base, "phnum", _first("kernel", "ph", 88), world=2)
    _kineto(base, "devesc", _top("deviceProperties", [{"id": 0, "name": f"GPU{ESC}",
                                                       "numSms": 132}]), world=2)
    _kineto(base, "hostesc", _dist("host_name", f"node{ESC}"), world=2)


def _nccl_logs(base: Path) -> None:
    head = "host1:1234:1234 [0] NCCL INFO "
    logs = {
        "ncclrank": [f"{head}comm 0x1 rank 99999999999999999999 nranks 2 cudaDev 0 "
                     "nvmlDev 0 busId 1000 commId 0x2 - Init COMPLETE"],
        "ncclnranks": [f"{head}comm 0x1 rank 0 nranks -5 cudaDev 0 nvmlDev 0 busId 1000 "
                       "commId 0x2 - Init COMPLETE"],
        "ncclcount": [f"{head}AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count "
                      "99999999999999999999999 datatype 7 op 0 root 0 comm 0x1 [nranks=2] "
                      "stream 0x3"],
        "ncclhost": [f"node{ESC}:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
                     f"node{ESC}:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 "
                     "nvmlDev 0 busId 1000 commId 0x2 - Init COMPLETE"],
    }
    for folder, lines in logs.items():
        (base / folder).mkdir()
        (base / folder / "nccl.log").write_text("\n".join(lines) + "\n")
    (base / "ncclcr").mkdir()
    (base / "ncclcr" / "nccl.log").write_bytes((head + "x\r").encode() * 100_000)


# the other fields of a model spec, so that the value under test is the one refused
REST_YAML = "n_layers: 2\nhidden: 4096\nseq_len: 4096\nglobal_batch_tokens: 1048576\n"
REST_JSON = '"n_layers": 2, "hidden": 4096, "seq_len": 4096, "global_batch_tokens": 1048576}'


def _option_files(base: Path) -> None:
    texts = {
        "pyobj.yaml": "n_layers: !!python/object/apply:os.system ['true']\n",
        "inf.yaml": "n_params: .inf\n" + REST_YAML,
        "big.yaml": "n_params: 1e400\n" + REST_YAML,
        "hugeint.yaml": "n_params: 7e9\nn_layers: 99999999999999999999999999\n"
                        + REST_YAML.split("\n", 1)[1],
        "bool.yaml": "n_params: 7e9\nn_layers: yes\nhidden: 4096\nseq_len: 4096\n"
                     "global_batch_tokens: 1048576\n",
        "date.yaml": "n_params: 2024-01-01\n" + REST_YAML,
        "multi.yaml": "n_params: 7e9\n---\nn_layers: 2\n",
        "esckey.yaml": f"n_params: 7e9\n\"bogus{ESC}\": 1\n",
        "longkey.yaml": "n_params: 7e9\n" + "k" * 5000 + ": 1\n",
        "nan.json": '{"n_params": NaN, ' + REST_JSON,
        "big.json": '{"n_params": 1e400, ' + REST_JSON,
        "bool.json": '{"n_params": 7e9, "n_layers": true, "hidden": 4096, "seq_len": 4096, '
                     '"global_batch_tokens": 1048576}',
        "ck_long.json": json.dumps({"patterns": [{"pattern": "a" * 200_000, "library": "l",
                                                  "collective": "send", "op": "o"}]}),
        "ck_coll.json": json.dumps({"patterns": [{"pattern": "^x", "library": "l",
                                                  "collective": "bogus", "op": "o"}]}),
        "ck_str.json": json.dumps({"patterns": ["^x"]}),
        "ck_dict.json": json.dumps({"patterns": {}}),
        "ck_backref.json": json.dumps({"patterns": [{"pattern": "(a)\\1", "library": "l",
                                                     "collective": "send", "op": "o"}]}),
        "ck_num.json": json.dumps({"patterns": [{"pattern": 5, "library": "l",
                                                 "collective": "send", "op": "o"}]}),
        "ck_esc.json": json.dumps({"patterns": [{"pattern": f"({ESC}", "library": "l",
                                                 "collective": "send", "op": "o"}]}),
        "ck_nan.json": '{"patterns": NaN}',
    }
    for name, text in texts.items():
        (base / name).write_text(text)
    (base / "utf16.yaml").write_bytes("n_params: 7e9\n".encode("utf-16"))


def _outputs(base: Path, db: Path) -> None:
    (base / "dblink.md").symlink_to(db)
    os.link(db, base / "dbhard.md")
    (base / "tracelink.md").symlink_to(base / "t" / "rank0.json.gz")
    (base / "dirlink").symlink_to(base / "t")
    (base / "old.zst").write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 32)
    (base / "old.bz2").write_bytes(bz2.compress(b"keep me"))
    with tarfile.open(base / "old.tar", "w") as tf:
        tf.add(base / "t" / "rank0.json.gz", arcname="rank0.json.gz")
    (base / "model.yaml").write_text("n_params: 7e9\n")
    (base / "ck.json").write_text(json.dumps({"patterns": []}))
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(base / "sock.md"))
    sock.close()
    (base / "filelink").symlink_to(base / "model.yaml")
    (base / "danglingdb.duckdb").symlink_to(base / "nowhere" / "x.duckdb")
    (base / "nulllink.duckdb").symlink_to("/dev/null")
    (base / "dangling_root").symlink_to(base / "nowhere")


def _databases(base: Path, db: Path) -> None:
    _foreign_db(base / "v999.duckdb", "999")
    _foreign_db(base / "vabc.duckdb", "abc")
    _foreign_db(base / "vnone.duckdb", None)
    (base / "half.duckdb").write_bytes(db.read_bytes()[: 64 << 10])
    (base / "magic.duckdb").write_bytes(b"\x00" * 8 + b"DUCK" + os.urandom(8000))
    (base / "db.gz.duckdb").write_bytes(gzip.compress(db.read_bytes()))
    with open(base / "sparse.duckdb", "wb") as fh:
        fh.truncate(1 << 30)
    shutil.copyfile(db, base / "walbad.duckdb")
    (base / "walbad.duckdb.wal").write_bytes(os.urandom(4096))


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("audit7")
    for r in range(2):
        write_trace(base / "t" / f"rank{r}.json.gz", kineto_trace(rank=r, world_size=2))
        write_trace(base / "t2" / f"rank{r}.json.gz", kineto_trace(rank=r, world_size=2))
    db = base / "db.duckdb"
    for folder, run in (("t", "base"), ("t2", "other")):
        assert cli(("ingest", base / folder, "--db", db, "--run", run, "--quiet"))[0] == 0
    one = json.dumps(kineto_trace(rank=1, world_size=2)).encode()
    _archives(base, one)
    _traces(base)
    _nccl_logs(base)
    _option_files(base)
    _outputs(base, db)
    _databases(base, db)
    _fr(base, "frlong", _set_first_entry("collective_seq_id", 1 << 20000))
    _fr(base, "fr70", _set_first_entry("collective_seq_id", 1 << 70))
    _fr(base, "frneg", _set_first_entry("time_created_ns", -(1 << 80)))
    _fr(base, "frstate", _set_first_entry("state", f"odd{ESC}"))
    _fr(base, "frfloat", _set_first_entry("collective_seq_id", float("nan")))
    _fr(base, "frdesc", lambda raw: [g.__setitem__("desc", f"pg{ESC}")
                                     for g in raw["pg_config"].values()])
    yield base


D, T, R = "{db}", "{t}", "{root}"
PLAN = ("plan", "--params", "7e9", "--gpus", "8", "--gpu", "H100", "--seq", "4096")
NIGHT = ("nightly", T, "--db", D, "--job", "j", "--out-dir", "{root}/n")
NOTHING = "error: nothing ingested into run"
NEWER = "error: {root}/v999.duckdb: "
RAY = ("error: stepscope ingest: argument --executor: give the Ray cluster's address as "
       "ray:HOST:PORT")

RAW = {chr(c) for c in range(32) if chr(c) != "\t"} | {chr(c) for c in range(0x7F, 0xA0)} \
    | {"\u202e", "\u202d", "\u2066", "\u2067", "\u2068", "\u2069"}


def _raw_controls(lines: list[str]) -> bool:
    return any(ch in RAW for line in lines for ch in line)


def _no_server(*args: object, **kwargs: object) -> None:
    raise AssertionError("the dashboard started its server")


def params(cases: dict[str, Case], failed: dict[str, str]) -> list[Any]:
    """The case names, those in `failed` marked xfail (strict) with their reason."""
    return [pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=failed[name]))
            if name in failed else name for name in cases]


def check_case(root: Path, name: str, case: Case, tmp_path: Path,
               monkeypatch: pytest.MonkeyPatch) -> None:
    """Run one case: its exit code, the start of its first error line, one line (two for
    a "file:" case, its file's and "nothing ingested"), no traceback, internal error or
    raw control character, nothing written in the current folder, and a refused command
    leaves the database and the fixture folder as they were."""
    argv, env, want_rc, want_line = case
    monkeypatch.chdir(tmp_path)  # a command that writes where it should not shows up here
    if argv[0] == "dashboard":  # a dashboard that should have refused never serves here
        import stepscope.commands.dashboard_cmd as dashboard_cmd

        monkeypatch.setattr(dashboard_cmd, "start_server", _no_server)
    fill = {"db": str(root / "db.duckdb"), "t": str(root / "t"), "root": str(root)}
    before = (root / "db.duckdb").stat().st_mtime_ns
    listed = sorted(p.name for p in root.iterdir())
    rc, err = cli(tuple(a.format(**fill) if "{" in a else a for a in argv), env)
    errors = [x for x in err if not x.startswith(("warning:", "note:"))]
    assert not any("Traceback" in x or "internal error" in x for x in err), err
    assert not _raw_controls(err), err
    assert list(tmp_path.iterdir()) == [], list(tmp_path.iterdir())
    if want_rc == 0:
        assert rc == 0 and not any(x.startswith("error") for x in err), (rc, err)
        return
    assert rc == want_rc and errors and errors[0].startswith(want_line.format(**fill)), \
        (rc, err)
    if name.startswith("file:"):
        assert len(errors) == 2 and errors[1].startswith(NOTHING), err
    elif want_rc != 3:
        assert len(errors) == 1, err
    assert (root / "db.duckdb").stat().st_mtime_ns == before or want_rc == 3
    assert sorted(p.name for p in root.iterdir() if p.name != "n") == \
        [x for x in listed if x != "n"] or want_rc == 3
