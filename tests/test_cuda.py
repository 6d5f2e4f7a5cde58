"""The CUDA paths: run only where a GPU is present (skipped with the reason elsewhere).

On a GPU each case must produce what the GPU can produce: ``ok`` wherever the
device's capability says the variant runs, ``skipped`` only where
:func:`accelbench.devices.precision.unsupported_reason` names a reason. A test that
accepted ``skipped`` everywhere would pass on a GPU while checking nothing.
"""

import pytest
import torch

from accelbench.suite.suites import make_entry
from accelbench.suite.worker import run_inline

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU (CUDA not available here)"),
]
FAST = {"min_time": 0.05, "max_time": 1.0, "min_reps": 5, "warmup_time": 0.01, "device": "cuda"}


def _expected(precision: str) -> str:
    from accelbench.devices.precision import unsupported_reason

    return "skipped" if unsupported_reason(torch.device("cuda"), precision) else "ok"


@pytest.mark.parametrize(
    "name, params",
    [
        ("kernels/gemm", {"m": 1024, "n": 1024, "k": 1024, "precision": p, "graph": True})
        for p in ("fp32", "tf32", "fp16", "bf16", "int8", "fp8")
    ]
    + [
        ("kernels/conv", {"phase": "fwd_bwd", "layout": "nhwc", "precision": "fp16"}),
        ("kernels/rnn", {"phase": "fwd_bwd", "precision": "fp16"}),
        ("kernels/attention", {"phase": "fwd_bwd", "causal": True, "precision": "bf16"}),
        ("kernels/sparse", {"m": 1024, "n": 1024, "k": 1024, "density": 0.5, "format": "semi24", "precision": "fp16"}),
        ("kernels/membw", {"size": "256M"}),
    ],
)
def test_kernels_on_cuda(name, params):
    [r] = run_inline(make_entry(name, {**params, **FAST}))
    assert r.status == _expected(params.get("precision", "fp32")), (r.error, r.reason)
    if r.status != "ok":
        return
    assert r.details["clock"] == "cuda_event" and r.details["cache"] == "cold"
    assert r.conditions["gpu"], "the conditions monitor read nothing from NVML"
    seconds = r.metrics["seconds"].value
    assert 1e-7 < seconds < 1.0, seconds  # events bracketed the work, not an idle stream
    if params.get("graph"):
        assert "graph_seconds" in r.metrics, r.warnings
        assert r.metrics["graph_seconds"].value <= seconds * 1.5


def test_event_time_agrees_with_wall_time_for_a_long_kernel():
    """A kernel of tens of milliseconds: CUDA events and the host clock around a synchronise agree."""
    import time

    from accelbench.measure.timer import Timer, TimerConfig

    a = torch.randn(8192, 8192, device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(5):
        a @ a
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / 5
    m = Timer(lambda: a @ a, "cuda", TimerConfig(cache="hot", min_time=0.2)).measure()
    assert m.median == pytest.approx(wall, rel=0.25), (m.median, wall)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="all-reduce over NCCL needs 2 GPUs")
def test_allreduce_over_nccl(tmp_path):
    [r] = run_inline(make_entry("kernels/allreduce", {"nproc": 2, "sizes": "1M", "device": "cuda"}), tmp_path)
    assert r.status == "ok" and r.params["backend"] == "nccl", r.error
    assert r.metrics["busbw_gbps"].value > 1.0


@pytest.mark.parametrize("precision", ["fp32", "tf32", "amp_fp16", "amp_bf16"])
def test_training_on_cuda(precision):
    params = {"model": "resnet18", "batch_size": "32", "precision": precision, "warmup": 2, "num_batches": 6}
    [r] = run_inline(make_entry("train/throughput", {**params, "display_every": 3, "device": "cuda"}))
    peak = {"fp32": "fp32", "tf32": "tf32", "amp_fp16": "fp16", "amp_bf16": "bf16"}[precision]
    assert r.status == _expected(peak), (r.error, r.reason)
    if r.status == "ok":
        assert r.details["clock"] == "cuda_event" and r.metrics["peak_memory_bytes"].value > 0
        assert r.metrics["throughput"].value > 0
