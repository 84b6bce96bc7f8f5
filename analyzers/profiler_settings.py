"""What the profiler was asked to record, from the traces themselves (ranks.profiler_config,
docs/schema.md), so that a missing kind of evidence gets its true reason: "profile with
profile_memory=True" is wrong advice for a trace whose metadata says profile_memory=1, and
"record_shapes=True" for one recorded with it whose ops ran from CUDA/HIP graph replays."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from stepscope.analyzers._sql import sql


@dataclass(frozen=True)
class ProfilerSettings:
    """Of the run's ranks: how many there are, how many record each setting on, and the
    CUDA/HIP graph launches on their host threads."""
    ranks: int
    record_shapes: int
    profile_memory: int
    graph_launches: int

    def everywhere(self, setting: int) -> bool:
        """A setting every rank records on (none of a run without ranks)."""
        return self.ranks > 0 and setting == self.ranks


def profiler_settings(con: duckdb.DuckDBPyConnection, run: str) -> ProfilerSettings:
    row = con.execute(sql("profiler/settings.sql"), {"run": run}).fetchone()
    ranks, shapes, memory, launches = row if row else (0, 0, 0, 0)
    return ProfilerSettings(int(ranks or 0), int(shapes or 0), int(memory or 0),
                            int(launches or 0))


def memory_note(con: duckdb.DuckDBPyConnection, run: str) -> str | None:
    """Why a GPU run has no memory section when its traces record profile_memory=1 (None:
    they do not say so; the renderers then ask for profile_memory=True)."""
    settings = profiler_settings(con, run)
    if not settings.everywhere(settings.profile_memory):
        return None
    return ("no GPU memory events in the traces although they record profile_memory=1: the "
            "allocator wrote none in the profiled window (or they were removed from the "
            "files); the peak memory per rank is not known")


def no_shapes_reason(settings: ProfilerSettings) -> str | None:
    """Why no op has the shapes model FLOPs need when the traces record record_shapes=1
    (None: they do not say so)."""
    if not settings.everywhere(settings.record_shapes):
        return None
    if settings.graph_launches:
        return ("the traces record record_shapes=1, but no matmul, attention or convolution "
                f"op has shapes: the GPU work ran from {settings.graph_launches} CUDA/HIP "
                "graph replay(s), whose ops the profiler does not record")
    return ("the traces record record_shapes=1, but no matmul, attention or convolution op "
            "has shapes (`Input Dims`)")
