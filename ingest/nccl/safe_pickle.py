"""Load an untrusted pickle that may only hold plain data, in bounded time and memory.

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

Plain data can still be hostile. The scan also estimates what building the value costs
(each opcode that makes an object, and the bytes of its strings) and refuses a pickle
past `MAX_BUILD_BYTES` before building it, or past `MAX_OPCODES` opcodes (the scan's
own time). And since the memo lets one object be
referenced any number of times, a few KB can describe a list nested 40 levels deep whose
every level holds the one below twice: 2^40 values for any walk (`json.dumps`, a loop
over entries). `check_bounded` measures what a walk would visit, counting every shared
reference again, in time proportional to the *distinct* objects, and refuses values past
`MAX_WALK_VALUES` values, `MAX_WALK_CHARS` characters or `MAX_DEPTH` levels, and values
that contain themselves.
"""

from __future__ import annotations

import io
import pickle
import pickletools
from typing import IO, Any

# Opcodes that import, call, construct or reach outside the byte stream.
_FORBIDDEN = frozenset({
    "GLOBAL", "STACK_GLOBAL", "INST", "OBJ", "REDUCE", "BUILD", "NEWOBJ", "NEWOBJ_EX",
    "EXT1", "EXT2", "EXT4", "PERSID", "BINPERSID", "NEXT_BUFFER", "READONLY_BUFFER",
})
_STRING_OPS = frozenset({"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"})
# Opcodes that only move references or mark positions: they build nothing.
_NO_OBJECT = frozenset({
    "PROTO", "FRAME", "STOP", "MARK", "POP", "POP_MARK", "DUP", "PUT", "BINPUT",
    "LONG_BINPUT", "MEMOIZE", "GET", "BINGET", "LONG_BINGET", "APPEND", "APPENDS",
    "SETITEM", "SETITEMS", "ADDITEMS", "NONE", "NEWTRUE", "NEWFALSE",
})
OBJECT_BYTES = 64                 # what one built object costs, roughly (CPython, 64-bit)
# A real dump of 20,000 entries with 20 stack frames each (a large TORCH_FR_BUFFER_SIZE)
# is 19 MB of pickle and ~6M opcodes: 130 MB by this estimate, ~250 MB of RSS once built.
MAX_BUILD_BYTES = 256 << 20
MAX_OPCODES = 12 << 20           # the scan's own time: ~0.5 us an opcode
MAX_WALK_VALUES = 1 << 25
MAX_WALK_CHARS = 1 << 30
MAX_DEPTH = 64
# Hashes of ints, floats and tuples are not randomized: ints that differ by a multiple of
# 2**61 - 1, or tuples built for it, all hash alike, and a dict of n such keys takes n**2
# steps to build (60,000 keys: 29 s). Strings (randomized) and smaller ints cannot
# collide like that; a pickle with more than MAX_ODD_KEYS values of the other hashable
# kinds is built by _SafeDictUnpickler, which refuses more than that many as dict keys
# or set members, so no dict or set is ever built from many colliding keys.
HASH_MODULUS = (1 << 61) - 1
MAX_ODD_KEYS = 4096
_HASHED_BUILDERS = frozenset({"TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "FROZENSET",
                              "BINFLOAT", "FLOAT", "BINBYTES", "SHORT_BINBYTES",
                              "BINBYTES8"})
_INT_OPS = frozenset({"LONG", "LONG1", "LONG4", "INT"})


class UnsafePickleError(ValueError):
    """The pickle holds something other than plain data; nothing was executed."""


class TooLargeError(ValueError):
    """Plain data, but more than the bounds above (nothing large was built)."""


class _PlainUnpickler(pickle.Unpickler):
    """Builds only builtins: every global and persistent reference is refused."""

    def find_class(self, module: str, name: str) -> Any:
        """Refuse every global: a class, a function, a module."""
        raise UnsafePickleError(f"it imports {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        """Refuse every persistent reference to an object outside the stream."""
        raise UnsafePickleError("it refers to an outside object (persistent id)")


def _plain_key(key: Any) -> bool:
    """A key whose hash cannot be made to collide at will: a string, or an int (not a
    bool) smaller in size than the hash modulus."""
    kind = type(key)
    return kind is str or (kind is int and -HASH_MODULUS < key < HASH_MODULUS)


_PyUnpickler: Any = pickle._Unpickler  # type: ignore[attr-defined]  # the pure-Python one


class _SafeDictUnpickler(_PyUnpickler):  # type: ignore[misc]
    """The pure-Python unpickler, refusing globals like _PlainUnpickler, that counts the
    dict keys and set members that are not plain keys (`_plain_key`) as it inserts them
    and stops past MAX_ODD_KEYS: a dict of keys built to collide is never built."""

    dispatch: dict[int, Any] = dict(_PyUnpickler.dispatch)

    def __init__(self, file: IO[bytes]) -> None:
        super().__init__(file)
        self.odd_keys = 0

    def find_class(self, module: str, name: str) -> Any:
        """Refuse every global: a class, a function, a module."""
        raise UnsafePickleError(f"it imports {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        """Refuse every persistent reference to an object outside the stream."""
        raise UnsafePickleError("it refers to an outside object (persistent id)")

    def _check_keys(self, keys: Any) -> None:
        self.odd_keys += sum(1 for k in keys if not _plain_key(k))
        if self.odd_keys > MAX_ODD_KEYS:
            raise TooLargeError(
                f"it has more than {MAX_ODD_KEYS} dict keys that are neither strings nor "
                "small integers (keys built to hash alike?); a Flight Recorder dump has "
                "none")

    def _setitem(self) -> None:
        value = self.stack.pop()
        key = self.stack.pop()
        self._check_keys((key,))
        self.stack[-1][key] = value

    def _setitems(self) -> None:
        items = self.pop_mark()
        self._check_keys(items[0::2])
        target = self.stack[-1]
        for i in range(0, len(items), 2):
            target[items[i]] = items[i + 1]

    def _dict(self) -> None:
        items = self.pop_mark()
        self._check_keys(items[0::2])
        self.append({items[i]: items[i + 1] for i in range(0, len(items), 2)})

    def _frozenset(self) -> None:
        items = self.pop_mark()
        self._check_keys(items)
        self.append(frozenset(items))

    def _additems(self) -> None:
        items = self.pop_mark()
        self._check_keys(items)
        self.stack[-1].update(items)

    dispatch[pickle.SETITEM[0]] = _setitem
    dispatch[pickle.SETITEMS[0]] = _setitems
    dispatch[pickle.DICT[0]] = _dict
    dispatch[pickle.FROZENSET[0]] = _frozenset
    dispatch[pickle.ADDITEMS[0]] = _additems


def _describe(opcode: str, arg: Any, recent: list[str]) -> str:
    if opcode == "GLOBAL" and isinstance(arg, str):
        return "it imports " + ".".join(arg.split(" ", 1))
    if opcode == "STACK_GLOBAL" and len(recent) >= 2:
        return f"it imports {recent[-2]}.{recent[-1]}"
    if opcode == "INST" and isinstance(arg, str):
        return "it imports " + ".".join(arg.split(" ", 1))
    return f"it uses the {opcode} opcode (objects beyond plain data)"


def check_plain(data: bytes, max_build_bytes: int = MAX_BUILD_BYTES) -> int:
    """Raise UnsafePickleError if the pickle would import or call anything, and
    TooLargeError if building it would take more than `max_build_bytes`. Returns how
    many values it holds whose hash can be made to collide (ints past the hash modulus,
    floats, bytes, tuples, frozensets)."""
    recent: list[str] = []
    cost = 0
    hashed = 0
    try:
        for count, (op, arg, _pos) in enumerate(pickletools.genops(data)):
            name = op.name
            if name in _HASHED_BUILDERS or (name in _INT_OPS and isinstance(arg, int)
                                            and not -HASH_MODULUS < arg < HASH_MODULUS):
                hashed += 1
            if count > MAX_OPCODES:
                raise TooLargeError(f"it has more than {MAX_OPCODES} opcodes (a Flight "
                                    "Recorder dump of 20,000 entries has about 6 million)")
            if name in _FORBIDDEN:
                raise UnsafePickleError(_describe(name, arg, recent))
            if name in _NO_OBJECT:
                continue
            cost += OBJECT_BYTES + (len(arg) if isinstance(arg, str | bytes) else 0)
            if cost > max_build_bytes:
                raise TooLargeError(
                    f"building it would take more than {max_build_bytes >> 20} MiB of "
                    "memory (far more objects than a Flight Recorder dump holds)")
            if name in _STRING_OPS and isinstance(arg, str):
                recent = [*recent[-1:], arg]
    except (UnsafePickleError, TooLargeError):
        raise
    except Exception as exc:  # noqa: BLE001 - any decoding failure: a truncated/corrupt file
        raise ValueError(f"corrupt pickle ({str(exc).splitlines()[0] if str(exc) else exc!r})"
                         ) from None
    return hashed


_CONTAINERS = (list, tuple, dict, set, frozenset)


def _children(obj: Any) -> list[Any]:
    if isinstance(obj, dict):
        return [*obj.keys(), *obj.values()]
    return list(obj)


def _leaf_size(obj: Any) -> tuple[int, int]:
    """(values, characters) a walk visits in a non-container."""
    return 1, len(obj) if isinstance(obj, str | bytes | bytearray) else 0


def check_bounded(value: Any, max_values: int = MAX_WALK_VALUES,
                  max_chars: int = MAX_WALK_CHARS, max_depth: int = MAX_DEPTH) -> None:
    """Raise TooLargeError unless walking `value` (every shared reference walked again)
    visits at most `max_values` values and `max_chars` characters, `max_depth` levels
    deep, and ValueError if it contains itself. Iterative (no recursion limit) and
    memoized by identity, so a 2^40-value DAG of 40 objects costs 40 steps."""
    if not isinstance(value, _CONTAINERS):
        return
    done: dict[int, tuple[int, int]] = {}
    path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        obj, children_done = stack.pop()
        oid = id(obj)
        if children_done:
            values, chars = 1, 0
            for child in _children(obj):
                v, c = done[id(child)] if isinstance(child, _CONTAINERS) else _leaf_size(child)
                values, chars = values + v, chars + c
            if values > max_values or chars > max_chars:
                raise TooLargeError(
                    f"walking it would visit more than {max_values} values or {max_chars} "
                    "characters (objects shared by reference many times over)")
            done[oid] = (values, chars)
            path.discard(oid)
            continue
        if oid in done:
            continue
        if oid in path:
            raise ValueError("a value contains itself (a reference cycle)")
        path.add(oid)
        if len(path) > max_depth:
            raise TooLargeError(f"it is nested more than {max_depth} levels deep")
        stack.append((obj, True))
        stack.extend((c, False) for c in _children(obj) if isinstance(c, _CONTAINERS))


def load_plain(data: bytes, max_build_bytes: int = MAX_BUILD_BYTES) -> Any:
    """The value of a pickle made only of builtins, bounded in size (see the module
    docstring); refuses anything else.

    Raises UnsafePickleError (refused, nothing executed), TooLargeError (plain data past
    the bounds) or ValueError (corrupt, or a value that contains itself)."""
    hashed = check_plain(data, max_build_bytes)
    unpickler = _PlainUnpickler if hashed <= MAX_ODD_KEYS else _SafeDictUnpickler
    try:
        value = unpickler(io.BytesIO(data)).load()
    except (UnsafePickleError, TooLargeError):
        raise
    except Exception as exc:  # noqa: BLE001 - corrupt stream: one line for the user
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"corrupt pickle ({detail})") from None
    check_bounded(value)
    return value
