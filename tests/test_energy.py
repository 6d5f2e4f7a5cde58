"""Energy: RAPL through a fake powercap tree, NVML through a fake module; every unavailable state said."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from accelbench.measure.energy import EnergyMeter, readable
from accelbench.system import rapl


def _zone(root: Path, name: str, path: str, uj: int, max_uj: int = 10_000_000) -> Path:
    d = root / path
    d.mkdir(parents=True)
    (d / "name").write_text(name + "\n")
    (d / "energy_uj").write_text(f"{uj}\n")
    (d / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return d


def _set(zone: Path, uj: int) -> None:
    (zone / "energy_uj").write_text(f"{uj}\n")


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_rapl_joules_per_package_and_dram_with_wrap_around(tmp_path: Path) -> None:
    pkg = _zone(tmp_path, "package-0", "intel-rapl:0", 9_000_000)
    core = _zone(tmp_path, "core", "intel-rapl:0/intel-rapl:0:0", 1_000)  # part of the package: not summed
    dram = _zone(tmp_path, "dram", "intel-rapl:0/intel-rapl:0:1", 2_000_000)
    clock = Clock()
    with EnergyMeter(powercap=tmp_path, clock=clock, period_s=60) as meter:
        clock.t += 4.0
        _set(pkg, 1_000_000)  # wrapped at 10 J: 9 -> 10 -> 1 is 2 J
        _set(core, 900_000)
        _set(dram, 2_500_000)
    r = meter.reading
    assert r is not None and r.seconds == pytest.approx(4.0)
    assert set(r.domains) == {"package-0", "dram-0"}
    assert r.domains["package-0"]["joules"] == pytest.approx(2.0)
    assert r.domains["package-0"]["watts"] == pytest.approx(0.5)
    assert r.domains["dram-0"]["joules"] == pytest.approx(0.5)
    assert r.joules == pytest.approx(2.5) and "not MLPerf Power" in r.to_dict()["note"]


def test_no_powercap_no_zone_and_no_permission_are_said_not_guessed(tmp_path: Path, monkeypatch) -> None:
    assert rapl.zones(tmp_path / "absent") == ([], rapl.NO_POWERCAP)
    assert rapl.zones(tmp_path) == ([], rapl.NO_ZONE)
    _zone(tmp_path, "package-0", "intel-rapl:0", 5)

    def denied(self: Path) -> str:
        if self.name == "energy_uj":
            raise PermissionError(13, "Permission denied")
        return Path.read_bytes(self).decode()

    monkeypatch.setattr(Path, "read_text", denied)
    assert rapl.zones(tmp_path) == ([], rapl.PERMISSION)
    with EnergyMeter(powercap=tmp_path) as meter:
        pass
    assert meter.reading is not None
    assert meter.reading.domains == {"cpu": {"status": "unavailable: permission (root needed since Linux 5.10)"}}
    assert meter.reading.joules is None  # nothing measured: no figure at all


class FakeNvml:
    """A GPU whose energy counter advances at ``watts`` on the test's clock, or one without the counter."""

    def __init__(self, clock: Clock, watts: float, counter: bool = True) -> None:
        self.clock, self.watts, self.counter = clock, watts, counter

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        return "h0"

    nvmlDeviceGetHandleByIndex = nvmlDeviceGetHandleByUUID

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:
        if not self.counter:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return int(self.clock.t * self.watts * 1000)  # mJ

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:
        return int(self.watts * 1000)  # mW


def test_the_nvml_counter_gives_joules_and_a_short_window_is_approximate(tmp_path: Path) -> None:
    clock = Clock()
    with EnergyMeter([0], powercap=tmp_path / "none", nvml=FakeNvml(clock, 250.0), clock=clock, period_s=60) as m:
        clock.t += 8.0
    gpu = m.reading.domains["gpu0"]
    assert gpu["status"] == "measured" and gpu["method"] == "NVML total energy counter"
    assert gpu["joules"] == pytest.approx(2000.0) and gpu["watts"] == pytest.approx(250.0)
    assert "approximate" not in gpu
    assert m.reading.domains["cpu"]["status"] == rapl.NO_POWERCAP
    with EnergyMeter([0], powercap=tmp_path / "none", nvml=FakeNvml(clock, 250.0), clock=clock, period_s=60) as m:
        clock.t += 0.3
    assert "updates about every 100 ms" in m.reading.domains["gpu0"]["approximate"]


def test_without_the_counter_board_power_is_sampled_and_integrated_and_labelled(tmp_path: Path) -> None:
    clock = Clock()
    fake = FakeNvml(clock, 100.0, counter=False)
    meter = EnergyMeter([0], powercap=tmp_path / "none", nvml=fake, clock=clock, period_s=60)
    with meter:
        for _ in range(4):  # the sampler's polls, driven by the test instead of a sleeping thread
            clock.t += 0.5
            meter._domains[0].poll(clock.t)
    gpu = meter.reading.domains["gpu0"]
    assert gpu["joules"] == pytest.approx(200.0) and "sampled" in gpu["method"]
    assert "counter not supported" in gpu["method"]


def test_a_crash_inside_the_window_leaves_no_thread_and_a_readable_meter(tmp_path: Path) -> None:
    _zone(tmp_path, "package-0", "intel-rapl:0", 1_000)
    before = threading.active_count()
    with pytest.raises(ZeroDivisionError):
        with EnergyMeter(powercap=tmp_path, period_s=0.01) as meter:
            threading.Event().wait(0.05)  # the sampler polls a few times
            _ = 1 / 0
    assert threading.active_count() == before
    assert meter.reading is not None and meter.reading.domains["package-0"]["status"] == "measured"


def test_this_machine_says_what_it_can_read() -> None:
    domains = readable()
    assert domains  # at least the CPU says something
    for name, state in domains.items():
        assert state.startswith(("readable: ", "unavailable: ")), (name, state)
    if not rapl.POWERCAP.is_dir():
        assert domains["cpu"] == rapl.NO_POWERCAP


def test_every_measured_window_carries_its_energy_and_the_figures_per_sample(tmp_path: Path, monkeypatch) -> None:
    """The conditions monitor every family opens meters the window; the figures divide by the measured rate."""
    from accelbench.cost.figures import energy
    from accelbench.measure.conditions import ConditionsMonitor
    from accelbench.results.record import Metric, Result

    _zone(tmp_path, "package-0", "intel-rapl:0", 0, max_uj=2**40)
    monkeypatch.setattr(rapl, "POWERCAP", tmp_path)
    clock = {"t": 0.0}
    monkeypatch.setattr(rapl.Zone, "read_joules", lambda self: clock["t"] * 40.0)  # a 40 W package
    with ConditionsMonitor(threads=1) as monitor:
        clock["t"] = 2.0
    reading = monitor.conditions.energy
    assert reading["joules"] == pytest.approx(80.0) and reading["domains"]["package-0"]["status"] == "measured"

    r = Result(
        "train/throughput",
        {"model": "resnet50"},
        metrics={"throughput": Metric(value=200.0, unit="images/s", higher_is_better=True, ci95=(190.0, 210.0))},
        conditions={"energy": {"joules": 80.0, "seconds": 2.0}},
    )
    figs = energy(r, ("throughput",))
    assert figs["average_watts"].value == pytest.approx(40.0)
    assert figs["joules_per_sample"].value == pytest.approx(0.2) and figs["joules_per_sample"].unit == "J per image"
    assert figs["work_per_joule"].value == pytest.approx(5.0) and figs["work_per_joule"].unit == "images/J"
    assert figs["joules_per_sample"].ci95 == pytest.approx((40 / 210, 40 / 190))
    server = Result("infer/loadgen", {}, metrics={"queries_per_second": Metric(value=50.0, unit="queries/s",
                    higher_is_better=True)}, conditions={"energy": {"joules": 80.0, "seconds": 2.0}})  # fmt: skip
    assert energy(server, ("throughput", "queries_per_second"))["millijoules_per_query"].value == pytest.approx(800)
    tta = Result("tta/time_to_target", {}, metrics={"time_to_target_seconds": Metric(value=30.0, unit="s",
                 higher_is_better=False)}, conditions={"energy": {"joules": 80.0, "seconds": 2.0}})  # fmt: skip
    assert energy(tta, ("time_to_target_seconds",))["energy_to_target_joules"].value == pytest.approx(1200)
    single = Result("infer/loadgen", {}, metrics={"latency_p90_seconds": Metric(value=0.01, unit="s",
                    higher_is_better=False)}, details={"queries": 400}, conditions={"energy": {"joules": 80.0,
                    "seconds": 2.0}})  # fmt: skip
    assert energy(single, ("throughput", "queries_per_second"))["millijoules_per_query"].value == pytest.approx(200)
    unmeasured = Result(
        "train/throughput", {}, metrics=r.metrics, conditions={"energy": {"joules": None, "seconds": 2}}
    )
    assert energy(unmeasured, ("throughput",)) == {}  # nothing measured: no figure, never a TDP


def test_compare_puts_work_per_joule_beside_performance() -> None:
    from accelbench.results.compare import compare
    from accelbench.results.record import Metric, Result

    def rec(run: str, rate: float, per_joule: float) -> Result:
        return Result(
            "train/throughput",
            {"model": "resnet50"},
            metrics={
                "throughput": Metric(
                    value=rate, unit="images/s", higher_is_better=True, ci95=(rate * 0.99, rate * 1.01)
                ),
                "work_per_joule": Metric(value=per_joule, unit="images/J", higher_is_better=True),
            },
            primary_metric="throughput",
            run_id=run,
        )

    [row] = compare([rec("a", 1000, 4.0)], [rec("b", 1500, 3.0)]).rows
    assert row.speedup == pytest.approx(1.5) and row.efficiency_speedup("per J") == pytest.approx(0.75)
    assert row.efficiency_speedup("per $") is None  # no price on either side: no column


def test_idle_power_is_measured_only_where_something_is_readable(tmp_path: Path, monkeypatch) -> None:
    from accelbench.measure.energy import idle_watts

    assert idle_watts(powercap=tmp_path / "none", seconds=0.01) is None  # nothing readable: no wait, no figure
    _zone(tmp_path, "package-0", "intel-rapl:0", 0, max_uj=2**40)
    clock = {"t": 0.0}

    def read(self: rapl.Zone) -> float:
        clock["t"] += 0.5
        return clock["t"] * 12.0

    monkeypatch.setattr(rapl.Zone, "read_joules", read)
    idle = idle_watts(powercap=tmp_path, seconds=0.05)
    assert idle is not None and set(idle) == {"package-0"} and idle["package-0"] > 0
