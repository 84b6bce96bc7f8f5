"""Communication kernels that are not NCCL's (issue 20 §1): the versioned pattern table
(ingest/data/comm_kernels.json), a user's --comm-kernels file and its checks, and how
kernel names read from the libraries' own sources are classified."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import write_trace

import stepscope
from stepscope.cli import main
from stepscope.ingest.comm_kernels import (
    COLLECTIVES,
    ROLES,
    builtin_table,
    comm_patterns,
    load_user_table,
    pattern_problem,
)
from stepscope.ingest.errors import UsageError

# (kernel name as Kineto writes it, library, collective, op); None: not communication.
# Names follow the kernels' declarations in DeepEP (csrc/kernels/*), PyTorch
# (symm_mem/CUDASymmetricMemoryOps.cu, nvshmem_extension.cu), vLLM / SGLang
# (custom_all_reduce.cuh), TransformerEngine (userbuffers.cu), MSCCL++, NVSHMEM, RCCL.
NAMES: list[tuple[str, str | None, str | None, str | None]] = [
    ("void deep_ep::internode::notify_dispatch<8>(int const*, int*, int, int const*, int*)",
     "deepep", "all_to_all", "notify"),
    ("void deep_ep::internode::dispatch<true, 8, 16, 4, 7168>(int4*, float*, long*)",
     "deepep", "all_to_all", "dispatch"),
    ("void deep_ep::internode::cached_notify(int, int, int, int, int, int, int*)",
     "deepep", "all_to_all", "notify"),
    ("void deep_ep::internode::combine<__nv_bfloat16, 8, 2>(int4*, float*, bool const*)",
     "deepep", "all_to_all", "combine"),
    ("void deep_ep::internode_ll::dispatch<false, 8, 7168>(void*, float*, int*)",
     "deepep", "all_to_all", "dispatch"),
    ("void deep_ep::internode_ll::combine<8, 7168, 9>(void*, void*, int*, void const*)",
     "deepep", "all_to_all", "combine"),
    ("void deep_ep::intranode::cached_notify_combine<8>(void**, int*, int, int)",
     "deepep", "all_to_all", "notify"),
    ("void deep_ep::legacy::intranode::dispatch<8, 768, 8192>(int4*, float*)",
     "deepep", "all_to_all", "dispatch"),
    ("void deep_ep::elastic::dispatch_impl<128, 8, 7168>(deep_ep::elastic::Args)",
     "deepep", "all_to_all", "dispatch"),
    ("void dpsk::ep::internode::dispatch<true, 8, 16>(int4*, float*)",
     "deepep", "all_to_all", "dispatch"),
    ("void dpsk::ep::internode::combine<__nv_bfloat16, 8>(int4*, float*)",
     "deepep", "all_to_all", "combine"),
    ("void dpsk::ep::internode::notify_dispatch<8>(int const*, int*)",
     "deepep", "all_to_all", "notify"),
    ("void deep_ep::intranode::barrier<8>(int**, int)", "deepep", "barrier", "barrier"),
    # issue 41 §11: the dispatch's layout kernel belongs to the token exchange, not compute
    ("void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*)",
     "deepep", "all_to_all", "layout"),
    ("void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, "
     "bool*, int, int, int, int)", "deepep", "all_to_all", "layout"),
    ("void mylab::get_dispatch_layout_like(int*)", None, None, None),
    ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>"
     "(c10::BFloat16*, unsigned long, unsigned int**, unsigned long, unsigned long)",
     "torch_symm_mem", "all_reduce", "multimem_all_reduce"),
    ("void (anonymous namespace)::one_shot_all_reduce_kernel<c10::BFloat16, 16, 8>"
     "(c10::BFloat16**, c10::BFloat16*)", "torch_symm_mem", "all_reduce", "one_shot_all_reduce"),
    ("void (anonymous namespace)::two_shot_all_reduce_kernel_inplace<float, 16, 4>"
     "(float**, unsigned long)", "torch_symm_mem", "all_reduce", "two_shot_all_reduce"),
    ("void (anonymous namespace)::two_shot_all_reduce_kernel<c10::BFloat16, 16, 8, true, false>"
     "(c10::BFloat16**, c10::BFloat16*)", "torch_symm_mem", "reduce_scatter", "reduce_scatter"),
    ("void (anonymous namespace)::multimem_all_gather_kernel<16>(char*, char*, unsigned long)",
     "torch_symm_mem", "all_gather", "multimem_all_gather"),
    ("c10d::nvshmem_extension::allToAllV(void*, void*, long*, unsigned long, int, int)",
     "torch_symm_mem", "all_to_all", "all_to_all_vdev"),
    ("void c10d::nvshmem_extension::allToAllV_2d<true>(void*, void*, long*, long*)",
     "torch_symm_mem", "all_to_all", "all_to_all_vdev_2d"),
    ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, "
     "vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)",
     "vllm_custom_ar", "all_reduce", "custom_all_reduce"),
    ("void sglang::cross_device_reduce_1stage<__half, 8>(sglang::RankData*, "
     "sglang::RankSignals, sglang::Signal*, __half*, int, int)",
     "sglang_custom_ar", "all_reduce", "custom_all_reduce"),
    ("void vllm::cross_device_reduce_2stage<float, 4>(vllm::RankData*)",
     "vllm_custom_ar", "all_reduce", "custom_all_reduce"),
    ("void aiter::cross_device_reduce_1stage<__hip_bfloat16, 8>(aiter::RankData*)",
     "aiter_custom_ar", "all_reduce", "custom_all_reduce"),
    ("void quickreduce::allreduce_prototype_twoshot<quickreduce::CodecQ4<__half>>(int)",
     "vllm_quick_ar", "all_reduce", "quick_all_reduce"),
    ("void mylab::cross_device_reduce_1stage<float, 4>(mylab::RankData*)",
     "custom_all_reduce", "all_reduce", "custom_all_reduce"),
    ("void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 8, true, false>"
     "(tensorrt_llm::kernels::AllReduceParams)", "trtllm_custom_ar", "all_reduce",
     "custom_all_reduce"),
    ("void fbgemm_gpu::oneShotAllReduceKernel<8u, true>(c10::BFloat16*, unsigned long)",
     "custom_all_reduce", "all_reduce", "custom_all_reduce"),
    ("void userbuffers_fp16_sum_inplace_gpu_rr_rs_oop<4>(int, int, int, int, int)",
     "te_userbuffers", "reduce_scatter", "reduce_scatter"),
    ("void userbuffers_fp16_sum_inplace_gpu_rw_ag<8>(int, int, int)",
     "te_userbuffers", "all_gather", "all_gather"),
    ("void userbuffers_fp16_sum_inplace_gpu_mc<8>(int, int, int)",
     "te_userbuffers", "all_reduce", "all_reduce"),
    ("kuserbuffers_pushsendrecv(int*, int*, int4*, int4*, int4*, int4*, int, void*)",
     "te_userbuffers", "send_recv", "ring_exchange"),
    ("void mscclpp::collective::(anonymous namespace)::allreduceNvls<__nv_bfloat16>"
     "(mscclpp::DeviceHandle<mscclpp::SwitchChannel>*)", "mscclpp", "all_reduce", "all_reduce"),
    ("void mscclpp::executionKernel<__nv_bfloat16, false>(int, __nv_bfloat16*)",
     "mscclpp", "unknown", "execution_plan"),
    ("void alltoall_on_stream_kernel<int>(int, int*, int const*, unsigned long)",
     "nvshmem", "all_to_all", "alltoall"),
    ("void fcollect_on_stream_kernel<long>(int, long*, long const*, unsigned long)",
     "nvshmem", "all_gather", "fcollect"),
    ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", "rccl", "unknown", "generic"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     "nccl", "all_reduce", None),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
     "at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>>>>",
     None, None, None),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
     None, None, None),
    ("flash_fwd_kernel", None, None, None),
]


def _trace(names: list[str]) -> dict[str, Any]:
    """One kernel per name, 10 µs apart, in one ProfilerStep."""
    events: list[dict[str, Any]] = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
         "ts": 0.0, "dur": 10.0 * len(names) + 10, "args": {}}]
    for i, name in enumerate(names):
        events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7,
                       "ts": 10.0 * i + 1, "dur": 5.0, "args": {"device": 0, "stream": 7}})
    return {"schemaVersion": 1, "traceEvents": events,
            "baseTimeNanoseconds": 1_700_000_000_000_000_000}


def _classified(tmp_path: Path, names: list[str], comm_kernels: Path | None = None
                ) -> dict[str, tuple[str, str | None, str, str | None, str]]:
    """name -> (kind, library, collective, comm_op, source) after an ingest."""
    write_trace(tmp_path / "t" / "rank0.json.gz", _trace(names))
    db = tmp_path / "c.duckdb"
    stepscope.ingest_run(tmp_path / "t", db=db, run="c", comm_kernels=comm_kernels)
    with stepscope.open(db) as store:
        kinds = dict(store.sql("SELECT name, kind FROM gpu_ops").iter_rows())
        colls = {r[0]: r[1:] for r in store.sql(
            "SELECT kernel_name, library, collective, comm_op, source FROM collectives"
        ).iter_rows()}
    return {n: (kinds[n], *colls.get(n, (None, None, None, None))) for n in names}


def test_kernel_names_of_each_library_are_read(tmp_path: Path) -> None:
    got = _classified(tmp_path, [n for n, *_ in NAMES])
    for name, library, collective, op in NAMES:
        kind, lib, coll, comm_op, source = got[name]
        if library is None:
            assert kind == "compute" and lib is None, name
            continue
        assert (kind, lib, coll, comm_op) == ("comm", library, collective, op), name
        assert source == ("nccl_kernel" if name.startswith("nccl") else "comm_kernel"), name


def test_table_is_versioned_documented_and_valid() -> None:
    table = builtin_table()
    assert table.version and table.description
    for entry in table.patterns:
        assert pattern_problem(entry) is None, entry.pattern
        assert entry.source, entry.pattern  # provenance of every name
        assert entry.collective in COLLECTIVES and (entry.role is None or entry.role in ROLES)
    # every library of the table has an example in the list above
    assert {p.library for p in table.patterns} <= {lib for _, lib, *_ in NAMES if lib}


def _user(tmp_path: Path, doc: Any, name: str = "ck.json") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def test_user_file_comes_before_the_table(tmp_path: Path) -> None:
    user = _user(tmp_path, {"patterns": [
        {"pattern": "\\bmy_team::ep_exchange", "library": "inhouse", "collective": "all_to_all",
         "op": "exchange", "role": "expert_exchange"},
        # overrides the bundled entry for vLLM's kernel
        {"pattern": "cross_device_reduce_1stage", "library": "patched_ar",
         "collective": "all_reduce", "op": "ar"}]})
    assert comm_patterns(user)[0].library == "inhouse"
    names = ["void my_team::ep_exchange<4>(int*)",
             "void vllm::cross_device_reduce_1stage<float, 2>(vllm::RankData*)"]
    got = _classified(tmp_path, names, user)
    assert got[names[0]][:4] == ("comm", "inhouse", "all_to_all", "exchange")
    assert got[names[1]][:4] == ("comm", "patched_ar", "all_reduce", "ar")


@pytest.mark.parametrize("doc,problem", [
    ("{not json", "not valid JSON"),
    ({"patterns": []}, "`patterns` is empty"),
    ({"patterns": [{"pattern": "x", "library": "l", "collective": "all_to_all"}]},
     "missing required field `op`"),
    ({"patterns": [{"pattern": "x", "library": "l", "collective": "a2a", "op": "o"}]},
     "collective 'a2a' is not one of"),
    ({"patterns": [{"pattern": "x", "library": "l", "collective": "all_to_all", "op": "o",
                    "role": "experts"}]}, "role 'experts' is not one of"),
    ({"patterns": [{"pattern": "dispatch((", "library": "l", "collective": "all_to_all",
                    "op": "o"}]}, "not a valid RE2 expression"),
    ({"patterns": [{"pattern": "(?<=x)y", "library": "l", "collective": "all_to_all",
                    "op": "o"}]}, "not a valid RE2 expression"),  # Python's re, not RE2
    ({"patterns": [{"pattern": "x", "library": "l", "collective": "all_to_all", "op": "o",
                    "colective": "typo"}]}, "unknown field `colective`"),
])
def test_bad_user_file_is_one_line_naming_it(tmp_path: Path, doc: Any, problem: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = _user(tmp_path, doc)
    with pytest.raises(UsageError) as err:
        load_user_table(path)
    assert str(err.value).startswith(f"{path}: --comm-kernels: ") and problem in str(err.value)
    write_trace(tmp_path / "t" / "rank0.json.gz", _trace(["flash_fwd_kernel"]))
    code = main(["ingest", str(tmp_path / "t"), "--db", str(tmp_path / "x.duckdb"),
                 "--comm-kernels", str(path)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and str(path) in lines[0] and problem in lines[0]
    assert not (tmp_path / "x.duckdb").exists()  # refused before any work


def test_missing_user_file_and_stored_run(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    write_trace(tmp_path / "t" / "rank0.json.gz", _trace(["flash_fwd_kernel"]))
    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(tmp_path / "t"), "--db", str(db), "--run", "s",
                 "--comm-kernels", str(tmp_path / "none.json")]) == 2
    assert "none.json: --comm-kernels: no such file" in capsys.readouterr().err
    stepscope.ingest_run(tmp_path / "t", db=db, run="s")
    user = _user(tmp_path, {"patterns": [{"pattern": "x", "library": "l",
                                          "collective": "all_to_all", "op": "o"}]})
    assert main(["report", "s", "--db", str(db), "--comm-kernels", str(user)]) == 2
    assert "--comm-kernels applies when ingesting traces" in capsys.readouterr().err
