"""Communication kernels that are not NCCL's, by kernel name (ingest/data/comm_kernels.json).

MoE and inference jobs move data with their own kernels: DeepEP's dispatch/combine,
PyTorch symmetric memory, vLLM/SGLang custom all-reduce, Transformer Engine userbuffers,
MSCCL++, NVSHMEM, RCCL's generic kernel. Their names say what they are, so a versioned
table of RE2 patterns maps a kernel name to a collective, a library, the library's op and
(when the library says so) a role. A user extends it with `--comm-kernels FILE` (the same
format; its patterns come first). The reader (ingest/sql/rank_tables.sql) classifies
each distinct kernel name with the first pattern that matches: such kernels are
communication (`gpu_ops.kind = 'comm'`) and become `collectives` rows (docs/attribution.md,
"Communication kernels that are not NCCL").
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path

import duckdb
import msgspec

from stepscope.ingest.db import connect
from stepscope.ingest.errors import UsageError, quote_name
from stepscope.ingest.option_files import read_option_file
from stepscope.ingest.option_json import check_json_option
from stepscope.ingest.sql_files import sql

# What a pattern may say a kernel does (canonical collective names, ingest/sql/macros.sql).
COLLECTIVES = frozenset({
    "all_to_all", "all_reduce", "all_gather", "reduce_scatter", "send", "recv", "send_recv",
    "broadcast", "reduce", "gather", "scatter", "barrier", "unknown",
})
# Roles a pattern may give (docs/advisor.md, "Collective roles"); null lets the report guess.
ROLES = frozenset({
    "tensor_parallel", "pipeline", "context_parallel", "expert_exchange",
    "embedding_or_expert_exchange", "dp_gradients", "fsdp_shards", "dp_param_gather",
    "parameter_broadcast",
})
BUILTIN = "data/comm_kernels.json"
# A user's table holds a few dozen patterns; each is checked and the reader tries their
# alternation on every distinct kernel name, so the count is bounded (10,000 check in ~1 s).
MAX_USER_PATTERNS = 10_000


class CommPattern(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One entry of the table: a kernel-name pattern and what such a kernel is."""
    pattern: str                 # RE2, searched in the demangled kernel name
    library: str                 # deepep, torch_symm_mem, vllm_custom_ar, ...
    collective: str              # one of COLLECTIVES
    op: str                      # the library's own operation (dispatch, combine, ...)
    role: str | None = None      # one of ROLES, or None: guessed like NCCL's
    source: str = ""             # where the name comes from (provenance)


class CommKernelTable(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The file format, the bundled table's and a user's (version optional there)."""
    version: str = ""
    description: str = ""
    patterns: tuple[CommPattern, ...]


@cache
def builtin_table() -> CommKernelTable:
    """The bundled table (ingest/data/comm_kernels.json)."""
    text = resources.files("stepscope.ingest").joinpath(BUILTIN).read_text()
    return msgspec.json.decode(text, type=CommKernelTable)


def table_version() -> str:
    return builtin_table().version


def load_user_table(path: str | Path) -> CommKernelTable:
    """A user's --comm-kernels file, checked; UsageError with one line naming the file
    and the problem."""
    where = quote_name(path)  # a name with an escape code is quoted, as everywhere
    raw = read_option_file(Path(path), "--comm-kernels")
    check_json_option(raw, f"{where}: --comm-kernels")
    try:
        table = msgspec.json.decode(raw, type=CommKernelTable)
    except msgspec.ValidationError as exc:
        raise UsageError(f"{where}: --comm-kernels: {exc}") from None
    except msgspec.DecodeError as exc:
        raise UsageError(f"{where}: --comm-kernels: not valid JSON ({exc})") from None
    if not table.patterns:
        raise UsageError(f"{where}: --comm-kernels: `patterns` is empty")
    if len(table.patterns) > MAX_USER_PATTERNS:
        raise UsageError(f"{where}: --comm-kernels: {len(table.patterns)} patterns, more "
                         f"than {MAX_USER_PATTERNS:,}; merge them into fewer expressions")
    con = connect()
    try:
        compiled = _all_compile(con, table.patterns)
        for i, entry in enumerate(table.patterns):
            problem = pattern_problem(entry, con, compiled=compiled)
            if problem:
                raise UsageError(f"{where}: --comm-kernels: patterns[{i}]: {problem}")
        problem = _alternation_problem(con, table.patterns)
    finally:
        con.close()
    if problem:
        raise UsageError(f"{where}: --comm-kernels: {problem}")
    return table


def _all_compile(con: duckdb.DuckDBPyConnection, patterns: tuple[CommPattern, ...]) -> bool:
    """Whether every pattern compiles, in one query (10,000 patterns: 0.05 s, where one
    query each took 7 s)."""
    try:
        con.execute(sql("read/comm_patterns_check.sql"),
                    {"patterns": [p.pattern for p in patterns]}).fetchall()
    except duckdb.Error:
        return False
    return True


def _alternation_problem(con: duckdb.DuckDBPyConnection,
                         patterns: tuple[CommPattern, ...]) -> str | None:
    """Whether the reader's one expression of every pattern (any_pattern, with the bundled
    table's) compiles within RE2's memory; the problem in words if not."""
    try:
        con.execute(sql("read/comm_pattern_check.sql"),
                    {"pattern": any_pattern(patterns + builtin_table().patterns)}).fetchall()
    except duckdb.Error as exc:
        detail = str(exc).splitlines()[0].removeprefix("Invalid Input Error: ")
        return (f"the {len(patterns)} patterns together are too large for one RE2 "
                f"expression ({detail[:160]}); use fewer or simpler patterns")
    return None


def pattern_problem(entry: CommPattern, con: duckdb.DuckDBPyConnection | None = None,
                    compiled: bool = False) -> str | None:
    """What is wrong with one entry (None: nothing). The pattern is compiled by DuckDB's
    RE2, the engine that will run it, on `con` (one connection for a whole table: opening
    one per pattern took 17 s for 1,000 patterns), unless `compiled` says it already
    was."""
    if not entry.pattern:
        return "pattern is empty"
    if entry.collective not in COLLECTIVES:
        return (f"collective {entry.collective!r:.40} is not one of "
                f"{', '.join(sorted(COLLECTIVES))}")
    if entry.role is not None and entry.role not in ROLES:
        return f"role {entry.role!r:.40} is not one of {', '.join(sorted(ROLES))} (or null)"
    if not entry.library.strip() or not entry.op.strip():
        return "library and op must be non-empty text"
    if compiled:
        return None
    own = con is None
    con = connect() if con is None else con
    try:
        con.execute(sql("read/comm_pattern_check.sql"), {"pattern": entry.pattern}).fetchall()
    except duckdb.Error as exc:
        detail = str(exc).splitlines()[0].removeprefix("Invalid Input Error: ")
        return f"pattern {entry.pattern[:60]!r} is not a valid RE2 expression ({detail})"
    finally:
        if own:
            con.close()
    return None


def comm_patterns(user_file: str | Path | None = None) -> tuple[CommPattern, ...]:
    """The patterns the reader applies, in priority order: the user's, then the table's."""
    user = load_user_table(user_file).patterns if user_file else ()
    return user + builtin_table().patterns


def any_pattern(patterns: tuple[CommPattern, ...]) -> str:
    """One RE2 expression matching a name when any of `patterns` does: the reader's cheap
    first filter (compiled once per file, where patterns read from a table column compile
    once per name they are tried on)."""
    return "|".join(f"(?:{p.pattern})" for p in patterns)


def pattern_rows(patterns: tuple[CommPattern, ...]) -> list[dict[str, object]]:
    """The patterns as rows for ingest/sql/comm_patterns.sql (priority = position)."""
    return [{"priority": i, "pattern": p.pattern, "library": p.library,
             "collective": p.collective, "op": p.op, "role": p.role}
            for i, p in enumerate(patterns)]
