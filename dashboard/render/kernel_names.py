"""Kernel and op names shortened by their C++ structure before any cut: a demangled kernel
name is mostly its parameter list and template arguments, so those give way first (the
parameter list, then nested template arguments, the return type, outer namespaces, every
template argument), and only a name still too long is cut in the middle. Names that
differ keep a difference in what is shown (format.short_names).

Each step is one string rewrite; `reductions` lists the name after each step that changed
it, least lossy first. A step whose brackets do not balance (an `operator<`, a cut name)
is skipped, never guessed at."""

from __future__ import annotations

import re

ELLIPSIS = "…"
ANON = ("(anonymous namespace)", "(anon)")
RETURN_TYPE = "void "
_QUALIFIERS = re.compile(r"(?:[A-Za-z_]\w*::)+")  # 'dpsk::ep::internode::' before a name


def forms(name: str) -> list[str]:
    """`name` (anonymous namespaces read `(anon)`), then after each shortening step in
    turn, one form per step even where a step changes nothing (so two names' forms
    compare step by step): parameters -> `(…)`, nested template arguments -> `<…>`, no
    return type, only each name's last qualifier, all template arguments -> `<…>`."""
    out = [name.replace(*ANON)]
    for step in (_no_parameters, _no_nested_templates, _no_return_type, _last_qualifiers,
                 _no_templates):
        out.append(step(out[-1]))
    return out


def reductions(name: str) -> list[str]:
    """`forms(name)` without the steps that changed nothing, least shortened first."""
    return list(dict.fromkeys(forms(name)))


def _parameter_start(name: str) -> int | None:
    """Index of the '(' opening the trailing parameter list, when `name` ends with one
    glued to an identifier or a template ('f<int>(int*)', not 'all_reduce (DATA)')."""
    if not name.endswith(")"):
        return None
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0:
            before = name[i - 1] if i else " "
            return i if (before.isalnum() or before in "_>") else None
    return None


def _no_parameters(name: str) -> str:
    start = _parameter_start(name)
    if start is None or name[start:] == "(" + ELLIPSIS + ")" or name[start:] == "()":
        return name
    return name[:start] + "(" + ELLIPSIS + ")"


def _balanced(name: str) -> bool:
    depth = 0
    for ch in name:
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def _templates_from(name: str, depth_kept: int) -> str:
    """`name` with the template arguments deeper than `depth_kept` levels as '…'."""
    if not _balanced(name):
        return name
    out: list[str] = []
    depth = 0
    for ch in name:
        if ch == ">":
            depth -= 1
        if depth <= depth_kept:
            out.append(ch)
        elif not out or out[-1] != ELLIPSIS:
            out.append(ELLIPSIS)
        if ch == "<":
            depth += 1
    return "".join(out)


def _no_nested_templates(name: str) -> str:
    return _templates_from(name, 1)


def _no_templates(name: str) -> str:
    return _templates_from(name, 0)


def _no_return_type(name: str) -> str:
    rest = name.removeprefix(RETURN_TYPE)
    return rest if rest.strip() else name


def _last_qualifiers(name: str) -> str:
    """Every qualified name with only its last qualifier, template arguments included:
    'dpsk::ep::internode::dispatch' -> 'internode::dispatch',
    'device_kernel<dpsk::grouped_gemm::cuda::fp8_ptp128c::GemmKernel>' ->
    'device_kernel<fp8_ptp128c::GemmKernel>'."""
    return _QUALIFIERS.sub(lambda m: m.group(0).split("::")[-2] + "::", name)


def middle_cut(shown: str, width: int) -> str:
    """`shown` in `width` characters: its start and end, the middle as '…'."""
    if len(shown) <= width:
        return shown
    keep = max(2, width - len(ELLIPSIS))
    head = (keep + 1) // 2
    return shown[:head] + ELLIPSIS + shown[len(shown) - (keep - head):]


def fitted(name: str, width: int) -> str:
    """The least shortened of `reductions(name)` that fits `width`, else the most
    shortened cut in the middle."""
    steps = reductions(name)
    return next((s for s in steps if len(s) <= width), middle_cut(steps[-1], width))
