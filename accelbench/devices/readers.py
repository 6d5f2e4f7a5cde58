"""The reader seam: who reads an accelerator's energy, power, clocks and throttling (NVML, amdsmi, ...).

The energy meter and the conditions monitor know a device by the index its kind monitors it under and ask the
kind's :class:`DeviceReader` for everything vendor-specific, so an AMD GPU's window is measured by the same code
as an NVIDIA GPU's. A reader that cannot read says why, in words: never a guess."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar


@dataclass(frozen=True)
class EnergySource:
    """How one device's energy is followed through a window: a cumulative counter read in joules, or a power
    in watts that the meter samples and integrates."""

    read: Callable[[], float]
    cumulative: bool
    #: how it is read, in words, for the record
    method: str
    #: the joules at which the counter wraps back to zero (a decrease then means a wrap), or None
    wrap_j: float | None = None
    #: a decrease means the counter was reset (a GPU reset zeroes a 64-bit accumulator): the new value is the
    #: energy since the reset, counted as the step
    reset_on_decrease: bool = False
    #: windows shorter than ``min_window_s`` are marked approximate with this note (how often it updates)
    update_note: str | None = None
    min_window_s: float = 1.0


class DeviceReader:
    """A device management library as the meter and the monitor ask it; every answer is for one monitored index.

    The base class reads nothing and says so, so a reader overrides only what its library offers.
    """

    #: the library's name in records and messages ("NVML", "amdsmi")
    library: ClassVar[str] = ""

    def unavailable(self) -> str | None:
        """Why the library cannot be read here (not installed, no driver), or None."""
        return f"no {self.library or 'device'} reader"

    def energy(self, index: int, period_s: float) -> EnergySource | str:
        """How to follow device ``index``'s energy (sampling a power every ``period_s``), or why it cannot be
        followed (``"unavailable: ..."``)."""
        return f"unavailable: {self.unavailable() or 'no energy reading'}"

    def conditions(self, index: int) -> dict[str, Any]:
        """Clocks (MHz), temperature (C), power (W) and the throttle reasons set now; {} where unreadable, an
        ``error`` entry where a query failed."""
        return {}

    def throttle_counters(self, index: int) -> dict[str, float]:
        """Cumulative counters of the time limits held the clocks down, read at a window's edges; {} where none."""
        return {}

    def throttled_shares(self, before: dict[str, float], after: dict[str, float], seconds: float) -> dict[str, float]:
        """The share (0..1) of a ``seconds`` window each limit ("power", "thermal") held the clocks down, from
        two readings of :meth:`throttle_counters`; {} where they cannot say."""
        return {}


def number(value: Any) -> float | None:
    """A library's figure as a float; None for what it marks unsupported ("N/A", None, an error string)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
