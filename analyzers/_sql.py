"""The analyzers' SQL files (analyzers/sql/<domain>/<name>.sql), read and run through the
ingest layer's one loader (`stepscope.ingest.sql_files.SqlFiles`)."""

from __future__ import annotations

from pathlib import Path

import duckdb

from stepscope.ingest.sql_files import Params, SqlFiles, as_frame

SQL = SqlFiles(Path(__file__).parent / "sql")

sql = SQL.text
run_script = SQL.run_script
fetch_rows = SQL.fetch_rows


def install_macros(con: duckdb.DuckDBPyConnection) -> None:
    """Create the analyzers' temporary macros in this connection: flops_claims and
    model_flops (analyzers/sql/mfu/flops.sql), cpu_self_time
    (analyzers/sql/attribution/macros.sql), sync_calls and blocking_copies
    (analyzers/sql/waits/macros.sql) and the collectives' group_label, group_hosts,
    crosses_nodes and bus_factor (analyzers/sql/collectives/macros.sql); allowed on
    read-only connections, cheap to repeat."""
    run_script(con, "mfu/flops.sql", {})
    run_script(con, "attribution/macros.sql", {})
    run_script(con, "waits/macros.sql", {})
    run_script(con, "collectives/macros.sql", {})


__all__ = ["SQL", "Params", "as_frame", "fetch_rows", "install_macros", "run_script", "sql"]
