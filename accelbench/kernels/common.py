"""What every kernel benchmark does around its own computation.

A kernel module builds a :class:`KernelCase` (the call to time, its FLOP and byte
counts, and how to check its output); :func:`measure_case` does the rest the same
way for every kernel: check the output against a higher-precision reference (so
a wrong kernel cannot report a fast time), time it under recorded conditions, and
turn the measurement into the standard ``seconds`` / ``tflops`` (or ``gbps``) /
``arithmetic_intensity`` / ``pct_of_peak`` metrics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal, cast

from accelbench.devices.kind import kind_of
from accelbench.devices.precision import precision_reason
from accelbench.errors import BenchmarkSkipped
from accelbench.families import benchmark_of
from accelbench.kit import metrics as fig
from accelbench.kit.context import RunContext, prepare
from accelbench.measure.conditions import ConditionsMonitor
from accelbench.measure.stats import Measurement
from accelbench.measure.timer import Timer, calls_per_sample
from accelbench.params import TimingParams
from accelbench.results.details import Details
from accelbench.results.record import Metric, Result
from accelbench.system.specs import bandwidth_peak_for, no_peak_reason, peak_for

if TYPE_CHECKING:
    import torch

#: Largest acceptable relative (Frobenius) error against the fp64 reference, per precision.
#: Inputs are rounded to the precision first, so this bounds accumulation and output rounding only.
TOLERANCE = {"fp32": 1e-4, "tf32": 1e-2, "fp16": 1e-2, "bf16": 5e-2, "int8": 1e-9, "fp8": 5e-2}


class KernelDetails(Details, total=False):
    """What a kernel's record keeps beside its figures: how it was checked and timed (the relative error against
    fp64, the clock, calls per sample, the cache state, a compiling device's graphs counted apart), the work one
    call does, the peak or why none is known, CUDA graph replay's own timing, and each kernel's own facts (a
    sparse matrix's density, a convolution's output size, the attention backend that ran, an all-reduce's ranks)."""

    dtype: str
    relative_error: float
    clock: str
    calls_per_sample: int
    warmup_calls: int
    measure_seconds: float
    cache: str | None
    compiles: dict[str, Any]
    flops_per_call: float
    bytes_per_call: float
    graph: dict[str, Any]
    peak_unknown: str
    #: sparse: the stored nonzeros and their share
    nnz: int
    actual_density: float
    #: rnn: the gates of its cell
    gates: int
    #: conv: the output's height and width
    output_hw: list[int]
    #: membw: one array's size, and the last-level cache it must exceed
    bytes_per_array: int
    last_level_cache_bytes: int
    #: attention: the head size, the scaled-dot-product backend that ran and how that was seen
    head_dim: int
    sdpa_backend: str
    sdpa_backend_seen: str
    #: allreduce: the ranks, the bus factor their bandwidth is scaled by
    world_size: int
    bus_factor: float
    #: gemm: the operands' layout at a low precision, and how an fp8 GEMM accumulated (:func:`fp8_accumulation`)
    operand_layout: str
    use_fast_accum: bool
    fp8_accumulation: str
    fp8_peak_basis: str


def kernel_details(result: Result) -> KernelDetails:
    """A kernel record's details as :func:`kernel_result` wrote them (the same dict)."""
    return cast(KernelDetails, result.details)


@dataclass
class KernelCase:
    """One kernel call, ready to be checked and timed."""

    fn: Callable[[], object]
    precision: str
    flops: float | None  # per call; None for memory-bound kernels
    bytes_moved: float  # minimum traffic per call
    error: Callable[[], float] | None = None  # runs the kernel once, returns its relative error
    tolerance: float | None = None
    throughput: Literal["tflops", "gbps"] = "tflops"
    details: KernelDetails = field(default_factory=lambda: KernelDetails())
    #: further TFLOPS metrics from other FLOP counts, e.g. a sparse kernel's dense equivalent
    extra_flops: dict[str, float] = field(default_factory=dict)


def relative_error(out: "torch.Tensor", ref: "torch.Tensor") -> float:
    """||out - ref|| / ||ref|| (Frobenius), computed in fp64."""
    diff: float = (out.double() - ref.double()).norm().item()
    scale: float = ref.double().norm().item()
    return diff / scale if scale > 0 else diff


def no_path_reason(benchmark: str, precision: str, supported: tuple[str, ...]) -> str | None:
    """A precision this kernel has no documented PyTorch path for, on any device."""
    if precision in supported:
        return None
    return f"{benchmark} has no documented PyTorch {precision} kernel; it runs in {', '.join(supported)}"


def native_precision(device: "torch.device", candidates: tuple[str, ...] = ("fp16", "bf16")) -> str:
    """The first of ``candidates`` that ``device`` computes natively, else fp32: a default that measures the
    hardware everywhere, where a fixed fp16 is skipped on every CPU without fp16 arithmetic."""
    return next((p for p in candidates if precision_reason(device, p) is None), "fp32")


def max_relative_error(outs: object, refs: object) -> float:
    """The worst relative error over a kernel's outputs (one tensor, or a tuple of them)."""
    o = outs if isinstance(outs, tuple) else (outs,)
    r = refs if isinstance(refs, tuple) else (refs,)
    return max(relative_error(a, b) for a, b in zip(o, r, strict=True))


def run_kernel(
    params: TimingParams,
    ctx: "RunContext",
    build: Callable[[Any, "torch.device"], KernelCase],
    supported: tuple[str, ...],
    *,
    shape_reason: Callable[[Any, "torch.device"], str | None] | None = None,
    record_extra: dict[str, Any] | None = None,
) -> Iterator[Result]:
    """The ``run`` of every single-process kernel: device, skips, precision mode, check, time, record (named
    as the registry names the benchmark of ``params``)."""
    benchmark = benchmark_of(params)
    prep = prepare(params)
    device, threads = prep.device, prep.threads
    record = prep.record(params, **(record_extra or {}))
    precision = getattr(params, "precision", "fp32")
    reason = (
        no_path_reason(benchmark, precision, supported)
        or (shape_reason(params, device) if shape_reason else None)
        or precision_reason(device, precision, getattr(params, "emulated", False))
    )
    if reason:
        raise BenchmarkSkipped(reason, record)
    try:  # prepare() set the precision's math mode (TF32 only for tf32) for this process
        case = build(params, device)
    except BenchmarkSkipped as exc:
        raise BenchmarkSkipped(str(exc), record) from None
    yield measure_case(benchmark, params, record, case, device, threads, ctx)


def wrong_result(benchmark: str, params: dict[str, Any], err: float, tol: float) -> Result:
    return Result.failed(
        benchmark,
        params,
        f"wrong result: relative error {err:.2e} against the fp64 reference exceeds "
        f"{tol:.0e} for {params.get('precision')}; the kernel's time is not reported",
    )


def time_kernel(
    fn: Callable[[], object], device: "torch.device", threads: int, params: TimingParams
) -> tuple[Measurement, dict[str, Any]]:
    """Measure ``fn`` with the parameters' budget, recording the conditions it ran under."""
    with ConditionsMonitor(threads, kind_of(device).monitored(device)) as monitor:
        measurement = Timer(fn, device, params.timer_config(device.type)).measure()
    return measurement, monitor.conditions.to_dict()


def measure_case(
    benchmark: str,
    params: TimingParams,
    record: dict[str, Any],
    case: KernelCase,
    device: "torch.device",
    threads: int,
    ctx: "RunContext",
) -> Result:
    """Check, time and report one kernel call; the shared path of every kernel benchmark."""
    details = case.details.copy()
    if getattr(params, "check", True) and case.error is not None:
        ctx.progress("checking against the fp64 reference")
        err = case.error()
        details["relative_error"] = err
        tol = case.tolerance if case.tolerance is not None else TOLERANCE[case.precision]
        if not err <= tol:
            return wrong_result(benchmark, record, err, tol)
    ctx.progress("timing")
    measurement, conditions = time_kernel(case.fn, device, threads, params)
    result = kernel_result(benchmark, record, measurement, conditions, case, device, threads, details)
    if getattr(params, "graph", False) and kind_of(device).graphs:
        ctx.progress("timing CUDA graph replay")
        try:
            _add_graph_metrics(result, case, device, params)
        except RuntimeError as exc:  # e.g. an op that cannot be captured; eager figures stand
            result.concern("graph-failed", f"CUDA graph capture failed: {str(exc).splitlines()[0][:200]}")
    return result


def compute_unit(precision: str) -> str:
    """int8 work is integer operations: TOPS, as datasheets quote it; the metric's name stays ``tflops``."""
    return "TOPS" if precision == "int8" else "TFLOPS"


def _throughput_metrics(prefix: str, case: KernelCase, m: Measurement) -> dict[str, Metric]:
    if case.throughput == "gbps":
        throughput = fig.rate(case.bytes_moved, m, "GB/s", 1e9)
    else:
        throughput = fig.rate(float(case.flops or 0.0), m, compute_unit(case.precision), 1e12)
    return {f"{prefix}seconds": fig.seconds(m), f"{prefix}{case.throughput}": throughput}


def kernel_result(
    benchmark: str,
    params: dict[str, Any],
    measurement: Measurement,
    conditions: dict[str, Any],
    case: KernelCase,
    device: "torch.device",
    threads: int,
    details: KernelDetails,
) -> Result:
    """The standard record of a kernel: seconds, TFLOPS or GB/s, intensity and % of peak."""
    metrics = _throughput_metrics("", case, measurement)
    for name, flops in case.extra_flops.items():
        metrics[name] = fig.rate(flops, measurement, compute_unit(case.precision), 1e12)
    if case.flops is not None and case.bytes_moved > 0:
        metrics["arithmetic_intensity"] = fig.figure(case.flops / case.bytes_moved, "FLOP/byte", higher_is_better=True)
    if case.throughput == "gbps":
        bw = bandwidth_peak_for(device)
        peak = (bw[0], bw[1], False) if bw else None
    else:
        p = peak_for(device, case.precision, threads)
        peak = (p.tflops, p.source, p.estimated) if p else None
    if peak is not None:
        tp = metrics[case.throughput]
        metrics["pct_of_peak"] = fig.pct_of_peak(tp, peak[0])
        details["peak"] = fig.peak_details(peak[0], tp.unit, peak[1], peak[2])
    details |= {
        "clock": measurement.clock,
        "calls_per_sample": measurement.calls_per_sample,
        "warmup_calls": measurement.warmup_calls,
        "measure_seconds": measurement.total_seconds,
        "cache": measurement.meta.get("cache"),
    }
    if "compiles" in measurement.meta:  # counted apart, on a compiling device
        details["compiles"] = measurement.meta["compiles"]
    if case.flops is not None:
        details["flops_per_call"] = case.flops
    details["bytes_per_call"] = case.bytes_moved
    concerns = fig.concerns_of(measurement, conditions)
    result = Result(
        benchmark=benchmark,
        params=params,
        metrics=metrics,
        primary_metric=case.throughput,
        concerns=concerns,
        conditions=conditions,
        samples=list(measurement.samples),
        details=details,
    )
    check_against_peak(result, device)
    return result


def _add_graph_metrics(result: Result, case: KernelCase, device: "torch.device", params: TimingParams) -> None:
    """CUDA graph replay beside eager: what the kernel costs without the CPU launch overhead."""
    kind = kind_of(device)
    cfg = params.timer_config(device.type)
    est = max(result.metrics["seconds"].value, 1e-7)
    calls = calls_per_sample(est, cfg)
    reps = min(cfg.max_reps, max(cfg.min_reps, int(cfg.min_time / (est * calls))))
    flush = kind.flush_buffer(device) if cfg.cache == "cold" else None
    samples = kind.time_graph_replay(case.fn, device, reps, flush, calls)
    measurement = Measurement(tuple(samples), calls_per_sample=calls, clock="cuda_graph", meta={"cache": cfg.cache})
    result.metrics.update(_throughput_metrics("graph_", case, measurement))
    kernel_details(result)["graph"] = {"calls_per_replay": calls, "replays": reps, "cache": cfg.cache}


#: the concern kind of a record whose figure exceeds the peak it is divided by
ABOVE_PEAK = "above-peak"


def check_against_peak(result: "Result", device: "torch.device") -> None:
    """Flag a figure above 100% of its peak, and say why a record has no peak.

    A peak is a ceiling: a figure above it says the peak is wrong (a clock above the one it rests on, a
    datasheet row for another part), so the record carries an ``above-peak`` concern naming the peak's source
    instead of printing a share above 100% as if it were one. A throughput record with no peak says why, so
    "no % of peak" is never read as "not measured".
    """
    pct = result.metrics.get("pct_of_peak")
    peak = result.details.get("peak")  # the record's own, written above: a Peak
    if pct is not None and pct.value > 100.0 and peak is not None:
        peak["below_measured"] = True
        result.concern(
            ABOVE_PEAK,
            f"above the peak: {pct.value:.1f}% of {peak.get('value', 0):.3g} {peak.get('unit', '')} "
            f"({peak.get('source', 'no source')}); that peak is below what ran, so read % of peak as relative",
            pct=pct.value,
        )
    elif pct is None and result.status == "ok" and "tflops" in result.metrics:
        precision = str(result.params.get("precision", "fp32"))
        kind = kind_of(device)
        reason = (
            no_peak_reason(kind.label(device), precision)
            if kind.accelerator
            else f"no peak known: accelbench estimates no {precision} peak for this CPU (no unit for it, or no clock)"
        )
        kernel_details(result).setdefault("peak_unknown", reason)
