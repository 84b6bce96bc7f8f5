"""The base of every result model and the names the families share (the attribution
categories and the MFU waterfall's stages).
"""

from __future__ import annotations

from typing import TypeAlias

import msgspec

CATEGORIES = (
    "compute", "recompute", "exposed_comm", "straggler_wait", "bubble", "memory", "idle",
)


# stages of the MFU waterfall: kernel efficiency, then each non-compute category
STAGES = ("kernel_efficiency", *[c for c in CATEGORIES if c != "compute"])


class Model(msgspec.Struct, frozen=True, kw_only=True):
    """Base of every model class: immutable. Subclasses repeat `frozen=True, kw_only=True` (msgspec
    applies it per class) so a field with a default can be added anywhere."""


Json: TypeAlias = "dict[str, Json] | list[Json] | str | int | float | bool | None"


JsonObject: TypeAlias = "dict[str, Json]"
"""A model's JSON as plain values (what `to_builtins` returns; what `--fail-if` reads)."""
