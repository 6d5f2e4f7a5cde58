"""What serving, the kernels, the spec table, the profile and ``accelbench system`` ask a device's kind, answered
through fakes of ``torch.cuda``'s documented surface (no GPU here) and through a kind of the test's own."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator

import pytest
import torch
from conftest import run_cli

from accelbench.devices.kind import DeviceKind, by_name, kind_of, register, unregister
from accelbench.errors import BenchmarkSkipped, UsageError

CUDA1 = torch.device("cuda", 1)  # a device object needs no GPU
META = torch.device("meta", 0)


class SeamKind(DeviceKind):
    """An accelerator of the test's own, on torch's ``meta`` type (no other kind claims it)."""

    name = "seamtest"
    torch_type = "meta"
    vendor = "Seam Test Vendor"
    accelerator = True

    def __init__(self) -> None:
        self.calls: list[str] = []

    def count(self) -> int:
        return 2

    def label(self, device: torch.device) -> str:
        return "NVIDIA H100 80GB HBM3"  # a name the spec table knows: the lookup goes through the kind

    def total_memory(self, device: torch.device) -> int | None:
        return 80 * 2**30

    def serving_stream(self, device: torch.device) -> Any:
        return "stream"

    def serving_batch(self, device: torch.device, stream: Any) -> Any:
        from contextlib import contextmanager

        @contextmanager
        def batch() -> Iterator[None]:
            self.calls.append(f"wait on {stream}")
            yield
            self.calls.append(f"synchronize {stream}")

        return batch()


@pytest.fixture
def seam() -> Iterator[SeamKind]:
    kind = register(SeamKind())
    try:
        yield kind
    finally:
        unregister(kind.name)


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Two NVIDIA GPUs as ``torch.cuda`` describes them; ``state`` changes what they answer."""
    state: dict[str, Any] = {"capability": (9, 0), "calls": []}
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: state["capability"])
    props = SimpleNamespace(
        name="NVIDIA H100 80GB HBM3", total_memory=85 * 10**9, multi_processor_count=132, major=9, minor=0
    )
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d=None: props)
    return state


# -- kernels: which library path, or why not ---------------------------------------------------------------


def test_int8_gemm_shape_rule_is_the_cuda_kinds(fake_cuda: dict[str, Any]) -> None:
    from accelbench.kernels.gemm import low_precision_reason
    from accelbench.kernels.specs import GemmParams

    small = GemmParams(m=16, n=64, k=64, precision="int8")
    assert "M > 16 and K, N multiples of 8" in low_precision_reason(small, CUDA1)
    assert low_precision_reason(GemmParams(m=32, n=64, k=60, precision="int8"), CUDA1) is not None
    assert low_precision_reason(GemmParams(m=32, n=64, k=64, precision="int8"), CUDA1) is None
    assert low_precision_reason(small, torch.device("cpu")) is None  # torch's CPU kernel takes any shape
    assert kind_of("cpu").int8_gemm_reason(16, 3, 5) is None


def test_semi_structured_sparsity_asks_the_kind(fake_cuda: dict[str, Any]) -> None:
    from accelbench.kernels.sparse import setup_reason
    from accelbench.kernels.specs import SparseParams

    p = SparseParams(m=64, n=8, k=64, density=0.5, format="semi24", precision="fp16")
    assert setup_reason(p, CUDA1) is None
    fake_cuda["capability"] = (7, 5)  # Turing: no 2:4 sparse Tensor Cores
    assert "compute capability 8.0+" in setup_reason(p, CUDA1)
    assert "NVIDIA GPUs (Ampere+) only" in setup_reason(p, torch.device("cpu"))
    fake_cuda["capability"] = (8, 0)
    assert "not fp32" in setup_reason(SparseParams(format="semi24", density=0.5, precision="fp32"), CUDA1)


def test_the_attention_kernel_is_named_by_the_cuda_kinds_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch.backends.cuda as tbc

    from accelbench.kernels.attention import _backend

    usable = {"flash": True, "efficient": True}
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(tbc, "SDPAParams", lambda *args: args)
    monkeypatch.setattr(tbc, "can_use_flash_attention", lambda p: usable["flash"])
    monkeypatch.setattr(tbc, "can_use_efficient_attention", lambda p: usable["efficient"])
    q = SimpleNamespace(device=CUDA1)
    assert _backend(q, causal=True) == "flash"  # type: ignore[arg-type]
    usable["flash"] = False
    assert _backend(q, causal=True) == "memory-efficient"  # type: ignore[arg-type]
    usable["efficient"] = False
    assert _backend(q, causal=False) == "math"  # type: ignore[arg-type]

    def other_signature(*args: object) -> None:
        raise TypeError("SDPAParams takes 8 arguments")

    monkeypatch.setattr(tbc, "SDPAParams", other_signature)
    assert _backend(q, causal=False) == "unknown"  # type: ignore[arg-type]
    assert _backend(torch.zeros(1, 1, 2, 2), causal=False) == "cpu (flash-attention CPU kernel or math)"


def test_nccl_needs_a_kind_whose_ranks_join_nccl() -> None:
    from accelbench.kernels.specs import AllreduceParams

    with pytest.raises(UsageError, match="nccl backend needs NVIDIA or AMD GPUs, not cpu; use --backend gloo"):
        AllreduceParams(nproc=1, nnodes=2, backend="nccl").check_environment("cpu")
    AllreduceParams(nproc=1, nnodes=2, backend="gloo").check_environment("cpu")


# -- serving ------------------------------------------------------------------------------------------------


class FakeStream:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def wait_stream(self, other: object) -> None:
        self.log.append(f"wait_stream {other}")

    def synchronize(self) -> None:
        self.log.append("synchronize")


def test_a_cuda_serving_worker_runs_each_batch_on_its_own_stream(
    monkeypatch: pytest.MonkeyPatch, fake_cuda: dict[str, Any]
) -> None:
    from contextlib import contextmanager

    log: list[str] = []
    monkeypatch.setattr(torch.cuda, "Stream", lambda device: FakeStream(log))
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device: f"current {device}")

    @contextmanager
    def on(stream: object) -> Iterator[None]:
        log.append("enter")
        yield
        log.append("exit")

    monkeypatch.setattr(torch.cuda, "stream", on)
    kind = kind_of(CUDA1)
    stream = kind.serving_stream(CUDA1)
    with kind.serving_batch(CUDA1, stream):
        log.append("batch")
    # the caller's copy first, the batch on the worker's stream, the answer complete before it is handed on
    assert log == ["wait_stream current cuda:1", "enter", "batch", "exit", "synchronize"]
    assert kind_of("cpu").serving_stream(torch.device("cpu")) is None


def test_the_torch_backend_serves_through_the_kinds_stream(seam: SeamKind, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kind with its own queues gets each batch run through :meth:`DeviceKind.serving_batch`."""
    from contextlib import nullcontext

    from accelbench.infer.backends import TorchEager

    monkeypatch.setattr(torch, "autocast", lambda *args, **kwargs: nullcontext())  # torch has none for meta

    class Served:
        def forward(self, model: Any, inputs: Any) -> Any:
            seam.calls.append("forward")
            return model(*inputs)

    predict = TorchEager().load(Served(), torch.nn.Identity(), META, "fp32", [])
    predict((torch.ones(2, device="meta"),))
    assert seam.calls == ["wait on stream", "forward", "synchronize stream"]


def test_backends_declare_the_kinds_they_serve_on(seam: SeamKind) -> None:
    from accelbench.infer.catalog import BACKENDS

    torch_backend, onnx, trt = BACKENDS["torch"](), BACKENDS["onnxruntime"](), BACKENDS["tensorrt"]()
    assert torch_backend.unsupported_on(seam) is None and torch_backend.unsupported_on("cpu") is None
    assert onnx.unsupported_on("cpu") is None and onnx.unsupported_on(CUDA1) is None
    assert onnx.unsupported_on(by_name("rocm")) == (
        "backend onnxruntime serves on cpu or cuda, not rocm: pick another --backend"
    )
    assert trt.unsupported_on(torch.device("cpu")) == "backend tensorrt serves on cuda, not cpu: pick another --backend"
    assert "serves on cuda, not seamtest" in trt.unsupported_on(META)


def test_onnx_runtime_providers_come_from_the_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    from accelbench.infer.onnxrt import OnnxRuntimeInt8, session_providers

    cpu = torch.device("cpu")
    assert OnnxRuntimeInt8().providers(["CPUExecutionProvider"], cpu, "int8", [], 8) == ["CPUExecutionProvider"]
    available = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    [(trt, options), _] = OnnxRuntimeInt8().providers(available, CUDA1, "int8", [(3, 8, 8)], 8)
    assert trt == "TensorrtExecutionProvider" and options["trt_profile_max_shapes"] == "input_0:8x3x8x8"
    monkeypatch.setattr(torch.version, "hip", "6.2.41133")  # an AMD GPU: ONNX Runtime's CUDA provider is NVIDIA's
    with pytest.raises(BenchmarkSkipped, match="no execution provider wired for rocm"):
        session_providers(available, CUDA1, int8=False)


def test_serving_nproc_counts_the_kinds_devices(fake_cuda: dict[str, Any], seam: SeamKind) -> None:
    from accelbench.infer.specs import InferParams

    with pytest.raises(UsageError, match="a CPU is one: --nproc 2"):
        InferParams(nproc=2).check_environment("cpu")
    InferParams(nproc=2).check_environment("cuda")
    with pytest.raises(UsageError, match="--nproc 3 needs 3 GPUs; this machine has 2"):
        InferParams(nproc=3).check_environment("cuda")
    InferParams(nproc=2).check_environment("meta")  # the test's kind has two devices


# -- the machine: spec table, profile, accelbench system, instance matching -----------------------------------


def test_peak_figures_are_looked_up_by_the_kinds_name_for_the_device(seam: SeamKind) -> None:
    from accelbench.system.specs import bandwidth_peak_for, peak_for

    peak = peak_for(META, "fp16")
    assert peak is not None and peak.source.startswith("NVIDIA H100 SXM")
    assert bandwidth_peak_for(META) is not None and bandwidth_peak_for(torch.device("cpu")) is None


def test_the_profile_lists_every_kind_and_keeps_the_cuda_fields(
    monkeypatch: pytest.MonkeyPatch, fake_cuda: dict[str, Any]
) -> None:
    from accelbench.system import nvidia
    from accelbench.system.profile import device_kinds

    monkeypatch.setattr(nvidia, "device_facts", lambda i: {"driver": "550.54", "power_limit_w": 700.0 + i})
    monkeypatch.setattr(nvidia, "topology", lambda: "GPU0 X NV18")
    found, accelerators = device_kinds()
    by_kind = {f["kind"]: f for f in found}
    assert by_kind["cuda"] == {"kind": "cuda", "vendor": "NVIDIA", "devices": 2, "unavailable": None}
    assert by_kind["rocm"]["unavailable"] == "this torch is not a HIP (ROCm) build" and by_kind["rocm"]["devices"] == 0
    assert by_kind["cpu"]["devices"] == 1 and {"xpu", "mps"} <= set(by_kind)
    assert [a["index"] for a in accelerators] == [0, 1]
    first = accelerators[0]
    assert first["name"] == "NVIDIA H100 80GB HBM3" and first["memory_bytes"] == 85 * 10**9
    assert first["multiprocessors"] == 132 and first["compute_capability"] == "9.0"
    assert first["driver"] == "550.54" and accelerators[1]["power_limit_w"] == 701.0  # NVML by the monitored index
    assert first["kind"] == "cuda" and first["vendor"] == "NVIDIA" and first["topology"] == "GPU0 X NV18"


def test_accelbench_system_lists_every_kind_with_why_it_is_unavailable(
    cli_env: dict[str, str], tmp_path: Path, seam: SeamKind
) -> None:
    p = run_cli(["system", "--json"], cli_env, tmp_path)
    assert p.returncode == 0, p.stderr
    prof = json.loads(p.stdout)
    kinds = {f["kind"]: f for f in prof["device_kinds"]}
    assert {"cpu", "cuda", "rocm", "xpu", "mps", "seamtest"} <= set(kinds)
    assert kinds["seamtest"] == {"kind": "seamtest", "vendor": "Seam Test Vendor", "devices": 2, "unavailable": None}
    mine = [a for a in prof["accelerators"] if a["kind"] == "seamtest"]
    assert [(a["index"], a["name"], a["memory_bytes"]) for a in mine] == [
        (i, "NVIDIA H100 80GB HBM3", 80 * 2**30) for i in range(2)
    ]
    table = run_cli(["system"], cli_env, tmp_path).stdout
    assert "kind seamtest (Seam Test Vendor)" in table and "2 device(s)" in table
    assert "seamtest:1" in table and "kind cpu" in table
    for name in ("cuda", "rocm", "xpu", "mps"):
        why = kinds[name]["unavailable"]
        if why:  # each kind this machine lacks says why, in the table too
            assert f"unavailable: {why}" in " ".join(table.split()), name


def test_an_instance_is_matched_against_every_kinds_devices(fake_cuda: dict[str, Any]) -> None:
    from accelbench.cost.match import measured

    run = measured("cuda")
    assert run.device_type == "cuda" and run.accelerators == (("NVIDIA H100 80GB HBM3", 85 * 10**9),) * 2


def test_gpu_is_answered_with_a_gpu_kind_of_the_choices() -> None:
    from accelbench.params import check_choice

    with pytest.raises(UsageError, match="did you mean cuda"):
        check_choice("device", "gpu", ("cpu", "cuda"))
    with pytest.raises(UsageError, match="did you mean xpu"):
        check_choice("device", "GPU", ("cpu", "xpu"))
    with pytest.raises(UsageError, match="did you mean cpu"):  # no GPU kind to offer: the nearest spelling
        check_choice("device", "gpu", ("cpu", "auto"))
