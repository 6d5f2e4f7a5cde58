"""Intel GPUs through a fake of ``torch.xpu``'s documented surface: events time the kernels where torch has
them, memory statistics, synchronisation, and the collective backend (``xccl`` from torch 2.8, else ``ccl``)."""

from __future__ import annotations

import pytest
import torch
from test_device_kinds import FakeXpu

from accelbench.devices import resolve_device
from accelbench.devices.kind import kind_of


class FakeEvent:
    """``torch.xpu.Event(enable_timing=True)``: each record reads the fake device's clock (ms)."""

    def __init__(self, owner: "FakeXpuEvents", enable_timing: bool = False) -> None:
        self.owner, self.t = owner, 0.0

    def record(self, stream: object = None) -> None:
        self.owner.calls.append("record")
        self.t = self.owner.now_ms

    def elapsed_time(self, end: "FakeEvent") -> float:
        return end.t - self.t


class FakeXpuEvents(FakeXpu):
    def __init__(self) -> None:
        super().__init__()
        self.now_ms = 0.0

    def Event(self, enable_timing: bool = False) -> FakeEvent:  # noqa: N802 (torch's name)
        return FakeEvent(self, enable_timing)


def test_kernels_are_timed_with_xpu_events(monkeypatch: pytest.MonkeyPatch) -> None:
    from accelbench.measure.timer import Timer, TimerConfig

    fake = FakeXpuEvents()
    monkeypatch.setattr(torch, "xpu", fake, raising=False)
    device = resolve_device("xpu")
    kind = kind_of(device)

    def kernel() -> None:
        fake.now_ms += 2.0  # each call takes 2 ms of device time

    assert kind.event_timing and kind.clock_name(device) == "xpu_event"
    assert kind.time_events(kernel, device, reps=3, flush=None, calls=2) == pytest.approx([0.002] * 3)
    assert kind.time_burst(kernel, device, 5, clock=lambda: 0) == pytest.approx(0.002)
    m = Timer(kernel, device, TimerConfig(warmup_seconds=0, min_reps=3, min_time=0, max_time=0.05)).measure()
    assert m.clock == "xpu_event" and m.median == pytest.approx(0.002)
    assert "record" in fake.calls and "synchronize" in fake.calls  # one wait after the samples


def test_peak_memory_and_its_reset_come_from_torch_xpu(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeXpu()
    monkeypatch.setattr(torch, "xpu", fake, raising=False)
    device = resolve_device("xpu")
    kind = kind_of(device)
    assert not kind.event_timing  # a torch without torch.xpu.Event: the host clock around a wait
    assert kind.reset_peak_memory(device) == 100 and kind.peak_memory(device) == 100 + 4096
    kind.synchronize(device)
    kind.release_memory(device)
    assert fake.calls == ["synchronize", "empty_cache"]
    assert kind.memory_method() == "torch.xpu.max_memory_allocated"


def test_the_collective_backend_is_xccl_from_torch_2_8_and_ccl_before(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch.distributed as dist

    kind = kind_of("xpu")
    monkeypatch.setattr(dist, "is_xccl_available", lambda: True, raising=False)
    assert kind.dist_backend == "xccl"
    monkeypatch.delattr(dist, "is_xccl_available")
    assert kind.dist_backend == "ccl"  # Intel's oneccl_bindings_for_pytorch registers it


def test_tf32_is_one_rule_for_every_kind_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeXpu()
    monkeypatch.setattr(torch, "xpu", fake, raising=False)
    xpu = resolve_device("xpu")
    cpu = torch.device("cpu")
    assert kind_of(cpu).unsupported(cpu, "tf32") == "tf32 is an NVIDIA Tensor Core mode; the cpu device has no tf32"
    assert kind_of(cpu).unsupported(cpu, "int8") is None and kind_of(cpu).unsupported(cpu, "fp8") is None
    assert kind_of(xpu).unsupported(xpu, "tf32").startswith("tf32 is an NVIDIA Tensor Core mode; Intel(R) Data")
