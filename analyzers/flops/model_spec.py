"""The model spec of `--model FILE` (JSON or YAML): the sizes MFU's model FLOPs come
from (analyzers/flops/mfu.py has the formulas; docs/mfu.md the fields).

Its own module, below both the run context (analyzers/context.py, which carries the
user's spec) and the MFU analyzer (which reads the context), so neither imports the
other to name it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepscope.ingest.errors import UsageError, quote_name
from stepscope.ingest.number_text import NumberTextError, decimal
from stepscope.ingest.option_files import read_option_file
from stepscope.ingest.option_json import loads_once, twice_line

CONVENTIONS = ("palm", "megatron", "torchtitan")
ATTENTION = ("full", "causal")


@dataclass(frozen=True)
class ModelSpec:
    n_params: float
    n_layers: int
    hidden: int
    seq_len: int
    global_batch_tokens: float
    n_active_params: float | None = None
    attention: str = "full"
    convention: str = "palm"
    vocab: int = 0


def load_spec(path: Path) -> ModelSpec:
    """Read a model spec (JSON or YAML); errors name the file and the field."""
    data = read_option_file(path, "--model", MAX_SPEC_BYTES)
    shown = quote_name(path)  # a name with an escape code is quoted, as everywhere
    try:
        text = data.decode("utf-8")
    except UnicodeError:
        raise UsageError(f"{shown}: the model spec is not UTF-8 text") from None
    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            raw = _load_yaml(text)
        else:
            raw = loads_once(text)
    except UsageError as exc:
        raise UsageError(f"{shown}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - any parse error is the user's file
        first = (str(exc).splitlines()[0] if str(exc) else type(exc).__name__)[:200]
        kind = path.suffix.lstrip(".").upper() or "JSON"
        raise UsageError(f"{shown}: not valid {kind} ({first})") from None
    if not isinstance(raw, dict):
        raise UsageError(f"{shown}: the model spec must be a mapping of fields")
    return spec_from_mapping(raw, shown)


MAX_SPEC_BYTES = 1 << 20  # a spec is a dozen fields; the bound keeps a wrong file unread


def _load_yaml(text: str) -> Any:
    """A YAML spec, built by the safe loader with aliases refused: `*name` lets 600 bytes
    stand for 10^9 values (an alias bomb), and a spec of a dozen numbers never needs
    one. Refused as the parser meets the first alias, before anything is expanded. A key
    written twice in one mapping is refused too (the loader kept the last in silence),
    as in a JSON spec."""
    import yaml

    class _NoAliasLoader(yaml.SafeLoader):  # type: ignore[misc]
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise UsageError(f"YAML alias *{str(event.anchor)[:40]} at line "
                                 f"{event.start_mark.line + 1}: aliases are not accepted "
                                 "in a model spec; write the value out")
            return super().compose_node(parent, index)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[str] = set()
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode):
                    if key.value in seen:
                        raise UsageError(twice_line(key.value, "one mapping") + " (line "
                                         f"{key.start_mark.line + 1})")
                    seen.add(key.value)
            return super().construct_mapping(node, deep=deep)

    # YAML 1.1 reads `0x20`, `3_2` and `1:30` (base 60) as 32, 32 and 90: a number is
    # read by the one grammar of numbers instead (_yaml_number)
    for tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float"):
        _NoAliasLoader.add_constructor(tag, _yaml_number)
    loader = _NoAliasLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


YAML_SPECIAL_FLOATS = {".inf": math.inf, "+.inf": math.inf, "-.inf": -math.inf,
                       ".nan": math.nan}


def _yaml_number(loader: Any, node: Any) -> Any:
    """A YAML number read by the one grammar of numbers (`-4096`, `32.5`, `7.0e9`), YAML's
    `.inf`/`.nan` as the floats they name (refused later as not finite); anything else
    YAML 1.1 calls a number (`0x20`, `3_2`, `1:30`) stays text and is refused by
    _spec_number as no number."""
    text = str(loader.construct_scalar(node))
    try:
        value = decimal(text, -math.inf, math.inf)
    except NumberTextError:
        return YAML_SPECIAL_FLOATS.get(text.lower(), text)
    if node.tag.endswith(":int") and value.is_integer():
        return int(text)  # digits as written (a double would round 26 digits)
    return value


def _shown(raw: Any) -> str:
    """A value as messages show it, at most 40 characters, without formatting a large
    value whole first (reprlib bounds each level)."""
    import reprlib

    shown = reprlib.Repr()
    shown.maxstring = shown.maxother = 40
    shown.maxlist = shown.maxdict = shown.maxtuple = shown.maxset = 4
    shown.maxlevel = 2
    return shown.repr(raw)[:40]


# Sane ranges of the spec's numbers: (kind, low, high); low is exclusive for sizes.
SPEC_RANGES: dict[str, tuple[type, float, float]] = {
    "n_params": (float, 0, 1e16),
    "n_layers": (int, 0, 100_000),
    "hidden": (int, 0, 10_000_000),
    "seq_len": (int, 0, 1 << 30),
    "global_batch_tokens": (float, 0, 1e13),
    "n_active_params": (float, 0, 1e16),
    "vocab": (int, -1, 100_000_000),
}


def _spec_number(raw: Any, name: str, where: str) -> float | int:
    """One numeric field: a finite number (or numeric text, read by the one grammar of
    numbers: ingest.number_text, so ' 7e9', '7_000' or other scripts' digits are no
    number, as on the command line) within SPEC_RANGES."""
    kind, low, high = SPEC_RANGES[name]
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise UsageError(f"{where}: {name} must be a number, not {_shown(raw)}")
    try:
        value = decimal(raw, -math.inf, math.inf) if isinstance(raw, str) else float(raw)
    except NumberTextError as exc:
        problem = "a finite number" if "finite" in exc.problem else "a number"
        raise UsageError(f"{where}: {name} must be {problem}, not {_shown(raw)}") from None
    except OverflowError:  # a YAML integer past a double
        raise UsageError(f"{where}: {name} must be a number, not {_shown(raw)}") from None
    if not math.isfinite(value):
        raise UsageError(f"{where}: {name} must be a finite number, not {_shown(raw)}")
    if not low < value <= high:
        raise UsageError(f"{where}: {name} {_shown(raw)} is out of range "
                         f"(must be above {low:g} and at most {high:g})")
    if kind is int:
        if value != int(value):
            raise UsageError(f"{where}: {name} must be a whole number, not {_shown(raw)}")
        return int(value)
    return value


def spec_from_mapping(raw: dict[Any, Any], where: str = "model spec") -> ModelSpec:
    """A validated ModelSpec: text keys, every number finite and in SPEC_RANGES, known
    attention and convention; anything else is a usage error naming the field."""
    odd = [k for k in raw if not isinstance(k, str)]
    if odd:
        raise UsageError(f"{where}: field names must be text, found {_shown(odd[0])}")
    required = ("n_params", "n_layers", "hidden", "seq_len", "global_batch_tokens")
    missing = [k for k in required if raw.get(k) is None]  # YAML's `~` is no value
    if missing:
        raise UsageError(f"{where}: missing field(s) {', '.join(missing)} "
                         f"(needs {', '.join(required)})")
    unknown = sorted(set(raw) - set(ModelSpec.__dataclass_fields__))
    if unknown:
        raise UsageError(f"{where}: unknown field(s) {', '.join(unknown)}")
    numbers = {name: _spec_number(raw[name], name, where)
               for name in SPEC_RANGES if raw.get(name) is not None}
    spec = ModelSpec(
        n_params=float(numbers["n_params"]), n_layers=int(numbers["n_layers"]),
        hidden=int(numbers["hidden"]), seq_len=int(numbers["seq_len"]),
        global_batch_tokens=float(numbers["global_batch_tokens"]),
        n_active_params=(float(numbers["n_active_params"])
                         if "n_active_params" in numbers else None),
        attention=str(raw.get("attention", "full")),
        convention=str(raw.get("convention", "palm")),
        vocab=int(numbers.get("vocab", 0)))
    if spec.attention not in ATTENTION:
        raise UsageError(f"{where}: attention must be one of {', '.join(ATTENTION)}")
    if spec.convention not in CONVENTIONS:
        raise UsageError(f"{where}: convention must be one of {', '.join(CONVENTIONS)}")
    return spec
