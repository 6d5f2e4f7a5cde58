"""AMD GPUs' energy, clocks and throttling through a fake of amdsmi's documented Python API (ROCm/amdsmi,
py-interface/README.md), installed as ``sys.modules["amdsmi"]``: the logic under test is ours."""

from __future__ import annotations

import sys
from enum import IntEnum
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from accelbench.devices.amdsmi_reader import NOT_INSTALLED, AmdSmiReader
from accelbench.devices.rocm import RocmKind
from accelbench.measure.energy import EnergyMeter


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class FakeAmdSmi:
    """amdsmi's surface as accelbench reads it: a GPU drawing ``watts`` on the test's clock."""

    class AmdSmiClkType(IntEnum):
        GFX = 1
        MEM = 5

    class AmdSmiTemperatureType(IntEnum):
        EDGE = 0
        HOTSPOT = 1

    class AmdSmiTemperatureMetric(IntEnum):
        CURRENT = 0

    RESOLUTION = 15.3  # micro-joules per count, as the MI300 reports

    def __init__(self, clock: Clock, watts: float = 500.0, counter: bool = True) -> None:
        self.clock, self.watts, self.counter = clock, watts, counter
        self.calls: list[str] = []
        self.offset_uj = 0.0
        self.ppt = self.thermal = self.ticks = 0

    def amdsmi_init(self, flags: int = 0) -> None:
        self.calls.append("init")

    def amdsmi_shut_down(self) -> None:
        self.calls.append("shut_down")

    def amdsmi_get_processor_handles(self) -> list[str]:
        return ["gpu-a", "gpu-b"]

    def amdsmi_get_processor_handle_from_bdf(self, bdf: str) -> str:
        self.calls.append(f"bdf {bdf}")
        return {"0000:c1:00.0": "gpu-b"}[bdf]

    def amdsmi_get_energy_count(self, handle: str) -> dict[str, Any]:
        if not self.counter:
            raise RuntimeError("AMDSMI_STATUS_NOT_SUPPORTED - Feature not supported")
        uj = self.clock.t * self.watts * 1e6 - self.offset_uj
        return {"energy_accumulator": int(uj / self.RESOLUTION), "counter_resolution": self.RESOLUTION, "timestamp": 0}

    def amdsmi_get_power_info(self, handle: str) -> dict[str, Any]:
        return {"current_socket_power": "N/A", "average_socket_power": self.watts, "power_limit": 750}

    def amdsmi_get_clock_info(self, handle: str, clk_type: int) -> dict[str, Any]:
        return {"clk": 2100 if clk_type == self.AmdSmiClkType.GFX else 1300, "min_clk": 500, "max_clk": 2100}

    def amdsmi_get_temp_metric(self, handle: str, sensor: int, metric: int) -> int:
        return 61

    def amdsmi_get_gpu_metrics_info(self, handle: str) -> dict[str, Any]:
        self.ticks += 100  # the firmware's accumulation counter advances with time
        return {
            "accumulation_counter": self.ticks,
            "ppt_residency_acc": self.ppt,
            "socket_thm_residency_acc": self.thermal,
            "throttle_status": False,
        }


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeAmdSmi:
    amd = FakeAmdSmi(Clock())
    monkeypatch.setitem(sys.modules, "amdsmi", amd)
    return amd


def test_energy_over_a_window_comes_from_the_accumulator_times_its_resolution(fake: FakeAmdSmi, tmp_path: Path):
    reader = AmdSmiReader()
    with EnergyMeter([0], powercap=tmp_path / "none", reader=reader, clock=fake.clock, period_s=60) as m:
        fake.clock.t += 4.0
    gpu = m.reading.domains["gpu0"]
    assert gpu["status"] == "measured" and "amdsmi energy accumulator" in gpu["method"]
    assert gpu["joules"] == pytest.approx(2000.0, rel=1e-4) and gpu["watts"] == pytest.approx(500.0, rel=1e-4)
    assert fake.calls.count("init") == 1


def test_a_gpu_reset_restarts_the_accumulator_and_is_not_a_negative_step(fake: FakeAmdSmi, tmp_path: Path):
    meter = EnergyMeter([0], powercap=tmp_path / "none", reader=AmdSmiReader(), clock=fake.clock, period_s=60)
    with meter:
        fake.clock.t += 2.0
        meter._domains[0].poll(fake.clock.t)  # 1000 J so far
        fake.offset_uj = fake.clock.t * fake.watts * 1e6 - 50e6  # reset: the counter now reads 50 J
        fake.clock.t += 2.0  # and 1000 J more by the end
    assert meter.reading.domains["gpu0"]["joules"] == pytest.approx(1000 + 50 + 1000, rel=1e-3)


def test_without_the_counter_socket_power_is_sampled_and_integrated(fake: FakeAmdSmi, tmp_path: Path):
    fake.counter = False
    meter = EnergyMeter([0], powercap=tmp_path / "none", reader=AmdSmiReader(), clock=fake.clock, period_s=60)
    with meter:
        for _ in range(4):
            fake.clock.t += 0.5
            meter._domains[0].poll(fake.clock.t)
    gpu = meter.reading.domains["gpu0"]
    assert gpu["joules"] == pytest.approx(1000.0) and "average_socket_power" in gpu["method"]
    assert "energy counter not supported" in gpu["method"]


def test_a_missing_amdsmi_is_a_reason_not_a_crash(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setitem(sys.modules, "amdsmi", None)  # import amdsmi raises ImportError
    reader = AmdSmiReader()
    assert reader.unavailable() == NOT_INSTALLED
    with EnergyMeter([0], powercap=tmp_path / "none", reader=reader) as m:
        pass
    assert m.reading.domains["gpu0"] == {"status": f"unavailable: {NOT_INSTALLED}"}
    assert reader.conditions(0) == {} and reader.throttle_counters(0) == {}


def test_torch_devices_map_to_amdsmi_handles_by_pci_address(fake: FakeAmdSmi, monkeypatch: pytest.MonkeyPatch):
    props = SimpleNamespace(pci_domain_id=0, pci_bus_id=0xC1, pci_device_id=0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    assert AmdSmiReader().handle(0) == "gpu-b"  # torch's 0 is amdsmi's second GPU (HIP_VISIBLE_DEVICES)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: SimpleNamespace())
    assert AmdSmiReader().handle(1) == "gpu-b"  # no PCI address from torch: amdsmi's order


@pytest.mark.parametrize("power_held, warned", [(0, False), (100, True)])
def test_clocks_and_window_throttling_reach_the_conditions(fake: FakeAmdSmi, power_held: int, warned: bool):
    from accelbench.measure.conditions import ConditionsMonitor

    def metrics(handle: str) -> dict[str, Any]:
        out = FakeAmdSmi.amdsmi_get_gpu_metrics_info(fake, handle)
        fake.ppt += power_held  # PPT held the clocks for every tick since the last reading
        return out

    fake.amdsmi_get_gpu_metrics_info = metrics  # type: ignore[method-assign]
    with ConditionsMonitor(threads=1, gpu_index=0, reader=AmdSmiReader()) as monitor:
        pass
    gpu = monitor.conditions.gpu
    assert gpu["gfx_clock_mhz"] == 2100 and gpu["mem_clock_mhz"] == 1300 and gpu["temperature_c"] == 61
    assert gpu["power_w"] == 500 and gpu["power_limit_w"] == 750
    assert gpu["throttled_fraction"]["thermal"] == 0
    assert (gpu["throttled_fraction"]["power"] > 0.5) is warned
    assert any("power limit held the clocks down" in w for w in monitor.conditions.warnings) is warned


def test_the_rocm_kind_monitors_its_gpus_through_amdsmi(fake: FakeAmdSmi, monkeypatch: pytest.MonkeyPatch):
    """On a HIP build the bare indices the suite passes are read by amdsmi, not NVML."""
    from accelbench.devices import kind as kind_module
    from accelbench.devices.kind import reader_for
    from accelbench.system.specs import find_spec

    monkeypatch.setattr(torch.version, "hip", "6.2.41133")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    rocm = RocmKind()
    monkeypatch.setattr(kind_module, "_KINDS", [rocm, *[k for k in kind_module.kinds() if k.name != "rocm"]])
    gpu = torch.device("cuda", 0)
    assert rocm.monitored(gpu) == 0 and isinstance(rocm.reader(), AmdSmiReader)
    assert reader_for(gpu) is rocm.reader() and reader_for(0) is rocm.reader()
    spec = find_spec("AMD Instinct MI300X")  # the name torch reports for it
    assert spec is not None and spec.name == "AMD Instinct MI300X" and "rocm.docs.amd.com" in spec.source
    assert find_spec("AMD Instinct MI325X").name.endswith("MI325X")
    assert find_spec("AMD Instinct MI355X").name.endswith("MI355X")
