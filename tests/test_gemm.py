import pytest
import torch

from accelbench.kernels.common import relative_error
from accelbench.kernels.gemm import gemm_bytes, gemm_flops
from accelbench.suite.suites import make_entry
from accelbench.suite.worker import run_inline

FAST = {"min_time": 0.05, "max_time": 1.0, "min_reps": 6, "warmup_time": 0.01, "threads": 2, "device": "cpu"}


def test_flop_and_byte_formulas_on_a_hand_checked_case():
    # C[2x3] = A[2x4] @ B[4x3]: 6 outputs, each 4 multiplies + 4 adds (counting the first add to 0) = 48
    assert gemm_flops(2, 3, 4) == 48
    assert gemm_flops(2, 3, 4, batch=5) == 240
    # read A (8) + B (12), write C (6) = 26 elements of 4 bytes
    assert gemm_bytes(2, 3, 4, 1, 4) == 104


def test_gemm_record_has_the_named_params_and_metrics():
    [r] = run_inline(make_entry("kernels/gemm", {"m": 128, "n": 96, "k": 64, **FAST}))
    assert r.status == "ok", r.error
    for key in ("m", "n", "k", "batch", "precision", "device", "threads"):
        assert key in r.params
    assert r.params["device"] == "cpu" and r.params["threads"] == 2
    assert {"seconds", "tflops", "pct_of_peak"} <= set(r.metrics)
    s, tf = r.metrics["seconds"], r.metrics["tflops"]
    assert tf.value == pytest.approx(2 * 128 * 96 * 64 / s.value / 1e12)
    assert s.ci95[0] <= s.value <= s.ci95[1]
    assert tf.ci95[0] <= tf.value <= tf.ci95[1]
    assert r.details["peak"]["estimated"] is True
    assert r.details["relative_error"] < 1e-5
    assert r.samples and len(r.samples) == s.n
    assert "threads" in r.conditions and "other_cpu_fraction" in r.conditions


def test_batched_and_low_precision_gemm():
    [r] = run_inline(
        make_entry(
            "kernels/gemm", {"m": 64, "n": 64, "k": 64, "batch": 4, "precision": "bf16", "emulated": True, **FAST}
        )
    )
    assert r.status == "ok", r.error
    assert r.details["dtype"] == "bfloat16"
    assert r.metrics["tflops"].value == pytest.approx(2 * 64**3 * 4 / r.metrics["seconds"].value / 1e12)


def test_precision_the_device_cannot_run_is_skipped():
    [r] = run_inline(make_entry("kernels/gemm", {"m": 64, "n": 64, "k": 64, "precision": "tf32", **FAST}))
    assert r.status == "skipped" and "tf32" in r.reason


def test_relative_error_catches_a_wrong_product():
    a, b = torch.randn(32, 32), torch.randn(32, 32)
    ref = a.double() @ b.double()
    assert relative_error(a @ b, ref) < 1e-5
    assert relative_error(a @ b.t(), ref) > 0.5


def test_cuda_request_without_a_gpu_fails_clearly():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    [r] = run_inline(make_entry("kernels/gemm", {"m": 64, "n": 64, "k": 64, **FAST, "device": "cuda"}))
    assert r.status == "failed" and "CUDA is not available" in r.error
