"""``infer/loadgen``: one LoadGen scenario against a batching SUT, with LoadGen's verdict recorded.

Each scenario runs in its own isolated worker process (the suite runner's), so
LoadGen's process-global state starts fresh; its logs go to the run folder, and
the audit-config path is explicit so that a stray ``audit.config`` in the
working directory cannot change a run. Before the measured run a short probe
times the backend, and the hints LoadGen needs are set from it (expected
Offline throughput, expected latencies, a Server target of half the probed
throughput unless ``--target-qps`` is given).
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, Iterator

from accelbench.errors import UsageError
from accelbench.infer.logs import invalid_reasons, read_detail
from accelbench.infer.specs import InferParams
from accelbench.infer.sut import BatchingSUT, SampleLibrary
from accelbench.kernels.common import prepare
from accelbench.measure.conditions import ConditionsMonitor
from accelbench.registry import RunContext
from accelbench.results.record import Metric, Result

if TYPE_CHECKING:
    import torch

NAME = "infer/loadgen"
#: MLPerf Inference v0.7 datacenter Server latency bounds (seed 002), in ms.
SERVER_BOUND_MS = {"resnet50": 15.0, "ssd": 100.0, "bert": 130.0, "dlrm": 30.0, "rnnt": 1000.0}
DEFAULT_BOUND_MS = 100.0
QSL_SAMPLES = {"quick": 64, "official": 1024}
#: A Python SUT answers at most a few hundred thousand samples/s, whatever the backend; planning
#: LoadGen's queries for more (a null backend probes as infinitely fast) would only waste memory.
MAX_PLANNED_RATE = 1_000_000.0
#: Without --target-qps, Server is asked for a quarter of the probed throughput (at most 20k QPS), which a
#: batching SUT meets within the bound; --mode find-peak (coming) searches for the highest valid rate.
SERVER_FRACTION, SERVER_DEFAULT_MAX = 0.25, 20_000.0
#: Server and MultiStream judge the 99th percentile; with no late query, early stopping needs about this many.
QUICK_TAIL_QUERIES = 662
#: Models whose workload input is a single tensor (image and volume models) can be served today.
SERVABLE_DOMAINS = ("image classification", "medical imaging")


def _predictor(
    params: InferParams, device: "torch.device"
) -> tuple[Callable[[list[Any]], object], Callable[[int], Any]]:
    """(predict on a list of sample inputs, make the input of sample i)."""
    import torch

    if params.backend == "null":
        return (lambda inputs: None), (lambda i: i)
    from accelbench.workloads import workload_class

    workload = workload_class(params.model)()
    if workload.info.domain not in SERVABLE_DOMAINS:
        raise UsageError(f"serving {params.model} is not supported yet; image models and unet3d are")
    model = workload.build(params.scale).to(device).eval()
    dtype = {"amp_fp16": torch.float16, "amp_bf16": torch.bfloat16}.get(params.precision)

    def make_input(i: int) -> torch.Tensor:
        torch.manual_seed(i)
        return workload.synthetic_batch(1, device, params.scale)[0][0]

    def predict(inputs: list[Any]) -> object:
        with torch.inference_mode(), torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            out = model(torch.stack(inputs))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return out

    return predict, make_input


def _probe(predict: Callable[[list[Any]], object], inputs: list[Any], batch: int) -> tuple[float, float]:
    """(samples/s at the full batch, seconds for one sample): the hints LoadGen is given."""
    for _ in range(2):
        predict(inputs[:batch])
    t0 = time.perf_counter()
    for _ in range(3):
        predict(inputs[:batch])
    per_batch = (time.perf_counter() - t0) / 3
    t0 = time.perf_counter()
    for _ in range(5):
        predict(inputs[:1])
    single = (time.perf_counter() - t0) / 5
    return min(batch / max(per_batch, 1e-9), MAX_PLANNED_RATE), max(single, 1e-7)


def _settings(params: InferParams, rate: float, single: float, bound_ms: float) -> Any:
    import mlperf_loadgen as lg

    s = lg.TestSettings()
    s.scenario = {
        "offline": lg.TestScenario.Offline,
        "server": lg.TestScenario.Server,
        "singlestream": lg.TestScenario.SingleStream,
        "multistream": lg.TestScenario.MultiStream,
    }[params.scenario]
    s.mode = lg.TestMode.PerformanceOnly
    duration = params.duration or (2.0 if params.profile == "quick" else 600.0)
    s.min_duration_ms = int(duration * 1000)
    if params.profile == "quick":
        # enough queries for LoadGen's early-stopping estimate of the tail percentile, and no more
        s.min_query_count = {"offline": 1, "singlestream": 64}.get(params.scenario, QUICK_TAIL_QUERIES)
    s.offline_expected_qps = rate * 1.1
    s.single_stream_expected_latency_ns = int(single * 1e9)
    s.server_target_qps = params.target_qps or max(1.0, min(rate * SERVER_FRACTION, SERVER_DEFAULT_MAX))
    s.server_target_latency_ns = int(bound_ms * 1e6)
    s.multi_stream_samples_per_query = params.samples_per_query
    s.multi_stream_expected_latency_ns = int(params.samples_per_query / rate * 1e9)
    return s


def run(params: InferParams, ctx: RunContext) -> Iterator[Result]:
    import mlperf_loadgen as lg

    device, threads = prepare(params)
    record: dict[str, Any] = params.to_dict() | {"device": str(device), "threads": threads, "devices": 1}
    bound_ms = params.latency_bound_ms or SERVER_BOUND_MS.get(params.model, DEFAULT_BOUND_MS)
    predict, make_input = _predictor(params, device)
    total = QSL_SAMPLES[params.profile]
    qsl_lib = SampleLibrary(make_input, total)
    ctx.progress("probing the backend")
    probe_inputs = [make_input(i) for i in range(max(params.batch_size, params.samples_per_query))]
    rate, single = _probe(predict, probe_inputs, params.batch_size)
    settings = _settings(params, rate, single, bound_ms)
    outdir = ctx.log_dir / f"loadgen-{params.scenario}-{uuid.uuid4().hex[:8]}"
    outdir.mkdir(parents=True)
    log_settings = lg.LogSettings()
    log_settings.log_output.outdir = str(outdir)
    log_settings.log_output.copy_summary_to_stdout = False
    max_wait = params.max_wait_ms / 1000 if params.scenario == "server" else 0.0
    sut_impl = BatchingSUT(None if params.backend == "null" else predict, qsl_lib, params.batch_size, max_wait)
    sut = lg.ConstructSUT(sut_impl.issue, sut_impl.flush)
    qsl = lg.ConstructQSL(total, total, qsl_lib.load, qsl_lib.unload)
    ctx.progress(f"LoadGen {params.scenario} ({params.profile})")
    try:
        with ConditionsMonitor(threads) as monitor:
            # an explicit audit-config path that does not exist: a stray audit.config must not alter the run
            lg.StartTestWithLogSettings(sut, qsl, settings, log_settings, str(outdir / "no-audit.config"))
    finally:
        sut_impl.stop()
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
    if sut_impl.error is not None:
        raise sut_impl.error
    detail = read_detail(outdir / "mlperf_log_detail.txt")
    yield _result(params, record, detail, monitor.conditions.to_dict(), outdir, rate, single, bound_ms, sut_impl)


def _metric_for(scenario: str, d: dict[str, Any]) -> tuple[str, Metric]:
    if scenario == "offline":
        return "samples_per_second", Metric(float(d["result_samples_per_second"]), "samples/s", True, None, None)
    if scenario == "server":
        value = d.get("result_scheduled_samples_per_sec") or d.get("result_completed_samples_per_sec") or 0.0
        return "queries_per_second", Metric(float(value), "queries/s", True, None, None)
    if scenario == "singlestream":
        ns = d.get("result_90.00_percentile_latency_ns", 0)
        return "p90_latency_seconds", Metric(ns / 1e9, "s", False, None, None)
    ns = d.get("result_99.00_percentile_per_query_latency_ns") or d.get("result_99.00_percentile_latency_ns", 0)
    return "p99_latency_seconds", Metric(ns / 1e9, "s", False, None, None)


def _result(
    params: InferParams,
    record: dict[str, Any],
    d: dict[str, Any],
    conditions: dict[str, Any],
    outdir: Any,
    rate: float,
    single: float,
    bound_ms: float,
    sut: BatchingSUT,
) -> Result:
    name, primary = _metric_for(params.scenario, d)
    metrics = {name: primary}
    for key, label in (
        ("result_50.00_percentile_latency_ns", "latency_p50_seconds"),
        ("result_90.00_percentile_latency_ns", "latency_p90_seconds"),
        ("result_95.00_percentile_latency_ns", "latency_p95_seconds"),
        ("result_99.00_percentile_latency_ns", "latency_p99_seconds"),
        ("result_99.90_percentile_latency_ns", "latency_p99_9_seconds"),
        ("result_mean_latency_ns", "latency_mean_seconds"),
        ("result_min_latency_ns", "latency_min_seconds"),
        ("result_max_latency_ns", "latency_max_seconds"),
    ):
        if key in d and label not in metrics:
            metrics[label] = Metric(d[key] / 1e9, "s", False, None, None)
    valid = d.get("result_validity") == "VALID"
    details = {
        "valid": valid,
        "loadgen_log_dir": str(outdir),
        "compliant": params.profile == "official",
        "probe": {"samples_per_second": rate, "single_sample_seconds": single},
        "latency_bound_ms": bound_ms if params.scenario in ("server", "multistream") else None,
        "sut_batches": sut.batches,
        "sut_samples": sut.samples,
        "loadgen_version": d.get("loadgen_version"),
    }
    warnings = [w for w in conditions.get("warnings", []) if w]
    if not valid:
        details["invalid_reasons"] = invalid_reasons(d, params.scenario)
        warnings = [f"INVALID: {r}" for r in details["invalid_reasons"]] + warnings
    if params.profile == "quick":
        warnings.append("non-compliant: the quick profile is shorter than MLPerf's rules")
    return Result(
        NAME,
        record | {"valid": valid},
        metrics=metrics,
        primary_metric=name,
        warnings=warnings,
        conditions=conditions,
        details=details,
    )
