"""Split a `stepscope export` file back into one Kineto trace per rank (tests only), so
that the project's own reader can ingest it again: the round trip of tests/analyzers/test_export.py.

Keeps the original events (drops the overlay tracks and flows stepscope added), puts GPU
events back on pid = device and tid = stream as Kineto writes them, and gives each file
the rank's own metadata from the export's otherData (distributedInfo, deviceProperties,
host) with baseTimeNanoseconds the export's origin."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

GPU_TID = 1 << 40


def split(export: Path, out: Path) -> list[Path]:
    data = json.loads(export.read_text())
    meta = data["otherData"]["stepscope"]
    per_rank: dict[int, list[dict[str, Any]]] = {int(r): [] for r in meta["ranks"]}
    for ev in data["traceEvents"]:
        cat = str(ev.get("cat", ""))
        if ev["ph"] != "X" or cat.startswith("stepscope"):
            continue
        rank = int(ev["pid"])
        ev = dict(ev)
        info = meta["ranks"][str(rank)]
        if ev["tid"] >= GPU_TID:
            ev["pid"], ev["tid"] = ev["args"]["device"], ev["args"]["stream"]
        else:
            ev["pid"] = info["pid"]
        ev["args"] = {k: v for k, v in ev.get("args", {}).items() if v is not None}
        per_rank[rank].append(ev)
    files = []
    out.mkdir(parents=True, exist_ok=True)
    for rank, events in per_rank.items():
        info = meta["ranks"][str(rank)]
        doc = {"schemaVersion": 1, "distributedInfo": info["distributedInfo"],
               "deviceProperties": info["deviceProperties"] or [],
               "baseTimeNanoseconds": meta["origin_ns"], "traceEvents": events}
        if info["host_name"] is not None:
            doc["host_name"] = info["host_name"]
        path = out / f"rank{rank}.json.gz"
        with gzip.open(path, "wt") as fh:
            json.dump(doc, fh)
        files.append(path)
    return files
