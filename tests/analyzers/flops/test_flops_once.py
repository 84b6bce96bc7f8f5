"""Each op tree's FLOPs are counted once (issue 40, point 1; analyzers/sql/mfu/flops.sql):
an op with a FLOP formula is not counted under an enclosing op that is. Real traces nest
attention this way (aten::_scaled_dot_product_flash_attention over
aten::_flash_attention_forward, both with `Input Dims`; the same for efficient attention and
the backwards), and aten::linear over aten::matmul over aten::mm. Checked against FLOPs
computed here by hand from the shapes, and by a property over random op trees whose
expected total is computed from the trees in Python, not by the project's SQL."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from conftest import kineto_trace, write_trace

import stepscope
from stepscope.analyzers.flops import counted_ops as co

B, H, S, D = 2, 16, 1024, 64
BHSD = [B, H, S, D]   # aten::_scaled_dot_product_* tensors: [batch, heads, seq, head_dim]
BSHD = [B, S, H, D]   # aten::_flash/_efficient_attention_*: [batch, seq, heads, head_dim]
ATTN_FWD = 4.0 * B * H * S * S * D
ATTN_BWD = 8.0 * B * H * S * S * D
LINEAR = 2.0 * 4 * 512 * 1024 * 4096

# (parent, parent dims, child, child dims, FLOPs counted once, thread) as real traces nest them
PAIRS = [
    ("aten::_scaled_dot_product_flash_attention", [BHSD] * 3,
     "aten::_flash_attention_forward", [BSHD] * 3, ATTN_FWD, 100),
    ("aten::_scaled_dot_product_efficient_attention", [BHSD] * 3,
     "aten::_efficient_attention_forward", [BSHD] * 3, ATTN_FWD, 100),
    ("aten::_scaled_dot_product_flash_attention_backward", [BHSD] * 4,
     "aten::_flash_attention_backward", [BSHD] * 4, ATTN_BWD, 101),
    ("aten::_scaled_dot_product_efficient_attention_backward", [BHSD] * 4,
     "aten::_efficient_attention_backward", [BSHD] * 4, ATTN_BWD, 101),
]


def _op(name: str, ts: int, dur: int, tid: int, dims: list[Any] | None) -> dict[str, Any]:
    args: dict[str, Any] = {}
    if dims is not None:
        args = {"Input Dims": dims, "Input type": ["c10::BFloat16"] * len(dims)}
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 100, "tid": tid,
            "ts": float(ts), "dur": float(dur), "args": args}


def _nested_ops() -> list[dict[str, Any]]:
    """The pairs above and a linear -> matmul -> mm chain, in the second step."""
    events = []
    for i, (parent, pdims, child, cdims, _, tid) in enumerate(PAIRS):
        t = 2400 + 100 * (i // 2) if tid == 100 else 2320 + 100 * (i // 2)
        t += 40 * (i % 2)
        events += [_op(parent, t, 30, tid, pdims), _op(child, t + 5, 20, tid, cdims)]
    events += [
        _op("aten::linear", 2610, 80, 100, [[4, 512, 1024], [4096, 1024], [4096]]),
        _op("aten::matmul", 2615, 70, 100, [[4, 512, 1024], [1024, 4096]]),
        _op("aten::mm", 2620, 60, 100, [[2048, 1024], [1024, 4096]]),
    ]
    return events


def _counted(tmp_path: Path, events: list[dict[str, Any]]) -> tuple[list[tuple[Any, ...]],
                                                                    Path]:
    """(name, model_flops, op_id) of every counted op of a one-rank run with `events`."""
    trace = kineto_trace(rank=0, world_size=1, steps=3, extra_events=events)
    write_trace(tmp_path / "t" / "rank0.json.gz", trace)
    db = tmp_path / "t.duckdb"
    stepscope.ingest_run(tmp_path / "t", db=db, run="r")
    with stepscope.open(db) as store, co.counted_ops(store.con, "r"):
        rows = store.con.execute(
            "SELECT name, model_flops, op_id FROM counted_ops WHERE run = 'r' ORDER BY op_id"
        ).fetchall()
    return rows, db


def test_each_pair_found_in_real_traces_counts_once(tmp_path: Path) -> None:
    rows, _ = _counted(tmp_path, _nested_ops())
    by_name: dict[str, list[float]] = {}
    for name, flops, _ in rows:
        by_name.setdefault(name, []).append(flops)
    for parent, _, child, _, flops, _ in PAIRS:
        assert by_name.get(parent) == [pytest.approx(flops)], parent
        assert child not in by_name, child
    assert by_name["aten::linear"] == [pytest.approx(LINEAR)]
    assert "aten::matmul" not in by_name
    # the base trace's own mm in each of 3 steps, plus nothing from the chain's mm
    assert by_name["aten::mm"] == [pytest.approx(2.0 * 64 * 128 * 256)] * 3
    total = sum(f for _, f, _ in rows)
    # before: each pair twice and the chain's mm too (2 * 2.15e10 + 2 * 4.29e10 + ...)
    assert total == pytest.approx(2 * ATTN_FWD + 2 * ATTN_BWD + LINEAR
                                  + 3 * 2.0 * 64 * 128 * 256)


# ------------------------------------------------------------------ property: random trees
FORMULA = {  # name -> (Input Dims, FLOPs) for the ops of the random trees
    "aten::mm": ([[32, 64], [64, 16]], 2.0 * 32 * 64 * 16),
    "aten::bmm": ([[4, 32, 64], [4, 64, 8]], 2.0 * 4 * 32 * 64 * 8),
    "aten::addmm": ([[16], [8, 32], [32, 16]], 2.0 * 8 * 32 * 16),
    "aten::_scaled_dot_product_flash_attention": ([[1, 2, 8, 4]] * 3, 4.0 * 1 * 2 * 8 * 8 * 4),
    "aten::_flash_attention_forward": ([[1, 8, 2, 4]] * 3, 4.0 * 1 * 2 * 8 * 8 * 4),
}
PLAIN = ["aten::scaled_dot_product_attention", "aten::add", "Module.forward", "aten::copy_"]


def _tree(rng: random.Random, ts: int, dur: int, depth: int,
          counted_above: bool, events: list[dict[str, Any]]) -> float:
    """Random nested ops in [ts, ts + dur) on thread 100; returns the FLOPs the tree should
    count: those of each formula op with no formula op above it."""
    name = rng.choice(list(FORMULA) + PLAIN)
    dims, flops = FORMULA.get(name, (None, 0.0))
    events.append(_op(name, ts, dur, 100, dims))
    expected = flops if flops and not counted_above else 0.0
    n = rng.randint(0, 3) if depth < 4 and dur >= 40 else 0
    width = dur // (n + 1) if n else 0
    for i in range(n):
        expected += _tree(rng, ts + 2 + i * width, width - 4, depth + 1,
                          counted_above or bool(flops), events)
    return expected


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_flops_are_counted_under_an_op_already_counted(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    expected = 0.0
    for k in range(60):  # after the steps, one tree every 1,000 us
        expected += _tree(rng, 10_000 + 1_000 * k, 900, 0, False, events)
    rows, db = _counted(tmp_path, events)
    base_mm = 3 * 2.0 * 64 * 128 * 256
    assert sum(f for _, f, _ in rows) == pytest.approx(expected + base_mm)
    with stepscope.open(db) as store, co.counted_ops(store.con, "r"):
        under = store.con.execute("""
            WITH RECURSIVE up(op_id, anc) AS (
                SELECT c.op_id, o.parent_id FROM counted_ops c
                JOIN cpu_ops o ON o.run = c.run AND o.rank = c.rank AND o.op_id = c.op_id
                WHERE c.run = 'r'
                UNION ALL
                SELECT u.op_id, o.parent_id FROM up u
                JOIN cpu_ops o ON o.run = 'r' AND o.rank = 0 AND o.op_id = u.anc
            )
            SELECT count(*) FROM up JOIN counted_ops c ON c.run = 'r' AND c.op_id = up.anc
        """).fetchone()
    assert under == (0,)


FLUX = (Path(__file__).parents[2] / "data" / "AMD-AGI_TraceLens" / "tests" / "traces"
        / "inference" / "xdit_flux.1_aiter_sage" / "profile_trace_rank_0.json.gz")


def test_the_real_flux_trace_counts_each_attention_once(tmp_path: Path) -> None:
    """xDiT FLUX.1 on MI300X (AMD-AGI/TraceLens): 13 aten::_scaled_dot_product_flash_attention
    ops, each over an aten::_flash_attention_forward with `Input Dims` of its own. The
    attention FLOPs counted are those of the 13 parents, 4*B*H*Sq*Sk*D each from their raw
    `Input Dims` ([batch, heads, seq, head_dim]); the children count nothing."""
    import gzip
    import json

    events = json.loads(gzip.decompress(FLUX.read_bytes()))["traceEvents"]
    parents = [e for e in events if e.get("name") == "aten::_scaled_dot_product_flash_attention"]
    children = [e for e in events if e.get("name") == "aten::_flash_attention_forward"]
    assert len(parents) == len(children) == 13
    assert all(p["tid"] == c["tid"] and p["ts"] <= c["ts"]
               and c["ts"] + c["dur"] <= p["ts"] + p["dur"]
               for p, c in zip(sorted(parents, key=lambda e: e["ts"]),
                               sorted(children, key=lambda e: e["ts"]), strict=True))
    want = sum(4.0 * q[0] * q[1] * q[2] * k[2] * q[3]
               for q, k in (e["args"]["Input Dims"][:2] for e in parents))
    db = tmp_path / "flux.duckdb"
    stepscope.ingest_run([FLUX], db=db, run="flux", jobs=1)
    with stepscope.open(db) as store, co.counted_ops(store.con, "flux"):
        rows = store.con.execute(
            "SELECT name, count(*), sum(model_flops) FROM counted_ops WHERE run = 'flux' "
            "AND name LIKE '%attention%' GROUP BY name").fetchall()
    assert [(n, c) for n, c, _ in rows] == [("aten::_scaled_dot_product_flash_attention", 13)]
    assert rows[0][2] == pytest.approx(want, rel=1e-12)
