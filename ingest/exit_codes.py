"""Exit codes of the `stepscope` command line, defined once (stable, for scripts; the
README's "Exit codes" describes them).

They live in the lowest layer because library results (`IngestResult.exit_code`, the
nightly verdict) already speak in them; the CLI imports them before anything heavy loads
(this module imports nothing, and the ingest package loads its other modules lazily).
"""

from __future__ import annotations

EXIT_OK = 0               # success
EXIT_NOTHING = 1          # nothing done: no trace ingested, --strict failure, `plan`: no
                          # layout fits, unexpected error
EXIT_USAGE = 2            # bad arguments, missing paths, unknown run, locked database
EXIT_PARTIAL = 3          # partial ingest: some files failed, the others are in the database
EXIT_CHECK_FAILED = 4     # `nightly`: a --fail-if check failed
EXIT_INTERRUPTED = 130    # Ctrl-C (128 + SIGINT), the database unchanged
EXIT_SIGHUP = 129         # stopped by SIGHUP (128 + 1): cleaned up as on Ctrl-C
EXIT_SIGTERM = 143        # stopped by SIGTERM (128 + 15): cleaned up as on Ctrl-C

__all__ = ["EXIT_CHECK_FAILED", "EXIT_INTERRUPTED", "EXIT_NOTHING", "EXIT_OK",
           "EXIT_PARTIAL", "EXIT_SIGHUP", "EXIT_SIGTERM", "EXIT_USAGE"]
