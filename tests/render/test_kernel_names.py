"""Kernel names shortened by their structure before any cut (issue 45, point 9): the real
DeepSeek-V3 DeepEP kernels (tests/data/deepseek-ai_profile-data) read
'void dpsk::ep::inter…nt, int, int, int*)' twice at 40 characters because the cut fell
in the part where dispatch<false, 8, false, 8> and dispatch<false, 8, true, 8> differ.
Parameters and template arguments now give way first; distinct names stay distinct."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepscope.dashboard.render.format import numbered_names, short_name, short_names
from stepscope.dashboard.render.kernel_names import reductions

DEEPSEEK = (Path(__file__).resolve().parents[1] / "data" / "deepseek-ai_profile-data"
            / "train.json.gz")


def kernels() -> list[str]:
    """Every kernel name of the real trace, in first-seen order."""
    with gzip.open(DEEPSEEK, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    return list(dict.fromkeys(e["name"] for e in events if e.get("cat") == "kernel"))


def deepep_kernels() -> list[str]:
    """The DeepEP kernel names of the real trace, in first-seen order."""
    return [n for n in kernels() if n.startswith("void dpsk::ep::")]


@pytest.mark.parametrize("width", [30, 40, 60])
def test_every_real_kernel_stays_apart_within_the_width(width: int) -> None:
    """All 89 kernels of the trace: layer_norm's ln_fwd and ln_bwd at three tile sizes
    (differing only in nested template arguments), three cutlass GemmKernels differing
    in a namespace inside the template, at::native reduce kernels of four dtypes: every
    one distinct and within the width (the Kernels page showed three GemmKernels as
    'void cutlass::device…GemmKernel::Params)')."""
    names = kernels()
    shown = short_names(names, width)
    assert len(names) == 89 and len(set(shown)) == 89
    assert all(len(s) <= width for s in shown)
    gemms = [s for n, s in zip(names, shown, strict=True) if "GemmKernel>" in n]
    assert len(gemms) == 3 and not any(s.startswith("void") for s in gemms)


@pytest.fixture(scope="module")
def deepep() -> list[str]:
    names = deepep_kernels()
    assert len(names) == 6 and sum("internode::dispatch<" in n for n in names) == 2
    return names


@pytest.mark.parametrize("width", [24, 30, 40, 44, 60, 80])
def test_real_deepep_kernels_stay_apart(deepep: list[str], width: int) -> None:
    shown = short_names(deepep, width)
    assert len(set(shown)) == len(deepep)
    assert all(len(s) <= width for s in shown)
    numbered = [n.split(". ", 1)[1] for n in numbered_names(deepep, width)]
    assert len(set(numbered)) == len(deepep) and all(len(n) <= width for n in numbered)


def test_parameters_and_templates_go_before_the_cut(deepep: list[str]) -> None:
    dispatch = sorted(n for n in deepep if "internode::dispatch<" in n)
    assert [short_name(n, 44) for n in dispatch] == [
        "internode::dispatch<false, 8, false, 8>(…)", "internode::dispatch<false, 8, true, 8>(…)"]
    assert reductions(dispatch[0])[1:] == [
        "void dpsk::ep::internode::dispatch<false, 8, false, 8>(…)",
        "dpsk::ep::internode::dispatch<false, 8, false, 8>(…)",
        "internode::dispatch<false, 8, false, 8>(…)", "internode::dispatch<…>(…)"]
    nested = "void k<128, g<float, h<int> > >(int, float*)"
    assert reductions(nested) == [nested, "void k<128, g<float, h<int> > >(…)",
                                  "void k<128, g<…> >(…)", "k<128, g<…> >(…)", "k<…>(…)"]


def test_names_that_fit_or_are_not_functions_are_kept() -> None:
    """Names within the width are shown as they are (the reports' snapshots hold none
    longer than 80); a collective's '(GROUP)' is not a parameter list."""
    assert short_name("all_reduce (DATA_PARALLEL)", 12) == "all_re…LLEL)"
    assert short_name("void f<int>(int*)", 17) == "void f<int>(int*)"
    assert reductions("void k<operator<>(a, b)")[-1] == "k<operator<>(…)"  # unbalanced: kept


NAME_PARTS = st.sampled_from(["void ", "at::", "native::", "k", "<", ">", "(", ")", ", ",
                              "int", "float*", "8", "true", "false", "#1", "{lambda", "}",
                              "(anonymous namespace)::", " "])


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(st.lists(NAME_PARTS, min_size=1, max_size=30).map("".join), min_size=1,
                max_size=8, unique=True),
       st.integers(min_value=8, max_value=90))
def test_distinct_names_stay_distinct(names: list[str], width: int) -> None:
    """Property: whatever the names (kernel-like or not, balanced or not), distinct
    names never show as one, and a name that fits is never changed when no other
    name shows like it."""
    shown = short_names(names, width)
    assert len(set(shown)) == len(names)
    numbered = numbered_names(names, width)
    assert all(len(n.split(". ", 1)[1]) <= width for n in numbered)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.text(min_size=1, max_size=120), min_size=1, max_size=6, unique=True),
       st.integers(min_value=8, max_value=90))
def test_any_text_stays_distinct(names: list[str], width: int) -> None:
    assert len(set(short_names(names, width))) == len(names)
