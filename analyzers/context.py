"""The run context: everything a report's analyzers share, computed once per run.

`run_context` reads the run's identity, device and peak, attribution over complete steps,
pipeline topology, layout and hosts; each analyzer then takes the context and returns its
own typed section (analyzers/results/). No analyzer reads another's half-built output.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import duckdb
import msgspec

from stepscope.analyzers._sql import install_macros, sql
from stepscope.analyzers.flops.model_spec import ModelSpec
from stepscope.analyzers.flops.peaks import DTYPES, RunDevice, run_device
from stepscope.analyzers.flops.run_spec import run_spec
from stepscope.analyzers.parallel.layout import layout
from stepscope.analyzers.parallel.pipeline import PipelineTopology, topology
from stepscope.analyzers.results import (
    CATEGORIES,
    Breakdown,
    FailedFile,
    IdleSplit,
    Layout,
    RankTimes,
    RunInfo,
    StepTimes,
)
from stepscope.ingest.errors import UsageError


@dataclass(frozen=True)
class ReportOptions:
    """What the user chose: a model spec, a peak override, the dtype of the peak."""
    spec: ModelSpec | None = None
    peak_tflops: float | None = None
    dtype: str | None = None  # None: inferred from the traces (analyzers.flops.mfu.choose_dtype)

    def __post_init__(self) -> None:
        if self.dtype is not None and self.dtype not in DTYPES:
            raise UsageError(f"--dtype must be one of {', '.join(DTYPES)}")
        if self.peak_tflops is not None and self.peak_tflops <= 0:
            raise UsageError("--peak-tflops must be positive")


@dataclass(frozen=True)
class Attribution:
    """Step time and categories over complete steps: per rank, per step, and the mean."""
    per_rank: tuple[RankTimes, ...]
    per_step: tuple[StepTimes, ...]
    step_time_ms: float
    breakdown_ms: Breakdown
    by_rank: dict[int, RankTimes] = field(default_factory=dict)


@dataclass(frozen=True)
class RunContext:
    """One run's shared facts (see the module docstring)."""
    con: duckdb.DuckDBPyConnection
    run: str
    info: RunInfo
    device: RunDevice
    attribution: Attribution
    topology: PipelineTopology | None
    layout: Layout
    options: ReportOptions
    step_sources: tuple[str, ...] = ()  # how steps were found, when not ProfilerStep#N
    spec_source: str | None = None  # "--model", or the path of the model.json found

    @property
    def world(self) -> int:
        """Ranks of the job (world size, else the ranks ingested, at least 1)."""
        return int(self.info.world_size or self.info.ranks or 1)

    @property
    def spec(self) -> ModelSpec | None:
        return self.options.spec


def _breakdown(row: dict[str, float | None]) -> Breakdown:
    return Breakdown(**{cat: float(row[cat] or 0.0) for cat in CATEGORIES})


def _idle_split(row: dict[str, float | None]) -> IdleSplit | None:
    """The rank's idle split (None for a run attributed before the split existed)."""
    parts = (row.get("idle_host"), row.get("idle_launch"), row.get("idle_other"))
    if any(p is None for p in parts):
        return None
    host, launch, other = (float(p or 0.0) for p in parts)
    return IdleSplit(host_bound=host, launch_overhead=launch, other=other)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def attribution(con: duckdb.DuckDBPyConnection, run: str) -> Attribution:
    """Per-rank and per-step means of the attribution, and their mean over ranks."""
    rank_rows = con.sql(sql("report/rank_means.sql"), params={"run": run}).pl().to_dicts()
    per_rank = tuple(RankTimes(rank=int(r["rank"]), host=r["host"], n_steps=int(r["n_steps"]),
                               step_time_ms=float(r["step_time_ms"]), breakdown_ms=_breakdown(r),
                               idle_split_ms=_idle_split(r))
                     for r in rank_rows)
    step_rows = con.sql(sql("report/step_means.sql"), params={"run": run}).pl().to_dicts()
    per_step = tuple(StepTimes(step=int(r["step"]), complete=bool(r["complete"]),
                               n_ranks=int(r["n_ranks"]), step_time_ms=float(r["step_time_ms"]),
                               breakdown_ms=_breakdown(r))
                     for r in step_rows)
    mean = Breakdown(**{c: _mean([r.breakdown_ms.ms(c) for r in per_rank]) for c in CATEGORIES})
    return Attribution(per_rank=per_rank, per_step=per_step,
                       step_time_ms=_mean([r.step_time_ms for r in per_rank]),
                       breakdown_ms=mean, by_rank={r.rank: r for r in per_rank})


CPU_ONLY = "CPU only"  # RunInfo.device when no rank ran on a GPU (report/run_info.sql)


def no_gpu_timeline(info: RunInfo) -> str:
    """Why a run attributed on the CPU timeline has no GPU one, as the start of a
    message: 'CPU-only traces', or, when its ranks ran on a GPU whose kernels were not
    traced (the CUPTI range profiler measures kernels but writes no timeline of them),
    'no GPU kernel events in the traces'; a run of GPUs known from NCCL evidence alone
    has 'no profiler traces'."""
    if not info.ranks and info.device not in (None, CPU_ONLY):
        return "no profiler traces (only NCCL evidence)"
    if info.device in (None, CPU_ONLY):
        return "CPU-only traces"
    return f"no GPU kernel events in the traces (the kernels on the {info.device} were not traced)"


def _failed_files(raw: str | None) -> tuple[FailedFile, ...]:
    """runs.failed_files (JSON text in the database) as typed entries."""
    return msgspec.json.decode(raw, type=tuple[FailedFile, ...]) if raw else ()


def run_info(con: duckdb.DuckDBPyConnection, run: str) -> tuple[RunInfo, tuple[str, ...]]:
    """The run's identity and its step sources; KeyError when there is no such run."""
    row = next(iter(con.execute(sql("report/run_info.sql"), {"run": run}).fetchall()), None)
    if row is None:
        raise KeyError(run)
    (name, status, world_size, n_ranks, failed, device, hosts, timeline, host_source,
     step_sources, rank_subset) = row
    info = RunInfo(name=name, status=status,
                   world_size=None if world_size is None else int(world_size),
                   ranks=None if n_ranks is None else int(n_ranks), device=device,
                   hosts=tuple(hosts or ()), host_source=host_source,
                   step_source=", ".join(step_sources or []) or None, timeline=timeline,
                   failed_files=_failed_files(failed), rank_subset=rank_subset)
    return info, tuple(step_sources or ())


def run_context(con: duckdb.DuckDBPyConnection, run: str,
                options: ReportOptions | None = None) -> RunContext:
    """Read the shared facts of `run` once (KeyError when there is no such run). The
    model spec is the one rule of analyzers/flops/run_spec.py: --model (options.spec),
    else model.json beside the run's traces."""
    install_macros(con)
    info, step_sources = run_info(con, run)
    options = options or ReportOptions()
    found = run_spec(con, run, options.spec)
    if found is not None:
        options = replace(options, spec=found[0])
    pipe = topology(con, run)
    world = int(info.world_size or info.ranks or 0)
    return RunContext(
        con=con, run=run, info=info, device=run_device(con, run),
        attribution=attribution(con, run), topology=pipe,
        layout=layout(con, run, world, pipe.stages if pipe else None),
        options=options, step_sources=step_sources,
        spec_source=found[1] if found is not None else None)
