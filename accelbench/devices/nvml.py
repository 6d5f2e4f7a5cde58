"""NVIDIA GPUs' reader: energy, power, clocks and throttling through NVML (``nvidia-ml-py``, the ``[nvidia]``
extra). Every function returns empty data instead of failing where NVML or a query is missing (as on a machine
without an NVIDIA driver); :mod:`accelbench.system.nvidia` builds the profile's driver facts on the same calls.
"""

from __future__ import annotations

from typing import Any, Callable

from accelbench.devices.readers import DeviceReader, EnergySource

# NVML clock-event (throttle) reason bits, from nvml.h.
_THROTTLE_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
#: Reasons that mean the GPU ran slower than it could; idle and app-clock settings do not.
_SLOWDOWN = {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
#: NVML's cumulative violation counters (nvmlDeviceGetViolationStatus), by the limit that held the clocks down.
_VIOLATION_POLICIES = {"power": "NVML_PERF_POLICY_POWER", "thermal": "NVML_PERF_POLICY_THERMAL"}
NOT_INSTALLED = "NVML not installed (pip install 'accelbench[nvidia]')"


def load() -> Any | None:
    """pynvml, initialised; None without the package or a driver (nvmlInit counts its callers: calling it per
    query is cheap and needs no shutdown)."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver, no GPU
        return None
    return pynvml


def handle(nv: Any, torch_index: int) -> Any:
    """The NVML handle of torch's device ``torch_index``.

    torch numbers devices after CUDA_VISIBLE_DEVICES, NVML does not; the UUID is
    the same on both sides, so it is used when torch can report it.
    """
    try:
        import torch

        uuid = str(torch.cuda.get_device_properties(torch_index).uuid)
        return nv.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    except Exception:
        return nv.nvmlDeviceGetHandleByIndex(torch_index)


def decode_throttle(mask: int) -> list[str]:
    """The slowdown reasons set in an NVML clock-event mask."""
    return [name for bit, name in _THROTTLE_BITS.items() if mask & bit and name in _SLOWDOWN]


def clocks_and_throttle(index: int, nv: Any = None) -> dict[str, Any]:
    """SM and memory clocks, temperature, board power and the slowdown reasons set now."""
    nv = nv or load()
    if nv is None:
        return {}
    try:
        h = handle(nv, index)
        getter = (
            getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        mask = int(getter(h))
        return {
            "sm_clock_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
            "mem_clock_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
            "temperature_c": nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
            "power_w": nv.nvmlDeviceGetPowerUsage(h) / 1000.0,
            "throttle_mask": mask,
            "throttle_reasons": decode_throttle(mask),
        }
    except Exception as exc:  # an old driver lacking a query
        return {"error": f"NVML query failed: {exc}"}


def violation_ns(index: int, nv: Any = None) -> dict[str, int]:
    """Nanoseconds each limit (power, thermal) has held this GPU's clocks down since the driver loaded.

    Cumulative counters: their difference over a measured window says whether the GPU throttled during
    it, which one reading of the clock-event reasons after the final synchronisation (when the GPU is
    idle and the cap has cleared) cannot. Empty where NVML or the query is missing.
    """
    nv = nv or load()
    if nv is None:
        return {}
    try:
        h = handle(nv, index)
        return {
            name: int(nv.nvmlDeviceGetViolationStatus(h, getattr(nv, const)).violationTime)
            for name, const in _VIOLATION_POLICIES.items()
        }
    except Exception:  # an old driver, or a GPU that does not report violations
        return {}


class NvmlReader(DeviceReader):
    """NVML for NVIDIA GPUs: the total-energy counter (Volta+) or sampled board power, clocks, violation
    counters. ``nvml`` is a pynvml-like module to read instead (a test's fake); else pynvml is loaded per
    use, so a module installed or patched later is seen."""

    library = "NVML"

    def __init__(self, nvml: Any = None) -> None:
        self._given = nvml

    def _nv(self) -> Any | None:
        return self._given if self._given is not None else load()

    def unavailable(self) -> str | None:
        return NOT_INSTALLED if self._nv() is None else None

    def energy(self, index: int, period_s: float) -> EnergySource | str:
        nv = self._nv()
        if nv is None:
            return f"unavailable: {NOT_INSTALLED}"
        h = handle(nv, index)
        counter: Callable[[], float] = lambda: nv.nvmlDeviceGetTotalEnergyConsumption(h) / 1e3  # noqa: E731 (mJ)
        try:
            counter()
            return EnergySource(
                counter, True, "NVML total energy counter", update_note="NVML's counter updates about every 100 ms"
            )
        except Exception as exc:
            counter_why = str(exc) or type(exc).__name__
        try:
            nv.nvmlDeviceGetPowerUsage(h)
        except Exception as exc:
            return f"unavailable: counter not supported ({counter_why}; power: {exc})"
        return EnergySource(
            lambda: nv.nvmlDeviceGetPowerUsage(h) / 1e3,  # mW
            False,
            f"NVML board power sampled every {period_s:g} s and integrated (energy counter not supported)",
        )

    def conditions(self, index: int) -> dict[str, Any]:
        return clocks_and_throttle(index, self._nv())

    def throttle_counters(self, index: int) -> dict[str, float]:
        return dict(violation_ns(index, self._nv()))

    def throttled_shares(self, before: dict[str, float], after: dict[str, float], seconds: float) -> dict[str, float]:
        window_ns = max(seconds * 1e9, 1.0)
        return {k: min(1.0, max(0.0, after[k] - v) / window_ns) for k, v in before.items() if k in after}
