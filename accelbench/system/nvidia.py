"""NVIDIA facts that torch does not expose: driver, clocks, power, throttling, topology.

Uses NVML through ``nvidia-ml-py`` (the ``[nvidia]`` extra) when it is installed
and ``nvidia-smi topo -m`` for the NVLink/PCIe matrix; every function returns
empty data instead of failing where neither exists (as on this CPU-only machine).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

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


def _nvml() -> Any | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver, no GPU
        return None
    return pynvml


def _handle(nv: Any, torch_index: int) -> Any:
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


def clocks_and_throttle(index: int) -> dict[str, Any]:
    nv = _nvml()
    if nv is None:
        return {}
    try:
        h = _handle(nv, index)
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


#: NVML's cumulative violation counters (nvmlDeviceGetViolationStatus), by the limit that held the clocks down.
_VIOLATION_POLICIES = {"power": "NVML_PERF_POLICY_POWER", "thermal": "NVML_PERF_POLICY_THERMAL"}


def violation_ns(index: int) -> dict[str, int]:
    """Nanoseconds each limit (power, thermal) has held this GPU's clocks down since the driver loaded.

    Cumulative counters: their difference over a measured window says whether the GPU throttled during
    it, which one reading of the clock-event reasons after the final synchronisation (when the GPU is
    idle and the cap has cleared) cannot. Empty where NVML or the query is missing.
    """
    nv = _nvml()
    if nv is None:
        return {}
    try:
        h = _handle(nv, index)
        return {
            name: int(nv.nvmlDeviceGetViolationStatus(h, getattr(nv, const)).violationTime)
            for name, const in _VIOLATION_POLICIES.items()
        }
    except Exception:  # an old driver, or a GPU that does not report violations
        return {}


def device_facts(index: int) -> dict[str, Any]:
    """Driver, clocks and power limit of one GPU, for the system profile."""
    nv = _nvml()
    if nv is None:
        return {}
    facts: dict[str, Any] = {}
    try:
        h = _handle(nv, index)
        facts["driver"] = _text(nv.nvmlSystemGetDriverVersion())
        facts["max_sm_clock_mhz"] = nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)
        facts["max_mem_clock_mhz"] = nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM)
        facts["power_limit_w"] = nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0
        facts["pcie_gen"] = nv.nvmlDeviceGetCurrPcieLinkGeneration(h)
        facts["pcie_width"] = nv.nvmlDeviceGetCurrPcieLinkWidth(h)
    except Exception as exc:
        facts["error"] = f"NVML query failed: {exc}"
    return facts


def topology() -> str | None:
    """The ``nvidia-smi topo -m`` matrix (NVLink vs PCIe between GPUs), or None."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    # nvidia-smi underlines the header with terminal escapes even into a pipe; the record keeps plain text
    return _ESCAPES.sub("", out.stdout).strip() if out.returncode == 0 else None


_ESCAPES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)
