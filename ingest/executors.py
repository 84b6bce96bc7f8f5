"""Where the per-rank tasks run (ingest/tasks.py): here, in worker processes, or on Ray.

Every executor yields the outcomes in task order with a bounded number of tasks in
flight, and can be cancelled from a signal handler (`cancel` only sets flags and asks
the workers to stop; the consumer's loop notices within `POLL_S`). Results are the same
whichever runs them: the task is one pure function of its file.

- `inline`: in this thread, one file after another (one file, or `--jobs 1`).
- `process`: a pool of worker processes (forkserver, SIGINT ignored in the workers so
  Ctrl-C is handled once, by the ingest); each worker's DuckDB gets CPUs / jobs threads.
- `ray[://ADDRESS]`: the same function as Ray tasks (docs/scale.md); needs
  `pip install 'stepscope[ray]'`, trace paths and the stage folder on storage every
  node sees.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any, Protocol

from ingest.errors import UsageError
from ingest.reader import CancelToken
from ingest.tasks import Outcome, RankFailed, RankTask, run_rank_task

POLL_S = 0.2
EXECUTOR_KINDS = ("auto", "inline", "process", "ray")


class Executor(Protocol):
    name: str

    def run(self, tasks: Sequence[RankTask]) -> Iterator[Outcome]:
        """Outcomes in task order; stopping the iteration stops the work in flight."""
        ...

    def cancel(self) -> None:
        """Stop soon (safe to call from a signal handler)."""
        ...


def default_jobs() -> int:
    return max(1, os.cpu_count() or 1)


class InlineExecutor:
    name = "inline"

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads or default_jobs()
        self._token = CancelToken()

    def run(self, tasks: Sequence[RankTask]) -> Iterator[Outcome]:
        for task in tasks:
            if self._token.cancelled:
                return
            yield run_rank_task(replace(task, threads=self.threads), self._token)

    def cancel(self) -> None:
        self._token.cancel()


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class ProcessExecutor:
    name = "process"

    def __init__(self, jobs: int) -> None:
        self.jobs = max(1, jobs)
        self.cancelled = False

    def run(self, tasks: Sequence[RankTask]) -> Iterator[Outcome]:
        if not tasks:
            return
        jobs = min(self.jobs, len(tasks))
        threads = max(1, default_jobs() // jobs)
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["ingest.tasks"])
        pool = ctx.Pool(jobs, initializer=_ignore_sigint)
        finished = False
        try:
            pending: list[Any] = []
            queue = [replace(t, threads=threads) for t in tasks]
            queue.reverse()
            while queue or pending:
                while queue and len(pending) < 2 * jobs:
                    task = queue.pop()
                    pending.append((task, pool.apply_async(run_rank_task, (task,))))
                task, result = pending.pop(0)
                yield self._wait(task, result)
            finished = True
        finally:
            if finished:
                pool.close()
            else:
                pool.terminate()
            pool.join()

    def _wait(self, task: RankTask, result: Any) -> Outcome:
        while not result.ready():
            if self.cancelled:
                return RankFailed(task.index, task.display, "cancelled")
            result.wait(POLL_S)
        try:
            outcome: Outcome = result.get()
        except Exception as exc:  # noqa: BLE001 - a worker died (killed, out of memory)
            return RankFailed(task.index, task.display,
                              f"the worker process failed ({type(exc).__name__}: {exc})")
        return outcome

    def cancel(self) -> None:
        self.cancelled = True


class RayExecutor:
    name = "ray"

    def __init__(self, address: str | None, jobs: int | None = None) -> None:
        self.address = address
        self.jobs = jobs
        self.cancelled = False

    def run(self, tasks: Sequence[RankTask]) -> Iterator[Outcome]:
        ray = _import_ray()
        if not ray.is_initialized():
            ray.init(address=self.address, ignore_reinit_error=True, log_to_driver=False,
                     include_dashboard=False, configure_logging=False)
        remote = ray.remote(num_cpus=1, max_retries=0)(run_rank_task)
        window = self.jobs or 2 * max(1, int(ray.cluster_resources().get("CPU", 1)))
        pending: list[tuple[RankTask, Any]] = []
        queue = list(reversed(tasks))
        try:
            while queue or pending:
                while queue and len(pending) < window:
                    task = queue.pop()
                    pending.append((task, remote.remote(task)))
                task, ref = pending.pop(0)
                yield self._wait(ray, task, ref)
        finally:
            for _, ref in pending:
                ray.cancel(ref, force=True)

    def _wait(self, ray: Any, task: RankTask, ref: Any) -> Outcome:
        while True:
            if self.cancelled:
                return RankFailed(task.index, task.display, "cancelled")
            ready, _ = ray.wait([ref], timeout=POLL_S)
            if ready:
                break
        try:
            outcome: Outcome = ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - the task or its node died
            return RankFailed(task.index, task.display,
                              f"the Ray task failed ({type(exc).__name__}: {exc})")
        return outcome

    def cancel(self) -> None:
        self.cancelled = True


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError("--executor ray needs Ray: pip install 'stepscope[ray]'") from None
    return ray


def parse_executor(spec: str) -> tuple[str, str | None]:
    """'auto' | 'inline' | 'process' | 'ray' | 'ray://HOST:PORT' | 'ray:HOST:PORT' ->
    (kind, Ray address or None); raises UsageError."""
    if spec == "ray" or spec.startswith(("ray:", "ray://")):
        rest = spec[len("ray"):]
        address = None
        if rest.startswith("://"):
            address = spec  # Ray Client address, given to ray.init as it is
        elif rest.startswith(":"):
            address = rest[1:] or None
        return "ray", address
    if spec in EXECUTOR_KINDS:
        return spec, None
    raise UsageError(f"--executor '{spec}': choose auto, inline, process, ray or "
                     "ray://ADDRESS")


def make_executor(spec: str, jobs: int | None, n_files: int) -> Executor:
    """The executor for `spec` (see parse_executor); 'auto' runs one file or --jobs 1
    inline and more in worker processes."""
    kind, address = parse_executor(spec)
    if kind == "ray":
        return RayExecutor(address, jobs)
    workers = jobs or default_jobs()
    if kind == "inline" or (kind == "auto" and (workers == 1 or n_files <= 1)):
        return InlineExecutor()
    return ProcessExecutor(workers)
