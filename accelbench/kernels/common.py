"""What every kernel benchmark does around its own computation.

Setting up the device and threads, checking the kernel's output against a
higher-precision reference (so a wrong kernel cannot report a fast time), timing
it under recorded conditions, and turning the measurement into the standard
``seconds`` / ``tflops`` / ``pct_of_peak`` metrics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from accelbench.measure.conditions import ConditionsMonitor
from accelbench.measure.stats import Measurement
from accelbench.measure.timer import Timer
from accelbench.params import CommonParams, TimingParams
from accelbench.results.record import Metric, Result
from accelbench.system.specs import peak_for

if TYPE_CHECKING:
    import torch

#: Largest acceptable relative (Frobenius) error against the fp64 reference, per precision.
TOLERANCE = {"fp32": 1e-4, "tf32": 1e-2, "fp16": 1e-2, "bf16": 5e-2}


def prepare(params: CommonParams) -> tuple["torch.device", int]:
    """Resolve the device and pin the CPU thread count, returning both for the record."""
    import torch

    from accelbench.devices import resolve_device

    device = resolve_device(params.device)
    torch.set_num_threads(params.threads or torch.get_num_threads())
    return device, torch.get_num_threads()


def relative_error(out: "torch.Tensor", ref: "torch.Tensor") -> float:
    diff = (out.double() - ref).norm().item()
    scale = ref.norm().item()
    return diff / scale if scale > 0 else diff


def skipped(benchmark: str, params: dict[str, Any], reason: str) -> Result:
    return Result(benchmark=benchmark, params=params, status="skipped", reason=reason)


def wrong_result(benchmark: str, params: dict[str, Any], err: float, tol: float) -> Result:
    return Result(
        benchmark=benchmark,
        params=params,
        status="failed",
        error=(
            f"wrong result: relative error {err:.2e} against the fp64 reference exceeds "
            f"{tol:.0e} for {params.get('precision')}; the kernel's time is not reported"
        ),
    )


def time_kernel(
    fn: Callable[[], object], device: "torch.device", threads: int, params: TimingParams
) -> tuple[Measurement, dict[str, Any]]:
    """Measure ``fn`` with the parameters' budget, recording the conditions it ran under."""
    gpu_index = device.index if device.type == "cuda" else None
    if device.type == "cuda" and gpu_index is None:
        import torch

        gpu_index = torch.cuda.current_device()
    with ConditionsMonitor(threads, gpu_index) as monitor:
        measurement = Timer(fn, device, params.timer_config(device.type)).measure()
    return measurement, monitor.conditions.to_dict()


def kernel_result(
    benchmark: str,
    params: dict[str, Any],
    measurement: Measurement,
    conditions: dict[str, Any],
    *,
    device: "torch.device",
    flops: float,
    bytes_moved: float,
    precision: str,
    threads: int,
    details: dict[str, Any] | None = None,
) -> Result:
    """The standard record of a compute kernel: seconds, TFLOPS, intensity and % of peak."""
    seconds = measurement.median
    lo, hi = measurement.ci95
    metrics = {
        "seconds": Metric(seconds, "s", False, (lo, hi), measurement.n, measurement.summary()),
        "tflops": Metric(
            flops / seconds / 1e12,
            "TFLOPS",
            True,
            (flops / hi / 1e12, flops / lo / 1e12) if lo > 0 else None,
            measurement.n,
        ),
        "arithmetic_intensity": Metric(flops / bytes_moved, "FLOP/byte", True, None, None),
    }
    info = dict(details or {})
    peak = peak_for(device, precision, threads)
    if peak is not None:
        tf = metrics["tflops"]
        ci = (100 * tf.ci95[0] / peak.tflops, 100 * tf.ci95[1] / peak.tflops) if tf.ci95 else None
        metrics["pct_of_peak"] = Metric(100 * tf.value / peak.tflops, "%", True, ci, measurement.n)
        info["peak"] = {"tflops": peak.tflops, "source": peak.source, "estimated": peak.estimated}
    info.update(
        {
            "clock": measurement.clock,
            "calls_per_sample": measurement.calls_per_sample,
            "warmup_calls": measurement.warmup_calls,
            "measure_seconds": measurement.total_seconds,
            "cache": measurement.meta.get("cache"),
        }
    )
    warnings = [w for w in [measurement.noise_warning(), *conditions.get("warnings", [])] if w]
    return Result(
        benchmark=benchmark,
        params=params,
        metrics=metrics,
        primary_metric="tflops",
        warnings=warnings,
        conditions=conditions,
        samples=list(measurement.samples),
        details=info,
    )
