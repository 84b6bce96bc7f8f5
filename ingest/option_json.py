"""What a JSON option file (`--comm-kernels`, a `--model` spec) may not hold even where
the decoder takes it: a UTF-8 byte-order mark (msgspec called it "invalid character
(byte 0)") and a key written twice in one object (the decoder keeps the last value in
silence, so a pattern or a spec's field the user wrote is dropped without a word)."""

from __future__ import annotations

import json
from typing import Any

from stepscope.ingest.errors import UsageError

UTF8_BOM = b"\xef\xbb\xbf"


class _Twice(Exception):
    """A key met twice in one object (carries the key)."""


def _no_twice(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise _Twice(key)
        seen.add(key)
    return dict(pairs)


def twice_line(key: str, where: str = "one object") -> str:
    """The refusal of a key written twice (JSON objects, YAML mappings alike)."""
    return f"the key {key[:40]!r} appears twice in {where}; keep one"


def loads_once(raw: bytes | str) -> Any:
    """json.loads that refuses a key written twice in one object (UsageError naming the
    key): a spec's `n_params` written twice would otherwise keep the last in silence."""
    try:
        return json.loads(raw, object_pairs_hook=_no_twice)
    except _Twice as twice:
        raise UsageError(f"not valid JSON ({twice_line(str(twice.args[0]))})") from None


def check_json_option(raw: bytes, shown: str) -> None:
    """UsageError naming `shown` (the file and its option) for a BOM or a key twice;
    other faults are left to the decoder, whose own line names them."""
    if raw.startswith(UTF8_BOM):
        raise UsageError(f"{shown}: not valid JSON (it starts with a UTF-8 byte-order mark; "
                         "save the file without one)")
    try:
        loads_once(raw)
    except UsageError as exc:
        raise UsageError(f"{shown}: {exc}") from None
    except (ValueError, RecursionError):
        return  # not JSON at all: the decoder's line says where
