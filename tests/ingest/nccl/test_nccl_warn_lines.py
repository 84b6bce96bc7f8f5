"""NCCL WARN lines as logs of every era print them (issue 41 §4, §5): without a timestamp
(NCCL < 2.26: `host:pid:tid [dev] file:line NCCL WARN msg`), and aws-ofi-nccl's failed
capability probe, which the plugin falls back from.

The log below is hand-written from quoted real lines: the socket WARN is quoted in a
public note as `misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to
172.17.0.1<39275> failed : Software caused connection abort`; the probe is aws-ofi-nccl's
`NCCL_OFI_WARN("OFI fi_getinfo() call failed: %s", fi_strerror(ret))`
(nccl_ofi_rdma.cpp, quoted in logs as `nccl_net_ofi_rdma_init:7737 NCCL WARN NET/OFI OFI
fi_getinfo() call failed: ...`) with FI_ENOSYS's text; the rest has the shapes of
tests/data/nccl/README.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepscope.cli import main

LOG = """\
gpu-a:4101:4101 [0] NCCL INFO Bootstrap : Using eth0:172.17.0.2<0>
gpu-a:4101:4101 [0] NCCL INFO cudaDriverVersion 12040
NCCL version 2.21.5+cuda12.4
gpu-a:4101:4120 [0] nccl_net_ofi_rdma_init:7737 NCCL WARN NET/OFI OFI fi_getinfo() call \
failed: Function not implemented
gpu-a:4101:4120 [0] NCCL INFO NET/Socket : Using [0]eth0:172.17.0.2<0>
gpu-a:4101:4120 [0] NCCL INFO Using network Socket
gpu-a:4101:4120 [0] NCCL INFO comm 0x55d0c1a2b3c0 rank 0 nRanks 2 nNodes 2 localRanks 1 \
localRank 0 MNNVL 0
gpu-a:4101:4120 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to \
172.17.0.1<39275> failed : Software caused connection abort
gpu-a:4101:4120 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to \
172.17.0.1<39275> failed : Connection refused
gpu-a:4101:4120 [0] transport/net_socket.cc:500 NCCL WARN NET/Socket : message truncated
"""


def _ingest(tmp_path: Path, run: str) -> Path:
    logs = tmp_path / run
    logs.mkdir()
    (logs / "nccl.gpu-a.4101.log").write_text(LOG)
    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(logs), "--db", str(db), "--run", run]) == 0
    return db


def test_untimed_warn_lines_are_reported_not_crashed_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `report` and `diff` stopped with an internal error (the first line was the
    one with the smallest timestamp, and none has one). The first line is now the first
    written; the probe is its own finding, "info"."""
    db = _ingest(tmp_path, "a")
    _ingest(tmp_path, "b")
    capsys.readouterr()
    assert main(["report", "a", "--db", str(db), "--format", "json"]) == 0
    findings = json.loads(capsys.readouterr().out)["nccl"]["findings"]
    got = [(f["kind"], f["severity"], f["message"].split("; first: ")) for f in findings]
    assert got == [
        ("nccl_warnings", "high",
         ["gpu-a logged 3 NCCL WARN line(s)", "socketStartConnect: Connect to "
          "172.17.0.1<39275> failed : Software caused connection abort"]),
        ("nccl_probe_failed", "info",
         ["gpu-a logged 1 NCCL WARN line(s)", "NET/OFI OFI fi_getinfo() call failed: "
          "Function not implemented (a capability probe the network plugin falls back "
          "from, not a fault)"])]
    assert main(["diff", "a", "b", "--db", str(db), "--format", "md"]) == 0


@pytest.mark.parametrize("message, benign", [
    ("NET/OFI OFI fi_getinfo() call failed: Function not implemented", True),
    ("NET/OFI OFI fi_getinfo() call failed: No data available", False),
    ("NET/OFI Request completed with error. RC: 21. Error: unknown error", False),
    ("NET/IB : Got completion from peer 10.0.0.2<52044> with status=12 opcode=0 len=0 "
     "vendor err 129 (Recv)", False),
    ("Call to ibv_modify_qp failed: unhandled system error", False),
])
def test_only_known_probes_are_info(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    message: str, benign: bool) -> None:
    """Completion errors, timeouts and system errors stay high."""
    logs = tmp_path / "w"
    logs.mkdir()
    (logs / "n.log").write_text(f"h:1:2 [0] x.cc:1 NCCL WARN {message}\n")
    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(logs), "--db", str(db), "--run", "w"]) == 0
    capsys.readouterr()
    assert main(["report", "w", "--db", str(db), "--format", "json"]) == 0
    [finding] = json.loads(capsys.readouterr().out)["nccl"]["findings"]
    assert finding["severity"] == ("info" if benign else "high")
