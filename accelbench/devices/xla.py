"""PyTorch/XLA as a device kind (TPUs; XLA on the host with ``PJRT_DEVICE=CPU``), through ``torch_xla``.

XLA is lazy, so waiting for the device is "cut the graph, execute it, wait" (:meth:`XlaKind.synchronize`), each
step of a timed burst is cut on its own (one graph compiled once and replayed, where a burst traced whole would
be a new graph per window size), and a new shape's first call compiles. ``torch_xla`` is imported only when an
XLA device is asked for; a host run through XLA is a test configuration, which ``--device auto`` never picks."""

from __future__ import annotations

import functools
import importlib.util
import logging
import time
from typing import TYPE_CHECKING, Any, Callable

from accelbench.devices.base import DeviceKind

if TYPE_CHECKING:
    import torch


class _DropChoice(logging.Filter):
    """torch_xla's lines on the runtime it picked ('Defaulting to PJRT_DEVICE=CPU', 'libtpu.so and TPU device
    found. Setting PJRT_DEVICE=TPU.', 'Found CUDA without GPU_NUM_DEVICES. Defaulting to PJRT_DEVICE=CUDA ...'),
    and older versions' 'PJRT is now the default runtime'."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return "PJRT_DEVICE" not in message and "PJRT is now the default runtime" not in message


@functools.cache
def _xla() -> Any:
    """torch_xla, its runtime chosen. Where PJRT_DEVICE is unset torch_xla picks one (a TPU where it finds one,
    else the host) and says so on the root logger, above accelbench's own lines and before a one-line refusal;
    the runtime it picked is in every record (the device's label, ``properties()['runtime']``), so that line is
    dropped."""
    drop, held = _DropChoice(), logging.NullHandler()
    root = logging.getLogger()
    # torch_xla logs through logging.warning, which gives a root logger without handlers one on stderr for the
    # rest of the process (every library's warnings printed after it): a handler held during the import stops that
    bare = not root.handlers
    if bare:
        root.addHandler(held)
    root.addFilter(drop)
    try:
        import torch_xla
        import torch_xla.runtime as xr

        xr.device_type()
    finally:
        root.removeFilter(drop)
        if bare:
            root.removeHandler(held)
    return torch_xla


def _xm() -> Any:
    _xla()
    import torch_xla.core.xla_model as xm

    return xm


class XlaKind(DeviceKind):
    name = "xla"
    torch_type = "xla"
    vendor = "PyTorch/XLA"
    aliases = {"tpu": "a TPU is --device xla, with PJRT_DEVICE=TPU"}
    accelerator = True
    dist_backend = "xla"
    # PJRT joins processes through its own launcher or an xla:// rendezvous, one chip per process, which the rank
    # launcher does not do yet; and the host runtime that tests the kind cannot run collectives across processes
    no_ranks = "several XLA ranks in one run are not supported yet (one process per run: --nproc 1 --nnodes 1)"
    batch_class = "gpu"
    lazy = True

    def unavailable(self) -> str | None:
        if importlib.util.find_spec("torch_xla") is None:
            return (
                "torch_xla not installed (PyTorch/XLA: torch_xla with the torch it was built for, held by a "
                "constraint: docs/run.md, 'On a TPU')"
            )
        try:
            return None if self.count() > 0 else "torch_xla sees no XLA device (set PJRT_DEVICE=TPU, or CPU to test)"
        except Exception as exc:  # the runtime could not start (no TPU, a PJRT_DEVICE it cannot open)
            return f"the XLA runtime did not start: {str(exc).splitlines()[0][:160]}"

    def runtime_type(self) -> str:
        """What the PJRT runtime runs on: TPU, CPU, CUDA (``torch_xla.runtime.device_type()``)."""
        _xla()
        import torch_xla.runtime as xr

        return str(xr.device_type())

    def auto(self) -> bool:
        """Whether ``--device auto`` may pick it: on a TPU (or GPU) runtime, not on XLA's host test device."""
        return self.unavailable() is None and self.runtime_type() != "CPU"

    def count(self) -> int:
        if importlib.util.find_spec("torch_xla") is None:
            return 0
        _xla()
        import torch_xla.runtime as xr

        return int(xr.addressable_device_count())

    def resolve(self, index: int | None) -> "torch.device":
        device: torch.device = _xla().device(index)
        return device

    def label(self, device: "torch.device") -> str:
        hw = self.runtime_type()
        if hw != "TPU":
            return f"XLA on {hw}"
        try:
            return tpu_label(str(_xm().xla_device_kind(device)))
        except Exception:  # the runtime does not name its device kind
            return "TPU"

    def total_memory(self, device: "torch.device") -> int | None:
        info = self._memory(device)
        return int(info["bytes_limit"]) if info and info.get("bytes_limit") else None

    def properties(self, device: "torch.device") -> dict[str, Any]:
        """Its runtime, and on TPU v2/v3, where each of a chip's two TensorCores is a device of its own, that a
        device is half a chip: published TPU figures count chips, and the reference comparison reads this."""
        facts = super().properties(device) | {"runtime": self.runtime_type()}
        if str(facts.get("name", "")).endswith("TensorCore"):
            facts["devices_per_chip"] = 2
        return facts

    def synchronize(self, device: "torch.device") -> None:
        """Cut the graph recorded so far, execute it and wait for the device."""
        _xla().sync()
        _xm().wait_device_ops()

    def numeric_mode(self, device: "torch.device", precision: str) -> dict[str, Any]:
        """FP32 matmuls and convolutions at FP32: XLA's default on a TPU rounds FP32 operands to bf16 and
        multiplies once, so an "fp32" figure would be a bf16 one. ``highest`` (six passes, about 22 bits) is
        what fp32 names; 16-bit operands are unaffected."""
        _xla()
        try:
            import torch_xla.backends as xb
        except ImportError:  # torch_xla before 2.7 has no switch: record that its default was used
            return {"xla_mat_mul_precision": "runtime default"}
        if xb.get_mat_mul_precision() != "highest":
            xb.set_mat_mul_precision("highest")
        return {"xla_mat_mul_precision": "highest"}

    def compilations(self) -> tuple[int, float] | None:
        """From torch_xla's metrics: ``CompileTime`` counts every graph compiled (a cache hit is not)."""
        _xla()
        import torch_xla.debug.metrics as met

        data = met.metric_data("CompileTime")
        return (0, 0.0) if data is None else (int(data[0]), float(data[1]) / 1e9)

    def no_grad(self) -> Any:
        import torch

        return torch.no_grad()  # XLA tensors cannot be inference tensors ("Cannot set version_counter")

    def end_step(self, device: "torch.device") -> None:
        _xla().sync()

    def time_burst(
        self, fn: Callable[[], object], device: "torch.device", calls: int, clock: Callable[[], int]
    ) -> float:
        """Seconds per call over ``calls`` calls, each cut into its own graph (dispatched without waiting), the
        device waited for once at the end: what a training loop on XLA runs."""
        t0 = clock()
        for _ in range(calls):
            fn()
            _xla().sync()
        _xm().wait_device_ops()
        return (clock() - t0) / 1e9 / calls

    def estimate_call_seconds(self, fn: Callable[[], object], device: "torch.device", flush: Any) -> float:
        t0 = time.perf_counter()
        fn()
        self.synchronize(device)
        return time.perf_counter() - t0

    # -- memory: what the runtime reports (a TPU's HBM; nothing on the host runtime) -------------------------

    def _memory(self, device: "torch.device") -> dict[str, Any] | None:
        try:
            return dict(_xm().get_memory_info(device))
        except Exception:  # the host runtime keeps no statistics
            return None

    def reset_peak_memory(self, device: "torch.device") -> int | None:
        info = self._memory(device)
        return int(info["bytes_used"]) if info and "peak_bytes_used" in info else None

    def peak_memory(self, device: "torch.device") -> int | None:
        info = self._memory(device)
        return int(info["peak_bytes_used"]) if info and "peak_bytes_used" in info else None

    def memory_method(self) -> str | None:
        return "torch_xla xm.get_memory_info peak_bytes_used (the runtime's peak, not reset per block)"

    # -- precision --------------------------------------------------------------------------------------------

    def unsupported(self, device: "torch.device", precision: str) -> str | None:
        if precision in ("fp16",) and self.runtime_type() == "TPU":
            return "TPUs compute in bf16 and fp32; fp16 has no native path there (use bf16)"
        return super().unsupported(device, precision)


def tpu_label(device_kind: str) -> str:
    """The name a TPU's peaks are looked up by, from PJRT's device kind ("TPU v4", "TPU v5 lite"): the
    generations by their product names (v5e, v6e), and on v2/v3, whose every TensorCore is a device of its own,
    "TensorCore", so that a device is judged against half its chip's peak."""
    import re

    kind = device_kind.strip()
    m = re.fullmatch(r"TPU v(\d)( ?lite|e|p)?", kind, re.IGNORECASE)
    if m is None:
        return kind
    gen, suffix = m.group(1), (m.group(2) or "").strip().lower()
    if gen in ("2", "3"):
        return f"TPU v{gen} TensorCore"
    if suffix in ("lite", "e"):
        return f"TPU v{gen}e"
    if gen == "5":  # PJRT's "TPU v5" is the v5p; v5e calls itself "lite"
        return "TPU v5p"
    return f"TPU v{gen}{suffix}"


KIND = XlaKind()
