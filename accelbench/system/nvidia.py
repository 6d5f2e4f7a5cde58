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

# NVML's clocks, throttle reasons and violation counters are read by the NVIDIA GPUs' reader in the device seam
# (devices/nvml.py); the profile's facts below use the same loading and handle mapping.
from accelbench.devices.nvml import clocks_and_throttle, decode_throttle, violation_ns  # noqa: F401 (re-exported)
from accelbench.devices.nvml import handle as _handle
from accelbench.devices.nvml import load as _nvml


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
