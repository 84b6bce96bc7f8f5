"""Where the per-file tasks run (ingest/tasks.py): here, in worker processes, or on Ray.

Every executor yields the outcomes in task order with a bounded number of tasks in
flight, and can be cancelled from a signal handler (`cancel` only sets flags and asks
the workers to stop; the consumer's loop notices within `POLL_S`). Results are the same
whichever runs them: the task is one pure function of its file.

- `inline`: in this thread, one file after another (one file, or `--jobs 1`).
- `process`: `jobs` worker subprocesses (ingest/worker.py, in their own session so
  Ctrl-C is handled once, by the ingest); each worker's DuckDB gets CPUs / jobs threads.
- `ray[://ADDRESS]`: the same function as Ray tasks (docs/scale.md); needs
  `pip install 'stepscope[ray]'`, trace paths and the stage folder on storage every
  node sees.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import replace
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any, Protocol

from stepscope.ingest import process_tree
from stepscope.ingest.cancel import CancelToken
from stepscope.ingest.errors import UsageError
from stepscope.ingest.number_text import NumberTextError, setting, whole
from stepscope.ingest.tasks import Outcome, RankFailed, Task, run_task
from stepscope.ingest.worker import receive, send

POLL_S = 0.2
_QUIET_DROPPED = "RAY_IGNORE_UNHANDLED_ERRORS"  # Ray reads it as each error arrives
STOPPED_LIMIT_S = 30.0  # a worker stopped (SIGSTOP) this long is killed: its task fails
RAY_CONNECT_TIMEOUT_S = 10  # to reach a Ray cluster's address before Ray tries at all
QUEUE_DEPTH = 2  # tasks sent ahead to one worker process: the one it runs and the next
EXECUTOR_KINDS = ("auto", "inline", "process", "ray")


class Executor(Protocol):
    name: str

    def run(self, tasks: Sequence[Task]) -> Iterator[Outcome]:
        """Outcomes in task order; stopping the iteration stops the work in flight."""
        ...

    def cancel(self) -> None:
        """Stop soon (safe to call from a signal handler)."""
        ...

    def start(self, n_tasks: int) -> None:
        """Get ready for `n_tasks` tasks before `run` (worker processes start importing
        while the caller opens its database); optional."""
        ...

    def close(self) -> None:
        """Release what `start` took when `run` never ran to its end."""
        ...


JOBS_ENV = "STEPSCOPE_JOBS"
MAX_JOBS = 1024


def default_jobs() -> int:
    """The ingest's CPU budget: $STEPSCOPE_JOBS (1 to 1024), else the number of CPUs.
    It is the default --jobs and the DuckDB threads the executors share out; set it
    where stepscope shares the machine with other parallel work (a CI runner, a test
    suite already running one process per core)."""
    env = setting(JOBS_ENV)
    if env is None:
        return max(1, os.cpu_count() or 1)
    try:
        return whole(env, 1, MAX_JOBS)  # ASCII digits only: no '+', space or newline
    except NumberTextError:
        raise UsageError(f"${JOBS_ENV}={env!r}: expected a whole number from 1 to "
                         f"{MAX_JOBS}") from None


class InlineExecutor:
    name = "inline"

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads or default_jobs()
        self._token = CancelToken()

    def run(self, tasks: Sequence[Task]) -> Iterator[Outcome]:
        for task in tasks:
            if self._token.cancelled:
                return
            yield run_task(replace(task, threads=self.threads), self._token)

    def cancel(self) -> None:
        self._token.cancel()

    def start(self, n_tasks: int) -> None:
        pass  # nothing to start: the tasks run in this thread

    def close(self) -> None:
        pass


def worker_command() -> list[str]:
    """`python -P -m stepscope.ingest.worker`: -P keeps the current folder off the
    worker's sys.path, so a user's `inspect.py` or `dashboard/` there cannot shadow a
    module the worker imports."""
    return [sys.executable, "-P", "-m", "stepscope.ingest.worker"]


def worker_env() -> dict[str, str]:
    """This process's environment, plus the folder that holds the `stepscope` package
    this process imported when that folder is not an installed site (a checkout on
    PYTHONPATH or the current folder), so the worker runs the same code."""
    import site

    import stepscope

    env = dict(os.environ)
    root = str(Path(stepscope.__file__).resolve().parent.parent)
    sites = {str(Path(p).resolve()) for p in [*site.getsitepackages(),
                                               site.getusersitepackages()]}
    if root not in sites:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


STDERR_TAIL_BYTES = 4096


class _Worker:
    """One `python -P -m stepscope.ingest.worker` subprocess, reading its tasks in order
    (up to QUEUE_DEPTH sent ahead). Its stderr goes to a temporary file, so a worker
    that dies can say why."""

    def __init__(self) -> None:
        self.stderr = tempfile.TemporaryFile()
        # unbuffered pipes: with tasks sent ahead, two outcomes can wait in the pipe, and
        # a buffered reader would pull the second into its buffer, out of the poll's sight
        self.proc = subprocess.Popen(
            worker_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.stderr, env=worker_env(), start_new_session=True, bufsize=0)
        self.pending: deque[Task] = deque()  # sent, outcome not read yet; oldest first
        self.stopped_since: float | None = None  # when it was first seen stopped
        self.killed_stopped = False  # killed for staying stopped (check_stopped)

    def fileno(self) -> int:
        assert self.proc.stdout is not None
        return self.proc.stdout.fileno()

    def start(self, task: Task) -> None:
        assert self.proc.stdin is not None
        self.pending.append(task)
        try:
            send(self.proc.stdin, task)
        except OSError:
            pass  # it died; finish() reports the task as failed

    def finish(self) -> tuple[Outcome, list[Task]]:
        """The outcome of the oldest pending task (a failure when the worker died), and
        the tasks sent after it that a dead worker never started (to run elsewhere)."""
        assert self.proc.stdout is not None and self.pending
        task = self.pending.popleft()
        outcome = receive(self.proc.stdout)
        if outcome is None:
            code = self.proc.wait()
            orphans, self.pending = list(self.pending), deque()
            if self.killed_stopped:
                return RankFailed(task.index, task.display, (
                    f"the worker process reading it was stopped (SIGSTOP, a debugger?) "
                    f"for {STOPPED_LIMIT_S:g} s and was killed"), machine=True), orphans
            return RankFailed(task.index, task.display,
                              "the worker process died while reading it "
                              f"({death_reason(code, self._stderr_tail())})"), orphans
        return outcome, []

    def _stderr_tail(self) -> str:
        self.stderr.seek(0, os.SEEK_END)
        size = self.stderr.tell()
        self.stderr.seek(max(0, size - STDERR_TAIL_BYTES))
        return self.stderr.read().decode("utf-8", "replace")

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def check_stopped(self, now: float) -> None:
        """The heartbeat of a busy worker that sent nothing this poll: a worker stopped
        (SIGSTOP, a debugger; state T in /proc) for STOPPED_LIMIT_S is killed, so its task
        fails and the ingest stops with one line instead of waiting forever. A worker
        that runs, however long, is never timed out."""
        if _process_state(self.proc.pid) not in ("T", "t"):
            self.stopped_since = None
            return
        if self.stopped_since is None:
            self.stopped_since = now
        elif now - self.stopped_since >= STOPPED_LIMIT_S and not self.killed_stopped:
            self.killed_stopped = True
            self.proc.kill()

    def stop(self, kill: bool) -> None:
        if kill:
            self.proc.kill()
        elif self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None and not stream.closed:
                stream.close()
        self.stderr.close()


def _process_state(pid: int) -> str:
    """A process's state letter from /proc/PID/stat (R, S, D, T, t, Z...); '' where it
    cannot be read (not Linux, gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()  # one short line
    except OSError:
        return ""
    return text[text.rfind(")") + 2:][:1]


def death_reason(code: int, stderr: str) -> str:
    """Why a worker died, in a few words: the last line it wrote to stderr (a Python
    exception names itself there), else its exit code or signal."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    how = f"exit code {code}"
    if code < 0:
        how = f"killed by {signal.Signals(-code).name}" if -code in set(signal.Signals) \
            else f"killed by signal {-code}"
    if lines:
        return f"{how}: {lines[-1][:300]!r}"
    if code == -signal.SIGKILL:
        return f"{how}, with nothing on stderr: out of memory?"
    return how


class ProcessExecutor:
    name = "process"

    def __init__(self, jobs: int) -> None:
        self.jobs = max(1, jobs)
        self.cancelled = False
        self._workers: list[_Worker] = []

    def start(self, n_tasks: int) -> None:
        """Start the worker processes now: each imports DuckDB and the reader (~0.1 s)
        while the ingest opens and migrates its database, then waits for a task."""
        if not self._workers and n_tasks:
            self._workers = [_Worker() for _ in range(min(self.jobs, n_tasks))]

    def close(self) -> None:
        """Kill the workers that `run` did not stop (it never ran, or was abandoned)."""
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.stop(kill=True)

    def run(self, tasks: Sequence[Task]) -> Iterator[Outcome]:
        """Keep every worker busy (QUEUE_DEPTH tasks sent ahead to each), at most
        2 x jobs outcomes ahead of the consumer."""
        if not tasks:
            return
        self.start(len(tasks))
        workers, self._workers = self._workers, []
        jobs = len(workers)
        threads = max(1, default_jobs() // jobs)
        queue = deque(replace(t, threads=threads) for t in tasks)
        done: dict[int, Outcome] = {}
        finished = False
        try:
            for task in tasks:
                while task.index not in done:
                    if self.cancelled:
                        return
                    self._feed(workers, queue, room=len(done) < 2 * jobs)
                    self._collect(workers, queue, done)
                yield done.pop(task.index)
            finished = True
        finally:
            for worker in workers:
                worker.stop(kill=not finished)

    @staticmethod
    def _feed(workers: list[_Worker], queue: deque[Task], room: bool) -> None:
        """Send each worker tasks until QUEUE_DEPTH are pending on it: its next file is
        already in its pipe when it finishes one, so it never waits for the consumer
        (the writer appending a batch) to hand it one."""
        for i, worker in enumerate(workers):
            while queue and room and len(worker.pending) < QUEUE_DEPTH:
                if not worker.pending and not worker.alive:
                    worker.stop(kill=True)
                    workers[i] = worker = _Worker()
                worker.start(queue.popleft())

    @staticmethod
    def _collect(workers: list[_Worker], queue: deque[Task],
                 done: dict[int, Outcome]) -> None:
        busy = [w for w in workers if w.pending]
        ready = wait(busy, timeout=POLL_S)  # type: ignore[arg-type]
        now = time.monotonic()
        for idle in busy:
            if idle not in ready:
                idle.check_stopped(now)
        for worker in ready:
            assert isinstance(worker, _Worker) and worker.pending
            index = worker.pending[0].index
            done[index], orphans = worker.finish()
            queue.extendleft(reversed(orphans))  # never started: first in line again

    def cancel(self) -> None:
        self.cancelled = True


_KEPT_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                      if hasattr(signal, name))


def _keep_ours(handler: Any) -> None:
    """Stands in for Ray's `set_sigterm_handler` while Ray starts: the handler it
    offers is not installed."""
    del handler


def _restore_handlers(handlers: dict[int, Any]) -> None:
    """Put back the signal handlers a library replaced (main thread only, where
    handlers can be set; None: one set outside Python, left as it is)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig, handler in handlers.items():
        if handler is not None and signal.getsignal(sig) is not handler:
            signal.signal(sig, handler)


_RAY_CLUSTER_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # Ray's switch: "0" = one-node only


@contextlib.contextmanager
def _loopback_node(ray: Any) -> Iterator[None]:
    """While a local cluster starts, make Ray take the loopback address as its node's IP,
    so every server it starts listens on 127.0.0.1 only (issue 43). Ray 2.60 picks the
    node IP from the interface routed outward and refuses a loopback `_node_ip_address`
    (it resolves it back to that interface); with that IP its GCS, raylet, object
    manager and workers' gRPC servers listened on `::` (every interface), the autoscaler
    monitor's metrics port on 0.0.0.0 and the runtime-env agent on the outward address.
    Ray takes the loopback only where its one-node switch is off
    (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, as on macOS/Windows): it is read once at
    `import ray`, so the module's copy is set too, and the environment, which the
    processes Ray starts now inherit. Both are put back after the start."""
    constants: Any = getattr(getattr(ray, "_private", None), "ray_constants", None)
    had_constant = constants is not None and hasattr(constants, "ENABLE_RAY_CLUSTER")
    before_constant = getattr(constants, "ENABLE_RAY_CLUSTER", None)
    before_env = os.environ.get(_RAY_CLUSTER_ENV)
    os.environ[_RAY_CLUSTER_ENV] = "0"
    if had_constant:
        constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        if had_constant:
            constants.ENABLE_RAY_CLUSTER = before_constant
        if before_env is None:
            os.environ.pop(_RAY_CLUSTER_ENV, None)
        else:
            os.environ[_RAY_CLUSTER_ENV] = before_env


class RayExecutor:
    name = "ray"

    def __init__(self, address: str | None, jobs: int | None = None) -> None:
        self.address = address
        self.jobs = jobs
        self.cancelled = False
        self.started_local = False  # this executor started a local cluster (close ends it)
        self.quieted = False  # _drop set RAY_IGNORE_UNHANDLED_ERRORS (close takes it back)
        self.before: set[process_tree.Process] = set()  # our processes before Ray's start

    def run(self, tasks: Sequence[Task]) -> Iterator[Outcome]:
        ray = _import_ray()
        if not ray.is_initialized():
            self._init(ray)
        remote = ray.remote(num_cpus=1, max_retries=0)(run_task)
        window = self.jobs or 2 * max(1, int(ray.cluster_resources().get("CPU", 1)))
        pending: list[tuple[Task, Any]] = []
        queue = list(reversed(tasks))
        try:
            while queue or pending:
                while queue and len(pending) < window:
                    task = queue.pop()
                    pending.append((task, remote.remote(task)))
                task, ref = pending.pop(0)
                yield self._wait(ray, task, ref)
        finally:
            if pending:
                self._drop(ray, [ref for _, ref in pending])

    def _init(self, ray: Any) -> None:
        """Connect to the cluster at the address (checked reachable first), or start a
        local one, with Ray's log lines below ERROR left out; a failure is one line
        naming the address."""
        if self.address not in (None, "auto"):
            ray_reachable(self.address)
        # ray.init puts its own SIGTERM handler (sys.exit(15), no word: a SIGTERM during
        # the ~10-30 s of its start exited 15 in silence) in place of the CLI's, which
        # stops the ingest at a safe point with one line and exit 143: Ray's is not set,
        # and the handlers are put back after, whatever Ray did
        handlers = {sig: signal.getsignal(sig) for sig in _KEPT_SIGNALS}
        utils: Any = getattr(getattr(ray, "_private", None), "utils", None)
        ray_sets = getattr(utils, "set_sigterm_handler", None)
        if ray_sets is not None:
            utils.set_sigterm_handler = _keep_ours
        try:
            self.started_local = self.address is None  # set first: a Ctrl-C inside init
            self.before = set(process_tree.descendants(os.getpid()))
            with _loopback_node(ray) if self.address is None else contextlib.nullcontext():
                ray.init(address=self.address, ignore_reinit_error=True,
                         log_to_driver=False, include_dashboard=False,
                         configure_logging=True, logging_level=logging.ERROR)
        except Exception as exc:  # noqa: BLE001 - Ray's many failure types: one line
            first = (str(exc).strip() or type(exc).__name__).splitlines()[0][:200]
            where = self.address or "a local cluster"
            hint = (": pip install 'stepscope[ray]' (it installs ray[client])"
                    if "ray[client]" in first else "")
            raise UsageError(f"--executor: cannot start Ray at {where} "
                             f"({type(exc).__name__}: {first}){hint}") from None
        finally:
            if ray_sets is not None:
                utils.set_sigterm_handler = ray_sets
            _restore_handlers(handlers)

    def _wait(self, ray: Any, task: Task, ref: Any) -> Outcome:
        while True:
            if self.cancelled:
                self._drop(ray, [ref])
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

    def _drop(self, ray: Any, refs: list[Any]) -> None:
        """Cancel tasks whose results the ingest no longer wants. Ray logs an "Unhandled
        error ... worker died" line for each dropped result it cannot deliver, printed above
        the CLI's one line after a Ctrl-C (CI, issue 43): those lines are silenced until
        `close`, as nothing the ingest still waits for can go unreported."""
        if _QUIET_DROPPED not in os.environ:
            os.environ[_QUIET_DROPPED] = "1"
            self.quieted = True
        for ref in refs:
            ray.cancel(ref, force=True)

    def cancel(self) -> None:
        self.cancelled = True

    def start(self, n_tasks: int) -> None:
        pass  # Ray starts (or connects) in run: `ray.init` is the slow part

    def close(self) -> None:
        """End the local cluster this executor started, with every process below it:
        ray.shutdown() ends the raylet, not the agents it started, which outlived a
        Ctrl-C or SIGTERM by about a minute (issue 43). A cluster it joined is left."""
        try:
            self._close_local()
        finally:
            if self.quieted:
                os.environ.pop(_QUIET_DROPPED, None)
                self.quieted = False

    def _close_local(self) -> None:
        if not self.started_local:
            return
        self.started_local = False
        family = [p for p in process_tree.descendants(os.getpid())
                  if p not in self.before and process_tree.is_ray(p[0])]
        try:
            _import_ray().shutdown()
        except Exception:  # noqa: BLE001 - a half-started Ray: its processes end below
            pass
        process_tree.end(family)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError("--executor ray needs Ray: pip install 'stepscope[ray]'") from None
    return ray


def _is_port(text: str) -> bool:
    """A port number: ASCII digits from 1 to 65535 (ingest.number_text)."""
    try:
        whole(text, 1, 65535)
    except NumberTextError:
        return False
    return True


def _check_ray_address(spec: str, host_port: str) -> None:
    """A Ray address is HOST:PORT, the host printable ASCII without spaces and the port
    ASCII digits from 1 to 65535: `ray:` with nothing after it used to start a local
    cluster in silence, `ray://` failed deep inside Ray, `ray: h:1` was tried as host
    ' h' and a port in Arabic-Indic digits as the number they spell."""
    if host_port == "auto" and not spec.startswith("ray://"):
        return  # ray:auto: the cluster this machine already runs (Ray finds it)
    host, _, port = host_port.rpartition(":")
    if not host or not (host.isascii() and host.isprintable()) or " " in host \
            or not _is_port(port) or not _host_shape(host):
        raise UsageError(f"--executor {spec!r}: give the Ray cluster's address as "
                         "ray:HOST:PORT or ray://HOST:PORT (Ray Client), or plain 'ray' "
                         "for a local cluster")


def _host_shape(host: str) -> bool:
    """A host name or IPv4 address holds no ':' or brackets; an IPv6 address is written
    in one pair of brackets ('[::1]'). `ray:127.0.0.1:1:2` was tried as host
    '127.0.0.1:1' (a DNS lookup) and `ray:[::1:1` as ::1, port 1."""
    if host.startswith("["):
        return host.endswith("]") and _is_ip(host[1:-1])
    return all(_HOST_LABEL.fullmatch(label) for label in host.removesuffix(".").split("."))


def _is_ip(text: str) -> bool:
    """Whether the text in a pair of brackets is an IP address (IPv6, or IPv4 as round 7
    pinned): '[zz::1]' was looked up in DNS before it was refused."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


# A label of a host name (RFC 1123; '_' as some clusters' names have it): `ray:-h:1` was
# looked up in DNS as '-h' before it was refused.
_HOST_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")


def ray_reachable(address: str, timeout_s: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """Refuse, within `timeout_s`, a Ray address nothing listens on (Ray itself retries
    for minutes: over 400 s for ray:127.0.0.1:1); UsageError naming the address."""
    host_port = address.removeprefix("ray://")
    host, _, port = host_port.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise UsageError(f"--executor: cannot reach a Ray cluster at {host_port} "
                         f"({exc.strerror or type(exc).__name__}); is it running?") from None
    except UnicodeError:  # the host name's IDNA encoding: a label empty or over 63 chars
        raise UsageError(f"--executor: cannot reach a Ray cluster at {host_port[:80]!r}: "
                         "not a valid host name") from None


def parse_executor(spec: str) -> tuple[str, str | None]:
    """'auto' | 'inline' | 'process' | 'ray' | 'ray://HOST:PORT' | 'ray:HOST:PORT' ->
    (kind, Ray address or None); raises UsageError."""
    if spec == "ray" or spec.startswith(("ray:", "ray://")):
        rest = spec[len("ray"):]
        address = None
        if rest.startswith("://"):
            address = spec  # Ray Client address, given to ray.init as it is
            _check_ray_address(spec, rest[3:])
        elif rest.startswith(":"):
            address = rest[1:]
            _check_ray_address(spec, address)
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
