"""AMD GPUs' reader: energy, power, clocks and throttling through ``amdsmi``, AMD SMI's Python package shipped
with ROCm (NVML does not see AMD GPUs), from its documented Python API only.

Its energy counter is a 64-bit accumulator (a decrease is a reset, not a wrap), sampled power standing in where a
guest lacks it; throttling is the metrics table's residency accumulators. torch's index maps to a handle by PCI
address, since torch numbers devices after HIP_VISIBLE_DEVICES and amdsmi does not (docs/extending.md, Readers)."""

from __future__ import annotations

import atexit
import threading
from typing import Any

from accelbench.devices.readers import DeviceReader, EnergySource, number

NOT_INSTALLED = "amdsmi not installed (the Python package of AMD SMI, shipped with ROCm in /opt/rocm/share/amd_smi)"
#: the throttle counters' names in amdsmi's gpu metrics, by the limit they count
_RESIDENCY = {"power": "ppt_residency_acc", "thermal": "socket_thm_residency_acc"}
_VIOLATION = {"power": "acc_ppt_pwr", "thermal": "acc_socket_thrm"}


class AmdSmiReader(DeviceReader):
    """amdsmi for AMD GPUs. ``module`` is an amdsmi-like module to read instead (a test's fake)."""

    library = "amdsmi"

    def __init__(self, module: Any = None) -> None:
        self._given = module
        self._lock = threading.Lock()
        self._ready: Any = None
        self._why: str | None = None
        self._handles: dict[int, Any] = {}

    # -- the library and the handles --------------------------------------------------------------------------

    def _lib(self) -> Any | None:
        """amdsmi, initialised once; None (and :attr:`_why`) where it cannot be."""
        with self._lock:
            if self._ready is not None or self._why is not None:
                return self._ready
            amd = self._given
            if amd is None:
                try:
                    import amdsmi as amd  # type: ignore[no-redef]
                except ImportError:
                    self._why = NOT_INSTALLED
                    return None
            try:
                amd.amdsmi_init()
            except Exception as exc:  # no amdgpu driver, no permission
                self._why = f"amdsmi_init failed ({exc})"
                return None
            atexit.register(_shut_down, amd)
            self._ready = amd
            return amd

    def unavailable(self) -> str | None:
        return None if self._lib() is not None else self._why

    def handle(self, index: int) -> Any:
        """The amdsmi handle of torch's device ``index``: by PCI address where torch reports it, else the
        index-th of amdsmi's GPUs (right only when no device is hidden from torch)."""
        if index in self._handles:
            return self._handles[index]
        amd = self._lib()
        if amd is None:  # the callers ask only once amdsmi is up
            raise RuntimeError(f"amdsmi unavailable: {self._why}")
        bdf = _torch_bdf(index)
        found = None
        if bdf is not None:
            try:
                found = amd.amdsmi_get_processor_handle_from_bdf(bdf)
            except Exception:
                found = None
        if found is None:
            found = amd.amdsmi_get_processor_handles()[index]
        self._handles[index] = found
        return found

    # -- energy ---------------------------------------------------------------------------------------------

    def energy(self, index: int, period_s: float) -> EnergySource | str:
        amd = self._lib()
        if amd is None:
            return f"unavailable: {self._why}"
        try:
            h = self.handle(index)
        except Exception as exc:
            return f"unavailable: amdsmi has no GPU {index} ({exc})"
        try:
            _joules(amd, h)
            return EnergySource(
                lambda: _joules(amd, h),
                True,
                "amdsmi energy accumulator (amdsmi_get_energy_count x counter_resolution)",
                reset_on_decrease=True,  # 64-bit: it never wraps in practice, it restarts on a GPU reset
            )
        except Exception as exc:
            counter_why = str(exc) or type(exc).__name__
        try:
            key = _power_key(amd.amdsmi_get_power_info(h))
        except Exception as exc:
            return f"unavailable: counter not supported ({counter_why}; power: {exc})"
        if key is None:
            return f"unavailable: counter not supported ({counter_why}; power: amdsmi reports N/A)"
        return EnergySource(
            lambda: float(amd.amdsmi_get_power_info(h)[key]),
            False,
            f"amdsmi {key} (W) sampled every {period_s:g} s and integrated (energy counter not supported)",
        )

    # -- clocks and throttling ------------------------------------------------------------------------------

    def conditions(self, index: int) -> dict[str, Any]:
        amd = self._lib()
        if amd is None:
            return {}
        try:
            h = self.handle(index)
            out: dict[str, Any] = {
                "gfx_clock_mhz": number(amd.amdsmi_get_clock_info(h, amd.AmdSmiClkType.GFX).get("clk")),
                "mem_clock_mhz": number(amd.amdsmi_get_clock_info(h, amd.AmdSmiClkType.MEM).get("clk")),
            }
        except Exception as exc:
            return {"error": f"amdsmi query failed: {exc}"}
        try:  # amd_smi.cc divides rocm_smi's millidegrees by 1000: the figure is in degrees Celsius
            out["temperature_c"] = number(
                amd.amdsmi_get_temp_metric(h, amd.AmdSmiTemperatureType.HOTSPOT, amd.AmdSmiTemperatureMetric.CURRENT)
            )
        except Exception:
            pass
        try:
            power = amd.amdsmi_get_power_info(h)
            key = _power_key(power)
            out["power_w"] = float(power[key]) if key else None
            out["power_limit_w"] = number(power.get("power_limit"))
        except Exception:
            pass
        out["throttle_reasons"] = self._throttled_now(amd, h)
        return out

    def _throttled_now(self, amd: Any, h: Any) -> list[str]:
        """Whether the metrics' ``throttle_status`` says the GPU is throttled at this instant: a snapshot, which
        the window's residency counters supersede where they exist."""
        try:
            metrics = amd.amdsmi_get_gpu_metrics_info(h)
        except Exception:
            return []
        return ["throttle_status"] if metrics.get("throttle_status") is True else []

    def throttle_counters(self, index: int) -> dict[str, float]:
        amd = self._lib()
        if amd is None:
            return {}
        try:
            h = self.handle(index)
            metrics = amd.amdsmi_get_gpu_metrics_info(h)
            found = _counters(metrics, "accumulation_counter", _RESIDENCY)
            if found:
                return found
            return _counters(amd.amdsmi_get_violation_status(h), "acc_counter", _VIOLATION)
        except Exception:  # an older amdsmi, or a GPU whose firmware does not count residency
            return {}

    def throttled_shares(self, before: dict[str, float], after: dict[str, float], seconds: float) -> dict[str, float]:
        ticks = after.get("counter", 0.0) - before.get("counter", 0.0)
        if ticks <= 0:
            return {}
        return {
            limit: min(1.0, max(0.0, after[limit] - before[limit]) / ticks)
            for limit in _RESIDENCY
            if limit in before and limit in after
        }


def _joules(amd: Any, h: Any) -> float:
    e = amd.amdsmi_get_energy_count(h)
    accumulator, resolution = number(e.get("energy_accumulator")), number(e.get("counter_resolution"))
    if accumulator is None or resolution is None:
        raise RuntimeError(f"energy counter reads N/A ({e})")
    return accumulator * resolution / 1e6  # micro-joules


def _power_key(power: dict[str, Any]) -> str | None:
    """The power amdsmi reports on this GPU: the current socket power, else the average (MI300 reports only
    one of them on some firmware; "N/A" marks the other)."""
    return next((k for k in ("current_socket_power", "average_socket_power") if number(power.get(k)) is not None), None)


def _counters(source: dict[str, Any], counter: str, names: dict[str, str]) -> dict[str, float]:
    """The accumulation counter and the limits' residency counters, where every one of them is a number."""
    ticks = number(source.get(counter))
    found = {limit: number(source.get(key)) for limit, key in names.items()}
    if ticks is None or any(v is None for v in found.values()):
        return {}
    return {"counter": ticks, **{k: v for k, v in found.items() if v is not None}}


def _torch_bdf(index: int) -> str | None:
    """torch's PCI address of device ``index`` as amdsmi spells it (``0000:c1:00.0``), where torch has it."""
    try:
        import torch

        p: Any = torch.cuda.get_device_properties(index)  # the pci_* fields are newer than torch's annotations
        return f"{int(p.pci_domain_id):04x}:{int(p.pci_bus_id):02x}:{int(p.pci_device_id):02x}.0"
    except Exception:
        return None


def _shut_down(amd: Any) -> None:
    try:
        amd.amdsmi_shut_down()
    except Exception:
        pass
