"""The logic of the CUDA paths, run on the CPU through small fakes of the APIs (issue: right on the first GPU).

What only a GPU can show (events against wall time, cuda:N streams, NCCL) is in test_cuda.py; here the
decisions are ours: which ONNX Runtime provider may produce a GPU figure, how calls are grouped per CUDA
event pair, which precision a GPU without native bf16 trains in, the math mode every family sets, and how
the automatic batch search keeps a margin and honours a cap.
"""

from __future__ import annotations

import pytest
import torch

from accelbench.errors import BenchmarkSkipped, UsageError
from accelbench.infer.onnxrt import check_session_provider, session_providers, tensorrt_providers
from accelbench.measure.timer import TimerConfig, calls_per_sample
from accelbench.suite.suites import make_entry
from accelbench.suite.worker import run_inline
from accelbench.train.autobatch import Search, does_not_fit, with_margin

CUDA1 = torch.device("cuda", 1)  # a device object needs no GPU


def test_onnx_runtime_on_a_gpu_only_from_the_gpu_provider():
    assert session_providers(["CPUExecutionProvider"], torch.device("cpu"), int8=False) == ["CPUExecutionProvider"]
    assert session_providers(["CUDAExecutionProvider", "CPUExecutionProvider"], CUDA1, int8=False) == [
        ("CUDAExecutionProvider", {"device_id": 1})
    ]
    with pytest.raises(BenchmarkSkipped, match=r"no CUDA provider.*accelbench\[onnx-gpu\]"):
        session_providers(["CPUExecutionProvider"], CUDA1, int8=False)
    with pytest.raises(BenchmarkSkipped, match="TensorRT provider"):  # CUDA's provider runs QDQ in float
        session_providers(["CUDAExecutionProvider", "CPUExecutionProvider"], CUDA1, int8=True)
    trt = session_providers(["TensorrtExecutionProvider", "CUDAExecutionProvider"], CUDA1, int8=True)
    assert trt[0][0] == "TensorrtExecutionProvider" and trt[0][1]["trt_int8_enable"] is True


def test_tensorrt_is_asked_first_with_one_shape_profile_and_a_shared_engine_cache(tmp_path):
    available = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    [(trt, options), (cuda, _)] = tensorrt_providers(available, 1, "fp16", [(3, 224, 224)], 16, tmp_path)
    assert (trt, cuda) == ("TensorrtExecutionProvider", "CUDAExecutionProvider")
    assert options["device_id"] == 1 and options["trt_fp16_enable"] and not options["trt_int8_enable"]
    # batch 1 to 16, built once for the SUT's batches instead of once per batch size inside the timed run
    assert options["trt_profile_min_shapes"] == "input_0:1x3x224x224"
    assert options["trt_profile_max_shapes"] == options["trt_profile_opt_shapes"] == "input_0:16x3x224x224"
    assert options["trt_engine_cache_path"] == str(tmp_path / "tensorrt")
    with pytest.raises(BenchmarkSkipped, match="needs ONNX Runtime's TensorRT provider.*tensorrt"):
        tensorrt_providers(["CUDAExecutionProvider", "CPUExecutionProvider"], 0, "fp32", [], 0, None)
    wanted = tensorrt_providers(available, 0, "fp32", [], 0, None)
    with pytest.raises(BenchmarkSkipped, match="could not start TensorrtExecutionProvider"):
        check_session_provider(FakeSession(["CUDAExecutionProvider", "CPUExecutionProvider"]), wanted)


def test_the_tensorrt_backend_is_refused_off_an_nvidia_gpu():
    from accelbench.infer.specs import InferParams

    with pytest.raises(UsageError, match="backend tensorrt serves on cuda, not cpu"):
        InferParams(backend="tensorrt").check_environment("cpu")


class FakeSession:
    def __init__(self, running: list[str]) -> None:
        self.running = running

    def get_providers(self) -> list[str]:
        return self.running


def test_a_silent_fallback_to_the_cpu_provider_is_refused():
    wanted = [("CUDAExecutionProvider", {"device_id": 0})]
    assert check_session_provider(FakeSession(["CUDAExecutionProvider", "CPUExecutionProvider"]), wanted) == (
        "CUDAExecutionProvider"
    )
    with pytest.raises(BenchmarkSkipped, match="could not start CUDAExecutionProvider"):
        check_session_provider(FakeSession(["CPUExecutionProvider"]), wanted)


def test_hot_cache_groups_microsecond_kernels_per_event_pair_and_cold_never_does():
    hot, cold = TimerConfig(cache="hot"), TimerConfig(cache="cold")
    assert calls_per_sample(2e-6, hot) == 10  # 20 us per sample
    assert calls_per_sample(1e-3, hot) == 1
    assert calls_per_sample(2e-6, cold) == 1  # each call after its own L2 flush


def test_auto_precision_falls_back_to_fp16_where_bf16_is_not_native(monkeypatch):
    from accelbench.devices import precision
    from accelbench.tta.loop import precision_of
    from accelbench.tta.recipes import recipe
    from accelbench.tta.specs import TtaParams

    monkeypatch.setattr(precision, "unsupported_reason", lambda d, p: "no bf16 (7.0)" if p == "bf16" else None)
    imagenet = recipe("imagenet")
    assert imagenet.gpu_precision == "amp_bf16"
    assert precision_of(TtaParams(workload="digits"), imagenet, torch.device("cuda")) == "amp_fp16"
    assert precision.precision_reason(torch.device("cuda"), "amp_bf16") == "no bf16 (7.0)"
    monkeypatch.setattr(precision, "unsupported_reason", lambda d, p: None)
    assert precision_of(TtaParams(workload="digits"), imagenet, torch.device("cuda")) == "amp_bf16"


@pytest.mark.parametrize("prec, tf32", [("fp32", False), ("tf32", True), ("amp_bf16", False)])
def test_one_place_sets_the_math_mode_from_the_precision(prec, tf32):
    """cuDNN allows TF32 by default: fp32 must switch it off, for every family (these flags exist on a CPU)."""
    from accelbench.devices.precision import set_numeric_mode

    torch.backends.cudnn.allow_tf32 = not tf32
    mode = set_numeric_mode(torch.device("cpu"), prec)
    assert torch.backends.cudnn.allow_tf32 is tf32 and torch.backends.cuda.matmul.allow_tf32 is tf32
    assert mode == {"tf32": tf32, "cudnn_benchmark": False}  # autotuning is a CUDA matter
    torch.backends.cudnn.allow_tf32 = True


def test_near_the_limit_library_errors_count_as_does_not_fit():
    assert does_not_fit(RuntimeError("cuDNN error: CUDNN_STATUS_INTERNAL_ERROR"))
    assert does_not_fit(RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate"))
    assert does_not_fit(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert not does_not_fit(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))


def test_the_measured_batch_keeps_a_margin_below_the_memory_edge():
    assert [with_margin(b) for b in (1, 7, 16, 100, 512)] == [1, 6, 14, 88, 456]
    s = Search(batch=456, largest_fitting=512, limit=65536, memory_bound=True)
    assert "512 fit" in s.summary()["reason"]
    assert Search(512, 512, 512, False).summary()["reason"] == "the cap of 512 (--max-batch-size) fits"


def test_auto_batch_stops_at_the_published_cap():
    """The standard suite asks for at most the published batch: where it fits, that batch runs."""
    params = {"model": "ncf", "scale": "tiny", "warmup": 1, "num_batches": 2, "threads": 2, "device": "cpu"}
    [r] = run_inline(make_entry("train/throughput", params | {"batch_size": "auto", "max_batch_size": 48}))
    assert r.status == "ok", r.error
    assert r.params["batch_size"] == 48 and r.details["auto_batch"]["reason"].startswith("the cap of 48")
    assert max(t["batch_size"] for t in r.details["auto_batch_trials"]) == 48


class FakeNvml:
    """pynvml's surface that the conditions monitor reads: clocks at the end, violation counters around."""

    NVML_PERF_POLICY_POWER, NVML_PERF_POLICY_THERMAL = 0, 1
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, power_ns_per_read: int) -> None:
        self.reads = 0
        self.step = power_ns_per_read

    def nvmlDeviceGetHandleByIndex(self, index):  # noqa: N802 - NVML's names
        return index

    def nvmlDeviceGetHandleByUUID(self, uuid):  # noqa: N802
        raise RuntimeError("no such uuid")

    def nvmlDeviceGetViolationStatus(self, handle, policy):  # noqa: N802
        class Violation:
            violationTime = (self.reads // 2) * self.step if policy == 0 else 0

        self.reads += 1
        return Violation()

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):  # noqa: N802
        return 0x1  # idle after the final synchronisation: the snapshot sees no slowdown

    def nvmlDeviceGetClockInfo(self, handle, clock):  # noqa: N802
        return 1980

    def nvmlDeviceGetTemperature(self, handle, sensor):  # noqa: N802
        return 60

    def nvmlDeviceGetPowerUsage(self, handle):  # noqa: N802
        return 300_000


@pytest.mark.parametrize("held_ns, warned", [(0, False), (10**12, True)])
def test_throttling_during_the_window_comes_from_the_violation_counters(monkeypatch, held_ns, warned):
    """The clock-event snapshot after the run sees an idle GPU; the counters' difference sees the power cap."""
    from accelbench.devices import nvml
    from accelbench.measure.conditions import ConditionsMonitor

    fake = FakeNvml(held_ns)
    monkeypatch.setattr(nvml, "load", lambda: fake)  # NVIDIA GPUs' reader in the device seam
    with ConditionsMonitor(threads=1, gpu_index=0) as monitor:
        pass
    gpu = monitor.conditions.gpu
    assert gpu["throttle_reasons"] == [] and set(gpu["throttled_fraction"]) == {"power", "thermal"}
    assert gpu["throttled_fraction"]["thermal"] == 0
    assert (gpu["throttled_fraction"]["power"] == 1.0) is warned
    assert any("power limit held the clocks down" in w for w in monitor.conditions.warnings) is warned


def test_cifar_crops_are_one_gather_equal_to_the_per_image_windows():
    """The augmentation runs where the staged data is (the GPU): no Python loop over the batch, same crops."""
    from accelbench.tta.recipes.cifar import Cifar10, _crop

    g = torch.Generator().manual_seed(0)
    padded = torch.randn(6, 3, 40, 40, generator=g)
    dy, dx = torch.randint(0, 9, (2, 6), generator=g)
    expected = torch.stack([padded[i, :, y : y + 32, x : x + 32] for i, (y, x) in enumerate(zip(dy, dx, strict=True))])
    assert torch.equal(_crop(padded, dy, dx), expected)
    x = torch.rand(5, 3, 32, 32)
    a, b = (Cifar10().augment(x, torch.Generator().manual_seed(3)) for _ in range(2))
    assert a.shape == x.shape and torch.equal(a, b)  # the seed decides the augmentation, wherever it runs
    assert (a == 0).flatten(1).sum(1).min() >= 3 * 4 * 4  # each image has its cutout (at least a corner of it)


def test_out_of_memory_in_its_cpu_spellings():
    from accelbench.train.loop import is_oom

    cpu = "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: you tried 9 GB"
    assert is_oom(RuntimeError(cpu)) and is_oom(MemoryError()) and not is_oom(RuntimeError("shape mismatch"))


def test_a_trial_predicted_over_the_cap_is_not_run():
    """On a CPU, a trial over the memory cap would wake the OOM killer before the cap could be checked."""
    from accelbench.train.autobatch import predict_peak

    trials = [{"batch_size": 64, "fits": True, "peak_memory_bytes": 3_000}, {"batch_size": 128, "fits": False}]
    assert predict_peak([], 1_000, 128) is None
    assert predict_peak(trials, 1_000, 256) == 1_000 + 2_000 * 4  # growth scales with the batch


def test_more_ranks_than_gpus_is_skipped_before_any_gpu_is_opened(monkeypatch):
    """Two ranks on a one-GPU machine (the quick suite's all-reduce): skipped with the reason, where NVML used to
    fail on the second GPU's index before the launcher could say so."""
    from accelbench.kit.ranks import node_gpus

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(BenchmarkSkipped, match="--nproc 2 needs 2 cuda devices; this machine has 1") as skip:
        node_gpus(2, "cuda", {"device": "cuda"})
    assert skip.value.record == {"device": "cuda"}
    assert node_gpus(1, "cuda") == [0] and node_gpus(2, "cpu") == []
