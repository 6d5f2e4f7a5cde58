"""The CUDA paths: run only where a GPU is present (skipped with the reason elsewhere).

No GPU is available to the developers; these tests are what a machine with one
runs to check the event timing, L2 flush, graph replay, NVML, int8/fp8, 2:4
sparsity and NCCL paths end to end.
"""

import pytest
import torch

from accelbench.suite.suites import make_entry
from accelbench.suite.worker import run_inline

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU (CUDA not available here)")
FAST = {"min_time": 0.05, "max_time": 1.0, "min_reps": 5, "warmup": 0.01, "device": "cuda"}


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
    assert r.status in ("ok", "skipped"), r.error
    if r.status == "ok":
        assert r.details["clock"] == "cuda_event" and r.details["cache"] == "cold"
        if params.get("graph"):
            assert "graph_seconds" in r.metrics or any("graph" in w for w in r.warnings)
        assert "gpu" in r.conditions


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="all-reduce over NCCL needs 2 GPUs")
def test_allreduce_over_nccl(tmp_path):
    results = run_inline(make_entry("kernels/allreduce", {"nproc": 2, "sizes": "1M", "device": "cuda"}), tmp_path)
    assert results[0].status == "ok" and results[0].params["backend"] == "nccl"


@pytest.mark.parametrize("precision", ["fp32", "tf32", "amp_fp16", "amp_bf16"])
def test_training_on_cuda(precision):
    params = {"model": "resnet18", "batch_size": "32", "precision": precision, "warmup": 2, "num_batches": 6}
    [r] = run_inline(make_entry("train/throughput", {**params, "display_every": 3, "device": "cuda"}))
    assert r.status in ("ok", "skipped"), r.error
    if r.status == "ok":
        assert r.details["clock"] == "cuda_event" and r.metrics["peak_memory_bytes"].value > 0
