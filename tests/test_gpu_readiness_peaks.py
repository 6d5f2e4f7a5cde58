"""Peaks that hold on the next GPU and on this CPU: device names that find their own row only, fp8 GEMM records
that name their accumulation, attention records that name the backend that ran, and a CPU clock that a
renamer cannot shorten nor a busy neighbour spoil."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from accelbench.kernels.common import ABOVE_PEAK, check_against_peak
from accelbench.kit import metrics as fig
from accelbench.results.record import Result
from accelbench.suite.suites import make_entry
from accelbench.suite.worker import run_inline
from accelbench.system import clock
from accelbench.system.specs import find_spec, load_specs, no_peak_reason, peak_for

FAST = {"min_time": 0.05, "max_time": 1.0, "min_reps": 6, "warmup_time": 0.01, "threads": 2, "device": "cpu"}


# --- device names: each finds its own row, or none ---------------------------------------------------------------

#: the name torch reports -> the row it must find (None: no row, so no peak)
NAMES = {
    "NVIDIA H200": "NVIDIA H200 SXM",
    "NVIDIA H200 NVL": "NVIDIA H200 NVL",
    "NVIDIA GH200 480GB": "NVIDIA GH200 Grace Hopper",
    "NVIDIA GH200 144G HBM3e": "NVIDIA GH200 Grace Hopper",
    "NVIDIA H100 80GB HBM3": "NVIDIA H100 SXM",
    "NVIDIA H100 PCIe": "NVIDIA H100 PCIe",
    "NVIDIA H100 NVL": "NVIDIA H100 NVL",
    "NVIDIA B200": "NVIDIA B200 (HGX)",
    "NVIDIA GB200": None,
    "NVIDIA A10": "NVIDIA A10",
    "NVIDIA A100-SXM4-80GB": "NVIDIA A100 SXM4 80GB",
}


@pytest.mark.parametrize("name", sorted(NAMES))
def test_a_device_name_finds_its_own_row_and_no_other(name: str) -> None:
    spec = find_spec(name)
    assert (spec.name if spec else None) == NAMES[name]
    matching = [s.name for s in load_specs() if s.matches(name)]
    assert len(matching) <= 1, matching  # the table's order never decides which part a name is


@pytest.mark.parametrize("name", ["NVIDIA H200 NVL", "NVIDIA H100 NVL", "NVIDIA GH200 480GB"])
def test_a_variant_without_published_figures_in_the_data_has_no_peak_and_says_why(name: str) -> None:
    spec = find_spec(name)
    assert spec is not None and spec.peaks == {} and spec.mem_bw_gbs is None  # no figure lent by another part
    assert "not in accelbench's data" in spec.notes
    reason = no_peak_reason(name, "bf16")
    assert reason.startswith("no peak known") and "no bf16 figure" in reason and "not in accelbench's data" in reason


def _fake_gpu(monkeypatch: pytest.MonkeyPatch, name: str) -> torch.device:
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: name)
    return torch.device("cuda", 0)


def test_an_h200_nvl_is_not_given_the_sxm_peak(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = _fake_gpu(monkeypatch, "NVIDIA H200 NVL")
    assert peak_for(gpu, "bf16") is None
    gpu = _fake_gpu(monkeypatch, "NVIDIA H200")
    peak = peak_for(gpu, "bf16")
    assert peak is not None and peak.tflops == 989.4 and peak.source.startswith("NVIDIA H200 SXM: ")


def _record(tflops: float, peak_tflops: float | None, source: str = "estimate: 2 cores x 2.10 GHz reported") -> Result:
    m = fig.figure(tflops, "TFLOPS", higher_is_better=True)
    r = Result(benchmark="kernels/gemm", params={"precision": "fp32"}, metrics={"tflops": m})
    if peak_tflops is not None:
        r.metrics["pct_of_peak"] = fig.pct_of_peak(m, peak_tflops)
        r.details["peak"] = fig.peak_details(peak_tflops, "TFLOPS", source, True)
    return r


def test_a_figure_above_its_peak_is_flagged_not_printed_as_a_share() -> None:
    over = _record(0.24, 0.21)  # 114%: the peak rests on a clock below the one that ran
    check_against_peak(over, torch.device("cpu"))
    [concern] = [c for c in over.concerns if c.kind == ABOVE_PEAK]
    assert "114.3% of 0.21 TFLOPS" in concern.text and "2.10 GHz reported" in concern.text
    assert over.details["peak"]["below_measured"] is True and over.warnings == [concern.text]
    under = _record(0.18, 0.21)
    check_against_peak(under, torch.device("cpu"))
    assert under.concerns == [] and "below_measured" not in under.details["peak"]


def test_a_record_without_a_peak_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = _fake_gpu(monkeypatch, "NVIDIA GH200 480GB")
    r = _record(500.0, None)
    check_against_peak(r, gpu)
    assert r.details["peak_unknown"].startswith("no peak known: NVIDIA GH200 Grace Hopper has no fp32 figure")


# --- fp8 GEMM: the accumulation that ran, and the peak it is held against ------------------------------------------


def test_an_fp8_gemm_record_names_its_accumulation_and_its_peak() -> None:
    params = {"m": 32, "n": 32, "k": 32, "precision": "fp8", "emulated": True, **FAST}
    [r] = run_inline(make_entry("kernels/gemm", params))
    assert r.status == "ok", r.reason or r.error
    assert r.details["use_fast_accum"] is False
    assert "use_fast_accum=False" in r.details["fp8_accumulation"]
    assert "dense FP8 Tensor Core peak" in r.details["fp8_peak_basis"]
    assert r.details["peak_unknown"].startswith("no peak known")  # no CPU computes fp8: no share of a peak


def test_fast_accumulation_reaches_scaled_mm_and_the_record(monkeypatch: pytest.MonkeyPatch) -> None:
    from accelbench.kernels.gemm import build_case
    from accelbench.kernels.specs import GemmParams

    @dataclass(frozen=True)
    class FastParams(GemmParams):  # the field GemmParams would carry to choose it
        fast_accum: bool = True

    asked: list[Any] = []
    real = torch._scaled_mm

    def watched(*args: Any, **kwargs: Any) -> torch.Tensor:
        asked.append(kwargs.get("use_fast_accum"))
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "_scaled_mm", watched)
    for params, fast in (
        (GemmParams(m=32, n=32, k=32, precision="fp8"), False),
        (FastParams(m=32, n=32, k=32, precision="fp8"), True),
    ):
        case = build_case(params, torch.device("cpu"))
        case.fn()
        assert asked[-1] is fast and case.details["use_fast_accum"] is fast
        assert f"use_fast_accum={fast}" in case.details["fp8_accumulation"]
    assert "fp8_accumulation" not in build_case(GemmParams(m=32, n=32, k=32), torch.device("cpu")).details


# --- attention: the backend that ran ---------------------------------------------------------------------------


def _profiled_ops(call: Any) -> set[str]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        call()
    return {e.key for e in prof.key_averages()}


@pytest.mark.parametrize("phase", ["fwd", "fwd_bwd"])
def test_the_attention_record_names_the_backend_the_timed_call_ran(phase: str) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from accelbench.kernels.attention import build_case
    from accelbench.kernels.specs import AttentionParams

    p = AttentionParams(batch=1, heads=2, seq_len=64, head_dim=16, precision="fp32", phase=phase, causal=True)
    case = build_case(p, torch.device("cpu"))
    assert case.details["sdpa_backend"] == "flash-cpu"
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in _profiled_ops(case.fn)  # what the timed call ran
    with sdpa_kernel([SDPBackend.MATH]):  # the user (or a library) forces the math path: the record follows
        forced = build_case(p, torch.device("cpu"))
        ran = _profiled_ops(forced.fn)
    assert forced.details["sdpa_backend"] == "math" and "SDPBackend.MATH" in forced.details["sdpa_backend_seen"]
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" not in ran and "aten::bmm" in ran


def test_a_cpu_attention_run_records_the_backend_that_ran() -> None:
    params = {"batch": 1, "heads": 2, "seq_len": 32, "head_dim": 16, "precision": "fp32", **FAST}
    [r] = run_inline(make_entry("kernels/attention", params))
    assert r.status == "ok", r.reason or r.error
    assert r.details["sdpa_backend"] == "flash-cpu"
    assert r.details["sdpa_backend_seen"].startswith("aten::_scaled_dot_product_flash_attention_for_cpu")


@pytest.mark.parametrize(
    ("op", "backend"),
    [
        ("_scaled_dot_product_cudnn_attention", "cudnn"),
        ("_scaled_dot_product_flash_attention", "flash"),
        ("_scaled_dot_product_efficient_attention", "memory-efficient"),
    ],
)
def test_each_gpu_backend_is_named_by_the_operator_it_reached(op: str, backend: str) -> None:
    """The GPU kernels' operators, reached on meta tensors (shapes only): the watcher names each, cuDNN too."""
    from accelbench.kernels.attention import backend_that_ran

    q = torch.empty(1, 2, 64, 64, device="meta", dtype=torch.bfloat16)
    fn = getattr(torch.ops.aten, op)
    args: tuple[Any, ...] = (q, q, q) if backend == "flash" else (q, q, q, None, False)
    assert backend_that_ran(lambda: fn(*args)) == (backend, f"aten::{op}")


# --- the CPU clock: a chain no renamer shortens, timed beside a busy neighbour -------------------------------


def _loop_body(chain: Any) -> bytes:
    """The repeated instruction of a chain's loop: its 100 copies end where dec rcx, jnz and ret begin."""
    body = chain.code[: -(3 + 6 + 1)]
    for size in (3, 4):
        copies = body[-size * clock._UNROLL :]
        if copies == copies[:size] * clock._UNROLL:
            return copies[:size]
    return b""


def test_the_chains_use_no_immediate_add_a_renamer_can_fold() -> None:
    assert _loop_body(clock.add_chain()) == bytes.fromhex("4801d0")  # add rax, rdx: register-register
    assert _loop_body(clock.imul_chain()) == bytes.fromhex("480fafc2")  # imul rax, rdx


def test_two_chains_that_disagree_give_no_clock() -> None:
    folded = clock.judge(15.7, 3.1)  # an add chain the renamer shortened, beside the imul chain's true clock
    assert folded.ghz is None and "disagree" in folded.how and "15.70" in folded.how
    agreed = clock.judge(4.03, 4.07)
    assert agreed.ghz == 4.07 and "agree" in agreed.how
    assert clock.judge(9.0, 9.1).ghz is None  # agreeing, but no core runs at 9 GHz


@pytest.mark.skipif(
    __import__("platform").machine() != "x86_64" or sys.platform != "linux", reason="the chains are x86-64 Linux code"
)
def test_the_clock_holds_beside_a_cpu_bound_neighbour() -> None:
    """Two neighbours spinning on this 2-core host: the chains still agree on a plausible clock."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        timed = clock.measure_clock()
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    assert timed.ghz is not None, timed.how
    lo, hi = clock.PLAUSIBLE_GHZ
    assert lo <= timed.ghz <= hi and "agree" in timed.how
