"""``infer/loadgen``: LoadGen against a batching SUT, with LoadGen's verdict recorded.

Each benchmark runs in its own isolated worker process (the suite runner's), so
LoadGen's process-global state starts fresh (``TestSettings.FromConfig`` reads
``mlperf.conf`` once per process); its logs go to the run folder, and the
audit-config path is explicit so that a stray ``audit.config`` in the working
directory cannot change a run. Before the measured run a short probe times the
backend, and the hints LoadGen needs are set from it (expected Offline
throughput, expected latencies, a Server target of a quarter of the probed
throughput unless ``--target-qps`` is given).
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from accelbench.errors import BenchmarkSkipped, UsageError
from accelbench.infer import settings as lgset
from accelbench.infer.backends import Backend, backend
from accelbench.infer.logs import read_detail
from accelbench.infer.results import accuracy_result, performance_result
from accelbench.infer.served import Served, served
from accelbench.infer.specs import InferParams
from accelbench.infer.sut import BatchingSUT, SampleLibrary, Worker
from accelbench.kernels.common import prepare
from accelbench.measure.conditions import ConditionsMonitor
from accelbench.registry import RunContext
from accelbench.results.record import Result

if TYPE_CHECKING:
    import torch

NAME = "infer/loadgen"
QSL_SAMPLES = {"quick": 64, "official": 1024}
#: accuracy mode on synthetic samples (no --dataset): this many, each answered once
SYNTHETIC_ACCURACY_SAMPLES = 256


@dataclass
class Serving:
    """Everything a LoadGen run needs: the workers, the samples and how they batch."""

    workers: list[Worker]
    make_input: Callable[[int], Any]
    total: int
    collate: Callable[[list[Any]], Any]
    served: Served | None
    model: Any
    threads: int
    device: Any = None
    dataset: Any = None


def _devices(params: InferParams, device: "torch.device") -> list["torch.device"]:
    import torch

    if device.type != "cuda":
        return [device] * params.devices
    available = torch.cuda.device_count()
    if params.devices > available:
        raise BenchmarkSkipped(f"--devices {params.devices} needs {params.devices} GPUs; this machine has {available}")
    return [torch.device("cuda", i) for i in range(params.devices)]


def _build(params: InferParams, model_spec: Served) -> "torch.nn.Module":
    import torch

    model = model_spec.build().eval()
    if params.checkpoint:
        try:
            state = torch.load(params.checkpoint, map_location="cpu", weights_only=True)
            model.load_state_dict(state.get("state_dict", state) if isinstance(state, dict) else state)
        except (RuntimeError, KeyError, AttributeError, OSError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UsageError(f"checkpoint {params.checkpoint} does not fit {params.model}: {first}") from None
    return model


def setup(params: InferParams, ctx: RunContext) -> Serving:
    import torch

    device, threads = prepare(params)
    impl: Backend = backend(params.backend, params.service_ms)
    devices = _devices(params, device)
    if not impl.runs_model:
        workers = [Worker(impl.load(None, None, d, params.effective_precision, []), None) for d in devices]  # type: ignore[arg-type]
        return Serving(workers, lambda i: i, QSL_SAMPLES[params.profile], list, None, None, threads, device)
    spec = served(params.model, params.scale)
    model = _build(params, spec)
    host = devices[0] if len(devices) == 1 else torch.device("cpu")  # several devices: each worker copies its batch
    dataset = spec.dataset(Path(params.dataset).expanduser()) if params.dataset else None
    if dataset is not None:
        make_input: Callable[[int], Any] = lambda i: dataset.inputs(i, host)  # noqa: E731
        total = len(dataset)
    else:
        make_input = lambda i: spec.synthetic(i, host)  # noqa: E731
        total = SYNTHETIC_ACCURACY_SAMPLES if params.mode == "accuracy" else QSL_SAMPLES[params.profile]
    calibration = [make_input(i) for i in range(min(total, 8))]
    ctx.progress(f"loading the {params.backend} backend on {len(devices)} device(s)")
    # accuracy mode keeps the FP32 eager model untouched as its reference (a backend may convert its replica);
    # otherwise the last device serves the built model itself rather than a copy
    keep_reference = params.mode == "accuracy"
    workers = []
    for i, d in enumerate(devices):
        last = i == len(devices) - 1
        replica = (model if last and not keep_reference else copy.deepcopy(model)).to(d)
        predict = impl.load(spec, replica, d, params.effective_precision, calibration)
        workers.append(Worker(predict, d if len(devices) > 1 else None))
    reference = model.to(devices[0]) if keep_reference else None
    return Serving(workers, make_input, total, spec.collate, spec, reference, threads, device, dataset)


def run(params: InferParams, ctx: RunContext) -> Iterator[Result]:
    serving = setup(params, ctx)
    record: dict[str, Any] = params.to_dict() | {
        "precision": params.effective_precision,
        "device": str(serving.device),
        "threads": serving.threads,
    }
    ctx.progress("probing the backend")
    probe = lgset.probe(serving, params)
    if params.mode == "accuracy":
        yield _accuracy(params, serving, record, probe, ctx)
        return
    if params.mode == "find-peak":
        from accelbench.infer.peak import find_peak

        yield find_peak(params, serving, probe, record, ctx)
        return
    settings = lgset.performance_settings(params, probe)
    ctx.progress(f"LoadGen {params.scenario} ({params.profile}: at least {settings.min_duration_ms / 1000:g} s)")
    outcome = loadgen_run(serving, settings, params, ctx)
    yield performance_result(params, record, outcome, probe)


@dataclass
class Outcome:
    detail: dict[str, Any]
    conditions: dict[str, Any]
    outdir: Any
    sut: BatchingSUT


def loadgen_run(
    serving: Serving, settings: Any, params: InferParams, ctx: RunContext, answers: bool = False
) -> Outcome:
    """One LoadGen test: its own log folder, an explicit (absent) audit config, the SUT stopped whatever happens."""
    import mlperf_loadgen as lg

    outdir = ctx.log_dir / f"loadgen-{params.scenario}-{params.mode}-{uuid.uuid4().hex[:8]}"
    outdir.mkdir(parents=True)
    log_settings = lg.LogSettings()
    log_settings.log_output.outdir = str(outdir)
    log_settings.log_output.copy_summary_to_stdout = False
    qsl_lib = SampleLibrary(serving.make_input, serving.total)
    max_wait = params.max_wait_ms / 1000 if params.scenario == "server" else 0.0
    respond = serving.served.answers if answers and serving.served is not None else None
    sut_impl = BatchingSUT(serving.workers, qsl_lib, params.batch_size, max_wait, serving.collate, respond)
    sut = lg.ConstructSUT(sut_impl.issue, sut_impl.flush)
    in_memory = min(serving.total, QSL_SAMPLES[params.profile])
    qsl = lg.ConstructQSL(serving.total, in_memory, qsl_lib.load, qsl_lib.unload)
    try:
        with ConditionsMonitor(serving.threads) as monitor:
            # an explicit audit-config path that does not exist: a stray audit.config must not alter the run
            lg.StartTestWithLogSettings(sut, qsl, settings, log_settings, str(outdir / "no-audit.config"))
    finally:
        sut_impl.stop()
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
    if sut_impl.error is not None:
        raise sut_impl.error
    detail = read_detail(outdir / "mlperf_log_detail.txt")
    return Outcome(detail, monitor.conditions.to_dict(), outdir, sut_impl)


def _accuracy(
    params: InferParams, serving: Serving, record: dict[str, Any], probe: lgset.Probe, ctx: RunContext
) -> Result:
    from accelbench.infer.accuracy import judge, read_accuracy_log, reference_answers

    spec = serving.served
    assert spec is not None
    ctx.progress(f"FP32 reference on {serving.total} samples")
    reference = reference_answers(spec, serving.model, serving.make_input, serving.total, params.batch_size)
    ctx.progress(f"LoadGen {params.scenario} accuracy ({serving.total} samples)")
    outcome = loadgen_run(serving, lgset.accuracy_settings(params, probe), params, ctx, answers=True)
    logged = read_accuracy_log(outcome.outdir / "mlperf_log_accuracy.json", spec.answer_dtype)
    labels = serving.dataset.labels if serving.dataset is not None else None
    verdict = judge(spec, logged, reference, labels)
    return accuracy_result(params, record, outcome, verdict)
