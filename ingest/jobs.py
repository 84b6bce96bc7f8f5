"""Are these traces of one job? Two jobs in one folder must never become one run.

A folder can hold the traces of two jobs (a 2-rank job and, 30 days later, a 4-rank
one). Ingested as one run they would mix ranks of both into a "complete" run whose
every number is wrong. The traces of one job share a world size, backend and NCCL
version (distributedInfo) and their profiling windows overlap in time (ranks are
profiled together; clocks of different hosts differ by far less than `GAP_NS`). The
loader collects one `TraceIdentity` per parsed file and refuses the ingest when
`split_jobs` finds two jobs or more of at least two files each, naming each (exit 1,
database unchanged); a single file that fits none of the others is a warning, so one
stray or damaged file never sinks the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from stepscope.ingest.errors import NothingIngestedError

GAP_NS = 3600 * 10**9  # windows more than an hour apart are different captures
SHOWN_FILES = 2


@dataclass(frozen=True)
class TraceIdentity:
    """What ties a trace file to its job."""

    file: str
    world_size: Any          # distributedInfo values as written (None when absent)
    backend: Any
    nccl_version: Any
    start_ns: int | None
    end_ns: int | None

    @property
    def key(self) -> tuple[str, str, str]:
        return (str(self.world_size), str(self.backend), str(self.nccl_version))


@dataclass
class Job:
    key: tuple[str, str, str]
    files: list[TraceIdentity]

    @property
    def start_ns(self) -> int | None:
        starts = [f.start_ns for f in self.files if f.start_ns is not None]
        return min(starts) if starts else None

    def describe(self) -> str:
        world, backend, nccl = self.key
        parts = [f"{len(self.files)} file(s)"]
        if world != "None":
            parts.append(f"world size {world}")
        if backend != "None":
            parts.append(f"backend {backend}")
        if nccl != "None":
            parts.append(f"NCCL {nccl}")
        if self.start_ns is not None:
            when = datetime.fromtimestamp(self.start_ns / 1e9, UTC)
            parts.append(f"starting {when:%Y-%m-%d %H:%M:%S} UTC")
        names = ", ".join(f.file for f in self.files[:SHOWN_FILES])
        more = ", ..." if len(self.files) > SHOWN_FILES else ""
        return f"{', '.join(parts)} ({names}{more})"


def _by_time(files: list[TraceIdentity]) -> list[list[TraceIdentity]]:
    """Group files whose windows overlap or lie within GAP_NS of each other."""
    timed = sorted((f for f in files if f.start_ns is not None), key=lambda f: f.start_ns or 0)
    groups: list[list[TraceIdentity]] = []
    reach = None
    for f in timed:
        start = f.start_ns or 0
        if reach is None or start > reach + GAP_NS:
            groups.append([])
        groups[-1].append(f)
        end = f.end_ns if f.end_ns is not None else start
        reach = end if reach is None else max(reach, end)
    untimed = [f for f in files if f.start_ns is None]
    if untimed:
        if groups:
            groups[0] += untimed
        else:
            groups.append(untimed)
    return groups


def split_jobs(files: list[TraceIdentity]) -> list[Job]:
    """The jobs among the files: by distributedInfo (a file without it joins any), then
    by time; usually one."""
    keyed: dict[tuple[str, str, str], list[TraceIdentity]] = {}
    for f in files:
        if f.world_size is not None or f.backend is not None:
            keyed.setdefault(f.key, []).append(f)
    bare = [f for f in files if f.world_size is None and f.backend is None]
    if not keyed:
        keyed[("None", "None", "None")] = []
    if len(keyed) == 1:
        next(iter(keyed.values())).extend(bare)
    jobs = [Job(key, group) for key, members in keyed.items() for group in _by_time(members)]
    return sorted(jobs, key=lambda j: (j.start_ns or 0, j.key))


def check_one_job(run: str, files: list[TraceIdentity]) -> list[str]:
    """Refuse (NothingIngestedError naming each job) when the files are of two or more
    jobs of at least two files each. A single file that does not fit the others (a stray
    trace, or one whose values were damaged) is not a reason to lose the run: it gets a
    warning line instead, returned here."""
    jobs = split_jobs(files)
    if len(jobs) <= 1:
        return []
    if sum(len(job.files) >= 2 for job in jobs) >= 2:
        listing = "; ".join(f"job {i}: {job.describe()}" for i, job in enumerate(jobs, 1))
        raise NothingIngestedError(
            f"nothing ingested into run '{run}': the traces are of {len(jobs)} different "
            f"jobs (distributedInfo or profiling windows differ) -- {listing}. Ingest each "
            "job as its own run (one folder per job, or --run-per-dir); the database is "
            "unchanged")
    main = max(jobs, key=lambda job: len(job.files))
    return [f"{job.files[0].file}: does not look like the other traces of run '{run}' "
            f"({job.describe().split(' (')[0]}; the others: {main.describe()}); check that "
            "it belongs to this run" for job in jobs if job is not main]
