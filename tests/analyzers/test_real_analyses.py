"""The roofline, memory and all_to_all analyses on every real trace in tests/data/traces:
each runs without error and either reports or says what it cannot compute and why
(docs/roofline.md, docs/memory.md, docs/alltoall.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import real_trace_files

from stepscope.analyzers.results import Report
from stepscope.dashboard.render.report import report_markdown


def test_every_real_trace(real_report: Callable[[Path], Report]) -> None:
    shaped, memory, a2a = set(), set(), set()
    for f in real_trace_files():
        r = real_report(f)
        text = report_markdown(r)
        roof = r.roofline
        assert roof is not None and (roof.kinds or roof.message), f.name
        if roof.kernel_efficiency:  # the parts add up to the MFU stage
            assert sum(p.points for p in roof.kernel_efficiency) == pytest.approx(
                roof.stage_points, abs=1e-9), f.name
        for k in (*roof.kinds, *roof.kernels, *roof.gemm_shapes):  # never above a roof
            assert k.roof_share is None or k.roof_share <= 1.0, (f.name, k.name)
            assert k.lost_ms is None or k.lost_ms >= 0.0, (f.name, k.name)
            assert k.above_roof is None or (k.above_roof > 1.0 and k.roof_share is None)
        for part in roof.kernel_efficiency:  # a part over several dtypes: their mix
            rows = [k for k in roof.kinds if k.kind == part.name]
            if len(rows) > 1 and all(k.bound == "memory" for k in rows):
                mixed = (sum((k.roof_share or 0.0) * k.time_ms for k in rows)
                         / sum(k.time_ms for k in rows))
                assert part.roof_share == pytest.approx(mixed, rel=1e-6), (f.name, part)
        if roof.kinds:
            shaped.add(f.name)
        assert "## Kernels against their roofline" in text
        if r.memory is not None:
            memory.add(f.name)
            assert r.memory.peak_allocated_bytes > 0, f.name
        elif r.run.timeline == "gpu":
            assert "no memory events in the traces" in text, f.name
        if r.all_to_all is not None:
            a2a.add(f.name)
            for g in r.all_to_all.groups:  # one traced rank per job: no imbalance
                assert g.imbalance is None and g.bytes_per_rank > 0, f.name
            assert "not matched across every member" in (r.all_to_all.message or "")
            assert "## all_to_all traffic and imbalance" in text
            assert "a2a-imbalance" not in {x.id for x in r.recommendations}
    assert {"mi250_minitoy_train_ROCm6_2_kineto.json.gz", "eager_trace.json.gz",
            "resnet_act_checkpoint.json.gz", "worker0.1623143089861.pt.trace.json.gz"} <= shaped
    assert memory == {"df_index_resolver.json.gz", "worker0.1623143089861.pt.trace.json.gz"}
    assert {"sampled_rank-0.json.gz", "control.json.gz", "rank0.json.gz"} <= a2a
