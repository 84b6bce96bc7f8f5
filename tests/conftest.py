"""Shared fixtures: sample trace locations and tiny traces built in code."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import shutil
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import sample_db as sample_db_module

import stepscope
import stepscope.analyzers.builders
import stepscope.analyzers.report
import stepscope.commands.hang_cmd
import stepscope.commands.plan_cmd
import stepscope.nightly
import stepscope.targets
from stepscope.analyzers.results import SCHEMA_FILES, Model, Report, to_builtins
from stepscope.cli import main

# A suite started with SIGINT ignored (`nohup`, `cmd &` in a script) would pass that on to
# every CLI it starts; the interrupt and dashboard tests need Ctrl-C's normal behaviour,
# here and in the child processes (a Python handler is reset to the default on exec,
# an ignored signal stays ignored).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Under pytest-xdist each worker has a core to itself: an ingest there (and in the CLIs
# it starts) parses inline with one DuckDB thread rather than starting a worker process
# per core on top of the suite's own (docs/scale.md). Tests of the process and Ray
# executors ask for them explicitly.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("STEPSCOPE_JOBS", "1")

REPO, SAMPLES, SIM = sample_db_module.REPO, sample_db_module.SAMPLES, sample_db_module.SIM
DOCS = REPO / "docs"
REAL_TRACES = sample_db_module.REAL_TRACES
real_trace_files = sample_db_module.real_files
real_run = sample_db_module.real_run


@pytest.fixture
def real_traces() -> Path:
    if not REAL_TRACES.is_dir():
        pytest.fail("tests/data/traces is missing from this checkout")
    return REAL_TRACES


def kineto_trace(rank: int | None = 0, world_size: int = 2, steps: int = 2,
                 base_ns: int | None = 1_700_000_000_000_000_000,
                 extra_events: list[dict[str, Any]] | None = None,
                 with_distributed: bool = True) -> dict[str, Any]:
    """A small but complete GPU Kineto trace: steps with a GEMM, a memcpy and an NCCL
    all-reduce launched through record_param_comms, in relative-ts form."""
    pid, tid, bwd = 100, 100, 101
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
         "args": {"name": "thread 100 (python)"}},
    ]
    ext, corr = 1, 1
    t = 1000.0
    for step in range(steps):
        s0 = t
        ops = [
            # (name, cat, ts, dur, tid, args)
            (f"ProfilerStep#{step + 1}", "user_annotation", s0, 900.0, tid, {}),
            ("aten::mm", "cpu_op", s0 + 10, 50.0, tid,
             {"Input Dims": [[64, 128], [128, 256]], "Input type": ["float", "float"]}),
            ("cudaLaunchKernel", "cuda_runtime", s0 + 20, 5.0, tid, {"cbid": 211}),
            ("aten::copy_", "cpu_op", s0 + 100, 30.0, tid, {}),
            ("cudaMemcpyAsync", "cuda_runtime", s0 + 105, 5.0, tid, {}),
            ("c10d::allreduce_", "cpu_op", s0 + 200, 100.0, bwd, {}),
            ("record_param_comms", "cpu_op", s0 + 210, 80.0, bwd, {
                "Collective name": "allreduce", "dtype": "BFloat16", "In msg nelems": 1024,
                "Out msg nelems": 1024, "Group size": world_size,
                "Process Group Name": "0", "Process Group Description": "default_pg",
                "Process Group Ranks": str(list(range(world_size)))}),
            ("nccl:all_reduce", "user_annotation", s0 + 220, 60.0, bwd, {}),
            ("cudaLaunchKernel", "cuda_runtime", s0 + 230, 5.0, bwd, {"cbid": 211}),
        ]
        mm_ext = ext + 1
        rpc_ext = ext + 4
        for name, cat, ts, dur, th, args in ops:
            a = dict(args)
            if cat in ("cpu_op", "user_annotation"):
                a["External id"] = ext
                ext += 1
            events.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": th,
                           "ts": ts, "dur": dur, "args": a})
        # runtime calls link to kernels by correlation; kernels carry the op's External id
        launches = [e for e in events
                    if e.get("cat") == "cuda_runtime" and "correlation" not in e["args"]]
        gemm_launch, copy_launch, nccl_launch = launches
        for launch in launches:
            launch["args"]["correlation"] = corr
            corr += 1
        gemm_launch["args"]["External id"] = mm_ext
        events += [
            {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16", "pid": 0, "tid": 7,
             "ts": s0 + 30, "dur": 200.0,
             "args": {"device": 0, "stream": 7, "correlation": gemm_launch["args"]["correlation"],
                      "External id": mm_ext}},
            {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0,
             "tid": 7, "ts": s0 + 240, "dur": 20.0,
             "args": {"device": 0, "stream": 7, "correlation": copy_launch["args"]["correlation"],
                      "bytes": 4096}},
            {"ph": "X", "cat": "kernel",
             "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
             "pid": 0, "tid": 20, "ts": s0 + 300, "dur": 400.0,
             "args": {"device": 0, "stream": 20,
                      "correlation": nccl_launch["args"]["correlation"],
                      "External id": rpc_ext, "Collective name": "allreduce"}},
        ]
        t += 1000.0
    events += extra_events or []
    trace: dict[str, Any] = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}],
        "traceEvents": events,
        "traceName": "synthetic",
    }
    if with_distributed:
        info: dict[str, Any] = {"backend": "nccl", "world_size": world_size,
                                "pg_count": 1, "nccl_version": "2.21.5",
                                "pg_config": [{"pg_name": "0", "pg_desc": "default_pg",
                                               "backend_config": "cuda:nccl",
                                               "pg_size": world_size,
                                               "ranks": list(range(world_size))}]}
        if rank is not None:
            info["rank"] = rank
        trace["distributedInfo"] = info
    if base_ns is not None:
        trace["baseTimeNanoseconds"] = base_ns
    return trace


def q(db: Path, sql: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
    """The rows of `sql` on the database file `db`, opened read-only and closed again
    (tests read what a command stored without holding the file)."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, params or {}).fetchall()
    finally:
        con.close()


def cli_in_process(argv: tuple[str | Path, ...], env: dict[str, str] | None = None
                   ) -> tuple[int, list[str]]:
    """Run the CLI in this process with `env` set for the call: (exit code, stderr lines);
    stdout is dropped. The audits pin one line and one exit code per case."""
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            rc = main([str(a) for a in argv])
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return rc, err.getvalue().splitlines()


def write_trace(path: Path, trace: dict[str, Any] | str | bytes) -> Path:
    """Write a trace dict (or raw text/bytes) as .json or .json.gz depending on the name."""
    if isinstance(trace, dict):
        data = json.dumps(trace).encode()
    elif isinstance(trace, str):
        data = trace.encode()
    else:
        data = trace
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".gz"):
        with gzip.GzipFile(path, "wb", mtime=0) as fh:
            fh.write(data)
    else:
        path.write_bytes(data)
    return path


@pytest.fixture
def make_run(tmp_path: Path) -> Callable[..., Path]:
    """Write one synthetic trace per rank into a fresh directory; returns the directory."""
    counter = {"n": 0}

    def _make(world_size: int = 2, **kwargs: Any) -> Path:
        counter["n"] += 1
        d = tmp_path / f"run{counter['n']}"
        for r in range(world_size):
            trace = kineto_trace(rank=r, world_size=world_size, **kwargs)
            write_trace(d / f"rank{r}.json.gz", trace)
        return d

    return _make


# ------------------------------------------------------------------ schema validation
def _validators() -> dict[type[Model], jsonschema.protocols.Validator]:
    out = {}
    for name, kind in SCHEMA_FILES.items():
        schema = json.loads((DOCS / name).read_text())
        out[kind] = jsonschema.Draft202012Validator(schema)
    return out


VALIDATORS = _validators()
VALIDATED: dict[str, int] = {}


def validate_json(data: dict[str, Any], kind: type[Model]) -> dict[str, Any]:
    """Check JSON data against the published schema of `kind` (docs/*.schema.json)."""
    VALIDATORS[kind].validate(data)
    VALIDATED[kind.__name__] = VALIDATED.get(kind.__name__, 0) + 1
    return data


def validated(model: Model) -> Model:
    validate_json(to_builtins(model), type(model))
    return model


def _checking(builder: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return validated(builder(*args, **kwargs))
    return wrapper


# every place a report, diff, plan, nightly or hang model is built, by (module, function)
BUILDERS = (
    (stepscope.analyzers.report, "report_from_context"), (stepscope.targets, "report_from_context"),
    (stepscope.nightly, "report_from_context"),
    (stepscope.analyzers.builders, "report_from_context"),
    (stepscope.analyzers.builders, "build_diff"), (stepscope.nightly, "build_nightly"),
    (stepscope.commands.plan_cmd, "plan_result"), (stepscope.targets, "plan_from"),
    (stepscope.commands.hang_cmd, "build_hang_report"),
)


@pytest.fixture(autouse=True, scope="session")
def every_model_is_validated() -> Iterator[None]:
    """Every report, diff, plan, night and hang analysis the suite builds (library or CLI) is
    checked against the published JSON Schema the moment it is built."""
    with pytest.MonkeyPatch.context() as mp:
        for module, name in BUILDERS:
            mp.setattr(module, name, _checking(getattr(module, name)))
        yield


# a test that uses one of these fixtures gets the marker (pyproject.toml lists them): the
# sample database takes about a CPU minute to build when its cache is cold
MARK_BY_FIXTURE = {"sample_db": "slow", "real_db": "slow", "real_report": "slow",
                   "local_ray": "ray"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for fixture, mark in MARK_BY_FIXTURE.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(mark)
    longest_files_first(config, items)


# ------------------------------------------------------------------ file order
# `--dist loadfile` runs each file on one worker, the files in the order they come, a
# worker taking the next when it has two tests left. pytest-xdist's default order is by
# number of tests, which starts a long file of few tests (the browser's) last while the
# other worker runs out of files. The files go longest first instead (the classic rule
# for balancing), by their seconds in the last session that ran them, as this file
# records them in the pytest cache; a file never timed goes first.
FILE_SECONDS = "stepscope/file_seconds"
TIMED: dict[str, float] = {}


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist's reordering, off
        config.option.loadscopereorder = False


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def longest_files_first(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Sort the items by their file's recorded seconds, longest first (stable: a file's
    tests keep their order, files of equal time their collection order)."""
    cache = getattr(config, "cache", None)
    seconds: dict[str, float] = cache.get(FILE_SECONDS, {}) if cache is not None else {}
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        first.setdefault(_file_of(item.nodeid), i)
    items.sort(key=lambda it: (-seconds.get(_file_of(it.nodeid), float("inf")),
                               first[_file_of(it.nodeid)]))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    file = _file_of(report.nodeid)
    TIMED[file] = TIMED.get(file, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The controlling process (not a pytest-xdist worker) records each file's seconds:
    setup, call and teardown of its tests that ran, over the last record."""
    cache = getattr(session.config, "cache", None)
    if cache is None or os.environ.get("PYTEST_XDIST_WORKER") or not TIMED:
        return
    cache.set(FILE_SECONDS, {**cache.get(FILE_SECONDS, {}), **TIMED})


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-snapshots", action="store_true",
                     help="rewrite the golden snapshots and published JSON Schemas")


# Ray's local node: ray/_private/node.py waits a hard-coded 30 s for the raylet to register
# with the GCS (RAY_raylet_start_wait_time_s is not read there). On a loaded 2-core machine
# the raylet is slowest while it forks its prestarted Python workers, so the tests' node
# starts none (enable_worker_prestart / prestart_worker_first_driver, both read by the
# raylet) and a start that still times out is retried once, afresh.
RAY_SYSTEM_CONFIG = {"enable_worker_prestart": False, "prestart_worker_first_driver": False}
RAY_START_TRIES = 2


def start_local_ray(num_cpus: int = 2) -> Any:
    """`ray`, initialised as a local node with `num_cpus` CPUs and no dashboard."""
    import ray  # a dev dependency (the `ray` extra); imported here: it takes seconds

    for attempt in range(RAY_START_TRIES):
        try:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
                     configure_logging=False, ignore_reinit_error=True,
                     _system_config=RAY_SYSTEM_CONFIG)
            return ray
        except Exception as exc:
            ray.shutdown()
            if "timed out during startup" not in str(exc) or attempt + 1 == RAY_START_TRIES:
                raise
    raise AssertionError("unreachable")


@pytest.fixture
def update_snapshots(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-snapshots"))


@pytest.fixture(scope="session")
def sample_db() -> Path:
    """Every bundled run ingested once (tests/sample_db.py): each simulated set under its
    own name, each real CPU sample as `cpu-<name>`. Built by the first pytest-xdist worker
    that needs it, under a file lock the others wait on, and cached for later sessions of
    an unchanged tree. Tests only read it (read-only connections from several processes
    are fine); a test that writes works on a copy (`sample_db_copy`)."""
    return sample_db_module.cached_db()


@pytest.fixture(scope="session")
def real_db() -> Path:
    """Every real Kineto trace of tests/data/traces ingested once, each as its own run
    (`real_run(path)`: t0, t1, ... in `real_trace_files()` order), built and cached
    like `sample_db` (tests/sample_db.py). Skips without tests/data/traces."""
    if not real_trace_files():
        pytest.fail("tests/data/traces is missing from this checkout")
    return sample_db_module.cached_db("real")


@pytest.fixture(scope="session")
def real_report(real_db: Path) -> Callable[[Path], Report]:
    """`build_report` of one real trace's run in `real_db`, built once per test process
    (a report is frozen and the database read-only, so tests can share it)."""
    built: dict[Path, Report] = {}

    def report(path: Path) -> Report:
        if path not in built:
            with stepscope.open(real_db) as store:
                built[path] = stepscope.analyzers.report.build_report(store.con, real_run(path))
        return built[path]

    return report


@pytest.fixture
def sample_db_copy(sample_db: Path, tmp_path: Path) -> Path:
    """A private copy of the sample database that a test may write to."""
    db = tmp_path / "samples.duckdb"
    shutil.copyfile(sample_db, db)
    return db


def cli(*argv: str | Path) -> tuple[int, str, str]:
    """`stepscope ARGV` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()
