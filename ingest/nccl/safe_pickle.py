"""Load an untrusted pickle that may only hold plain data.

A Flight Recorder dump is a pickled dict of str/int/float/bool/None, lists, tuples and
dicts. A pickle can also name any importable callable (`os.system`) and call it while it
is being loaded, so a dump from a shared folder is untrusted input. Two independent
guards make loading safe:

1. Before anything is built, every opcode is scanned (`pickletools.genops` only decodes,
   it executes nothing). Opcodes that import (`GLOBAL`, `STACK_GLOBAL`, `INST`, the
   extension registry `EXT*`), call or construct objects (`REDUCE`, `BUILD`, `OBJ`,
   `NEWOBJ*`), refer to outside objects (`PERSID`, `BINPERSID`) or to out-of-band buffers
   are refused.
2. The unpickler that then builds the value refuses every global and persistent id, so
   even an opcode missed by the scan could not reach a callable.
"""

from __future__ import annotations

import io
import pickle
import pickletools
from typing import Any

# Opcodes that import, call, construct or reach outside the byte stream.
_FORBIDDEN = frozenset({
    "GLOBAL", "STACK_GLOBAL", "INST", "OBJ", "REDUCE", "BUILD", "NEWOBJ", "NEWOBJ_EX",
    "EXT1", "EXT2", "EXT4", "PERSID", "BINPERSID", "NEXT_BUFFER", "READONLY_BUFFER",
})
_STRING_OPS = frozenset({"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"})


class UnsafePickleError(ValueError):
    """The pickle holds something other than plain data; nothing was executed."""


class _PlainUnpickler(pickle.Unpickler):
    """Builds only builtins: every global and persistent reference is refused."""

    def find_class(self, module: str, name: str) -> Any:
        """Refuse every global: a class, a function, a module."""
        raise UnsafePickleError(f"it imports {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        """Refuse every persistent reference to an object outside the stream."""
        raise UnsafePickleError("it refers to an outside object (persistent id)")


def _describe(opcode: str, arg: Any, recent: list[str]) -> str:
    if opcode == "GLOBAL" and isinstance(arg, str):
        return "it imports " + ".".join(arg.split(" ", 1))
    if opcode == "STACK_GLOBAL" and len(recent) >= 2:
        return f"it imports {recent[-2]}.{recent[-1]}"
    if opcode == "INST" and isinstance(arg, str):
        return "it imports " + ".".join(arg.split(" ", 1))
    return f"it uses the {opcode} opcode (objects beyond plain data)"


def check_plain(data: bytes) -> None:
    """Raise UnsafePickleError if the pickle would import or call anything."""
    recent: list[str] = []
    try:
        for op, arg, _pos in pickletools.genops(data):
            if op.name in _FORBIDDEN:
                raise UnsafePickleError(_describe(op.name, arg, recent))
            if op.name in _STRING_OPS and isinstance(arg, str):
                recent = [*recent[-1:], arg]
    except UnsafePickleError:
        raise
    except Exception as exc:  # noqa: BLE001 - any decoding failure: a truncated/corrupt file
        raise ValueError(f"corrupt pickle ({str(exc).splitlines()[0] if str(exc) else exc!r})"
                         ) from None


def load_plain(data: bytes) -> Any:
    """The value of a pickle made only of builtins; refuses anything else.

    Raises UnsafePickleError (refused, nothing executed) or ValueError (corrupt)."""
    check_plain(data)
    try:
        return _PlainUnpickler(io.BytesIO(data)).load()
    except UnsafePickleError:
        raise
    except Exception as exc:  # noqa: BLE001 - corrupt stream: one line for the user
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"corrupt pickle ({detail})") from None
