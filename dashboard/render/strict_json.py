"""JSON output that is always valid JSON (RFC 8259): no NaN, no Infinity.

Python's json writes float('nan') as `NaN`, which most JSON parsers reject. The JSON of
frames (the ingest summary, a job's history) goes through `dumps`: a non-finite float (a
ratio over zero time, say) becomes null, "no value", which is what it means; the models'
JSON (analyzers.results.to_json, msgspec) writes null for them too. User inputs that could
cause one are refused earlier (stepscope/validate.py); this is the last guard for values
computed from data.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(value: Any) -> Any:
    """`value` with every non-finite float, at any depth, replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """json.dumps that never writes NaN or Infinity (they become null)."""
    return json.dumps(finite(value), allow_nan=False, **kwargs)
