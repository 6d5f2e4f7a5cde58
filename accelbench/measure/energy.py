"""Energy over a measured window, per domain, from the counters the hardware exposes; never an estimate.

Each GPU used is read by its kind's reader (a counter, else board power sampled and integrated, labelled so), each
CPU package and its DRAM by RAPL. A domain that cannot be read says why and no figure takes its place (not
CodeCarbon's half of the TDP). A thread polls the counters every ``period_s`` so that a wrapping counter is
followed over any window, and is joined when the window closes, whatever happened inside it (docs/cost.md)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from accelbench.devices.kind import reader_for
from accelbench.devices.nvml import NvmlReader
from accelbench.devices.readers import DeviceReader, EnergySource
from accelbench.system import rapl

NOTE = "board/package energy from on-chip counters, informative; not MLPerf Power (wall power)"


@dataclass
class _Domain:
    """One counter followed through the window: a cumulative energy (J) or a power (W) to integrate."""

    name: str
    method: str
    read: Callable[[], float]
    cumulative: bool
    wrap_j: float | None = None
    #: a decrease is a reset (the new value is the energy since it), not a wrap
    reset_on_decrease: bool = False
    #: windows shorter than ``min_window_s`` are approximate: how often the counter updates, in words
    update_note: str | None = None
    min_window_s: float = 0.0
    joules: float = 0.0
    last: float = 0.0
    last_t: float = 0.0
    samples: int = 0

    def start(self, t: float) -> None:
        self.last, self.last_t, self.samples = self.read(), t, 1

    def poll(self, t: float) -> None:
        value = self.read()
        if self.cumulative:
            delta = value - self.last
            if delta < 0 and self.wrap_j:  # the counter wrapped since the last poll
                delta += self.wrap_j
            elif delta < 0 and self.reset_on_decrease:  # reset since the last poll: what it counted since
                delta = value
            self.joules += max(delta, 0.0)
        else:  # trapezoid between two power samples
            self.joules += (value + self.last) / 2 * (t - self.last_t)
        self.last, self.last_t = value, t
        self.samples += 1

    @classmethod
    def of(cls, name: str, source: EnergySource) -> "_Domain":
        """The domain that follows a reader's :class:`EnergySource`."""
        return cls(
            name, source.method, source.read, source.cumulative, source.wrap_j, source.reset_on_decrease,
            source.update_note, source.min_window_s,
        )  # fmt: skip


@dataclass
class EnergyReading:
    """Per domain, ``measured`` with joules and how, or ``unavailable: why``."""

    seconds: float
    domains: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def measured(self) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.domains.items() if v["status"] == "measured"}

    @property
    def joules(self) -> float | None:
        """The sum over measured domains, or None when none was."""
        m = self.measured
        return sum(d["joules"] for d in m.values()) if m else None

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "joules": self.joules, "domains": self.domains, "note": NOTE}


class EnergyMeter:
    """``with EnergyMeter(gpus=[0]) as meter: ...`` then ``meter.reading``.

    ``gpus`` are the indices the devices' kinds monitor them by; ``reader`` reads them (default: the reader
    of this machine's GPUs, :func:`accelbench.devices.readers.reader_for`). ``nvml``, a pynvml-like module,
    is shorthand for an NVML reader on it (a test's fake).
    """

    def __init__(
        self,
        gpus: Sequence[int] = (),
        *,
        powercap: Path | None = None,
        nvml: Any = None,
        reader: DeviceReader | None = None,
        period_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.gpus = list(gpus)
        self.powercap = powercap or rapl.POWERCAP
        if reader is None and nvml is not None:
            reader = NvmlReader(nvml)
        self.reader = reader
        self.period_s = period_s
        self.clock = clock
        self.reading: EnergyReading | None = None
        self._domains: list[_Domain] = []
        self._unavailable: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._discovered = False

    def __enter__(self) -> "EnergyMeter":
        if not self._discovered:
            self._discover()
        self._t0 = self.clock()
        for d in self._domains:
            d.start(self._t0)
        if self._domains:
            self._thread = threading.Thread(target=self._run, name="accelbench-energy", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 10 * self.period_s))
        t = self.clock()
        with self._lock:
            for d in self._domains:
                try:
                    d.poll(t)
                except Exception as e:  # a counter that vanished: the domain says so, the record survives
                    self._unavailable[d.name] = f"unavailable: counter read failed at the end ({e})"
        self.reading = self._result(t - self._t0)

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            t = self.clock()
            with self._lock:
                for d in self._domains:
                    try:
                        d.poll(t)
                    except Exception:
                        pass  # read again at the end; a failure there is recorded

    def _discover(self) -> None:
        self._discovered = True
        zones, why = rapl.zones(self.powercap)
        if why:
            self._unavailable["cpu"] = why
        for z in zones:
            self._domains.append(_Domain(z.name, "RAPL powercap counter", z.read_joules, True, z.max_range_uj))
        for index in self.gpus:
            self._gpu(index)

    def _gpu(self, index: int) -> None:
        name = f"gpu{index}"
        reader = self.reader or reader_for(index)
        if reader is None:
            self._unavailable[name] = "unavailable: no reader reads this GPU's kind"
            return
        source = reader.energy(index, self.period_s)
        if isinstance(source, str):
            self._unavailable[name] = source
            return
        self._domains.append(_Domain.of(name, source))

    def _result(self, seconds: float) -> EnergyReading:
        out = EnergyReading(seconds)
        for d in self._domains:
            if d.name in self._unavailable:
                continue
            entry: dict[str, Any] = {
                "status": "measured",
                "joules": d.joules,
                "watts": d.joules / seconds if seconds > 0 else None,
                "method": d.method,
                "period_s": self.period_s,
                "samples": d.samples,
            }
            if d.update_note and d.cumulative and seconds < d.min_window_s:
                entry["approximate"] = f"a {seconds:.2f} s window: {d.update_note}; measure longer"
            if not d.cumulative and d.samples < 3:
                entry["approximate"] = f"{d.samples} power samples over {seconds:.2f} s; measure longer"
            out.domains[d.name] = entry
        for name, why in self._unavailable.items():
            out.domains[name] = {"status": why}
        return out


def readable(
    powercap: Path | None = None, gpus: Sequence[int] = (), nvml: Any = None, reader: DeviceReader | None = None
) -> dict[str, str]:
    """Which energy domains this machine can read, and why not: for ``accelbench system``."""
    meter = EnergyMeter(gpus, powercap=powercap, nvml=nvml, reader=reader)
    meter._discover()
    out = {d.name: f"readable: {d.method}" for d in meter._domains}
    out.update(meter._unavailable)
    return out


def idle_watts(gpus: Sequence[int] = (), seconds: float = 3.0, **meter_args: Any) -> dict[str, float] | None:
    """Average watts per measured domain while nothing runs, or None where nothing can be measured.

    Recorded beside a suite's figures so a reader can tell the work's energy from the machine's floor;
    never subtracted from them.
    """
    meter = EnergyMeter(gpus, **meter_args)
    meter._discover()
    if not meter._domains:
        return None
    with meter:
        time.sleep(seconds)
    assert meter.reading is not None
    return {name: d["watts"] for name, d in meter.reading.measured.items()}
