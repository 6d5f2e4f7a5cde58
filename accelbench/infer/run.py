"""``infer/loadgen``: LoadGen against a batching SUT, with LoadGen's verdict recorded. Each benchmark runs in a
worker process of its own (LoadGen's state is process-global); a probe of the backend sets LoadGen's hints
before the measured run."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np

from accelbench.devices.kind import kind_of
from accelbench.devices.precision import arithmetic_of, precision_reason
from accelbench.errors import BenchmarkSkipped, UsageError
from accelbench.infer import accuracy
from accelbench.infer import settings as lgset
from accelbench.infer.backends import Backend
from accelbench.infer.catalog import backend
from accelbench.infer.driver import loadgen_run
from accelbench.infer.peak import find_peak
from accelbench.infer.results import ImageDetails, image_details, performance_result
from accelbench.infer.served import Served, served
from accelbench.infer.serving import Serving
from accelbench.infer.specs import InferParams
from accelbench.infer.sut import Worker
from accelbench.kit.context import RunContext, prepare, skip_if
from accelbench.loadgen import replan
from accelbench.loadgen.params import QSL_SAMPLES
from accelbench.loadgen.settings import Probe, planned_seconds
from accelbench.results.record import Result

if TYPE_CHECKING:
    import torch

#: accuracy mode on synthetic samples (no --dataset): this many, each answered once
SYNTHETIC_ACCURACY_SAMPLES = 256


def _devices(params: InferParams, device: "torch.device") -> list["torch.device"]:
    """The serving workers' devices: ``--device cuda:N --nproc K`` serves on cuda:N..N+K-1 (the record names
    cuda:N), each device ``--streams`` times (requests in flight on it: workers, never more devices)."""
    kind = kind_of(device)
    if not kind.accelerator:
        return [device] * params.workers
    first = device.index or 0
    available = kind.count()
    if first + params.nproc > available:
        name = device.type
        raise BenchmarkSkipped(
            f"--nproc {params.nproc} from {name}:{first} needs devices up to {name}:{first + params.nproc - 1}; "
            f"this machine has {available}"
        )
    return [kind.resolve(first + i) for i in range(params.nproc) for _ in range(params.streams)]


#: Samples whose activations calibrate random weights in accuracy mode.
BN_SAMPLES = 64


def calibrate_random_weights(model: Any, spec: Served, make_input: Callable[[int], Any], total: int) -> str:
    """A data-dependent initialisation of random weights, so that their answers differ from input to input (random
    weights under BatchNorm's default statistics answer one class for nearly every input): BatchNorm's running
    statistics measured on the samples, a classifier's bias centring each class's logit. Deterministic; returns
    what was done, for the record ("" if nothing)."""
    import torch

    n = min(total, BN_SAMPLES)
    where = next(model.parameters()).device  # the model is still on the host here; samples may be on a GPU

    def forward() -> Any:
        out = []
        for start in range(0, n, 16):
            batch = spec.collate([make_input(i) for i in range(start, min(n, start + 16))])
            out.append(spec.forward(model, tuple(t.to(where) for t in batch)))
        return out

    done = []
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    with torch.no_grad():
        if norms:
            for m in norms:  # only the norms in training mode: a detector in training mode wants targets
                m.reset_running_stats()
                m.momentum = None  # a cumulative average over the calibration batches
                m.train()
            forward()
            model.eval()
            done.append(f"BatchNorm statistics from {n} samples")
        last = [m for m in model.modules() if isinstance(m, torch.nn.Linear)][-1:]
        outputs = forward()
        if last and last[0].bias is not None and all(torch.is_tensor(o) and o.dim() == 2 for o in outputs):
            logits = torch.cat(outputs)
            if logits.shape[1] == last[0].out_features:
                last[0].bias.sub_(logits.mean(0).to(last[0].bias.dtype))  # in place, as -= (which reassigns)
                done.append(f"classifier bias centring each logit over {n} samples")
    return ", ".join(done)


def _build(params: InferParams, model_spec: Served) -> "torch.nn.Module":
    import torch

    torch.manual_seed(0)  # random weights (no --checkpoint) are the same in every run
    model = model_spec.build().eval()
    if params.checkpoint:
        from accelbench.infer.weights import read_state_dict

        state = read_state_dict(Path(params.checkpoint).expanduser())
        try:
            model.load_state_dict(state)
        except (RuntimeError, KeyError, AttributeError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UsageError(f"checkpoint {params.checkpoint} does not fit {params.model}: {first}") from None
    return model


def setup(params: InferParams, ctx: RunContext) -> Serving:
    import torch

    prep = prepare(params, autotune=False)  # batches vary in size: no cuDNN search inside a timed run
    device, threads = prep.device, prep.threads
    impl: Backend = backend(params.backend)
    impl.cache_dir = ctx.cache_dir  # an export made by an earlier entry of this run (same weights) is reused
    impl.scratch_dir = ctx.scratch_dir  # its working files live in the run folder and go with the entry
    impl.export_cache = ctx.export_cache  # an export of the same weights and shapes, from this run or an earlier one
    precision = params.effective_precision
    # int8 is ONNX Runtime's own kernels (AVX2 included), not a torch emulation: only torch's fp16/bf16 arithmetic
    # (autocast or converted weights) is checked
    computes = impl.runs_model and arithmetic_of(precision) in ("bf16", "fp16")
    hardware = precision_reason(device, precision, params.emulated) if computes else None
    skip_if(impl.unsupported(precision) or impl.unsupported_on(device.type) or params.export_refusal() or hardware)
    devices = _devices(params, device)
    # its own settings, and the run's settings it reads (only those: a user's backend takes what it declares)
    settings = params.backend_options | {name: getattr(params, name) for name in impl.reads}
    if not impl.runs_model:
        answer = [impl.load(None, None, d, params.effective_precision, [], **settings) for d in devices]  # type: ignore[arg-type]
        workers = [Worker(predict, None) for predict in answer]
        return Serving(workers, lambda i: i, QSL_SAMPLES[params.profile], list, None, None, threads, device)
    spec = served(params.model, params.scale)
    model = _build(params, spec)
    # one device: samples live on it; several: on the host, each worker copying its batch to its device; a
    # backend that reads host memory (ONNX Runtime) gets host samples and no copy
    on_host = len(set(devices)) > 1 or impl.host_inputs
    host = torch.device("cpu") if on_host else devices[0]
    dataset = spec.dataset(Path(params.dataset).expanduser()) if params.dataset else None
    if dataset is not None:
        make_input: Callable[[int], Any] = lambda i: dataset.inputs(i, host)  # noqa: E731
        total = len(dataset)
    else:
        make_input = lambda i: spec.synthetic(i, host)  # noqa: E731
        total = SYNTHETIC_ACCURACY_SAMPLES if params.mode == "accuracy" else QSL_SAMPLES[params.profile]
    calibration = [make_input(i) for i in range(min(total, 8))]
    weights = f"checkpoint {params.checkpoint}" if params.checkpoint else "random (torch seed 0)"
    # TEST01 compares a compliance run's answers with the accuracy run's: both serve the same calibrated weights
    if (params.mode == "accuracy" or params.audit == "TEST01") and not params.checkpoint:
        calibrated = calibrate_random_weights(model, spec, make_input, total)
        weights += f"; {calibrated}" if calibrated else ""
    ctx.progress(f"loading the {params.backend} backend on {len(devices)} device(s)")
    # accuracy mode keeps the FP32 eager model untouched as its reference (a backend may convert its replica);
    # otherwise the last device serves the built model itself rather than a copy
    keep_reference = params.mode == "accuracy"
    workers = []
    for i, d in enumerate(devices):
        last = i == len(devices) - 1
        replica = (model if last and not keep_reference else copy.deepcopy(model)).to(d)
        predict = impl.load(spec, replica, d, params.effective_precision, calibration, **settings)
        workers.append(Worker(predict, d if len(set(devices)) > 1 and not impl.host_inputs else None))
    reference = model.to(devices[0]) if keep_reference else None
    facts = getattr(impl, "facts", None) or {}  # a user's backend may not call Backend.__init__
    return Serving(workers, make_input, total, spec.collate, spec, reference, threads, device, dataset, weights, facts)


def run(params: InferParams, ctx: RunContext) -> Iterator[Result]:
    serving = setup(params, ctx)
    record: dict[str, Any] = params.to_dict() | {
        "precision": params.effective_precision,
        "device": kind_of(serving.device).record_name(serving.device),
        "threads": serving.threads,
    }
    ctx.progress("probing the backend")
    probe = lgset.probe(serving, params)
    if params.mode == "accuracy":
        result = accuracy.measure(params, serving, record, lgset.accuracy_settings(params, probe), ctx)
    elif params.mode == "find-peak":
        result = find_peak(params, serving, probe, record, ctx)
    else:
        result = _performance(params, serving, record, probe, ctx)
    if serving.facts:  # what the runtime chose (OpenVINO's precision, streams and optimal requests)
        image_details(result)["backend"] = serving.facts
    yield result


def _answers(params: InferParams, serving: Serving) -> Callable[[list[int], Any], list[Any]] | None:
    """What a performance run answers LoadGen with: nothing (the timing alone), except in TEST01, whose sampled
    answers are compared with the accuracy run's (the answers an accuracy run logs)."""
    spec = serving.served
    if params.audit != "TEST01" or spec is None:
        return None
    return lambda _indices, out: spec.answers(out)


def _performance(
    params: InferParams, serving: Serving, record: dict[str, Any], probe: Probe, ctx: RunContext
) -> Result:
    """One measured LoadGen run, repeated (at most ``replan.MAX_RERUNS`` times) while it disagrees with its plan.

    A run that ran out of the queries the probe planned (or, in Server, was overloaded by the probe's target)
    says nothing about the system; it is rerun with hints from what it measured, and only the last run is
    reported, with the earlier ones in ``details.reruns`` and a warning saying why.
    """
    reuse = lgset.base(params)  # FromConfig reads mlperf.conf once per process: one settings object for every run
    least_queries = reuse.min_query_count  # the Offline plan below raises it: each run starts from the profile's
    reruns: list[dict[str, Any]] = []
    while True:
        reuse.min_query_count = least_queries
        settings = lgset.performance_settings(params, probe, reuse=reuse)
        again = f" again ({len(reruns)} of at most {replan.MAX_RERUNS} reruns)" if reruns else ""
        ctx.progress(
            f"LoadGen {params.scenario}{again} ({params.profile}: at least {settings.min_duration_ms / 1000:g} s)",
            left=planned_seconds(settings, params.scenario, probe.rate),
        )
        outcome = loadgen_run(serving, settings, params, ctx, answers=_answers(params, serving))
        wrong = replan.disagreement(outcome.detail, params, probe, outcome.sut.samples)
        if wrong is None or len(reruns) == replan.MAX_RERUNS:
            break
        ctx.progress(f"the run disagreed with its plan: {wrong.why}; probing again")
        repeated = lgset.probe(serving, params, warm=False)
        reruns.append(replan.rerun(wrong, probe, repeated, outcome.outdir, outcome.conditions))
        probe = replan.replanned(probe, wrong.measured, repeated, params.scenario, bool(reruns[-1]["contended"]))
    extra: ImageDetails = {"reruns": reruns} if reruns else {}
    if params.audit == "TEST01" and serving.served is not None:  # how its sampled answers decode
        extra["answer_dtype"] = np.dtype(serving.served.answer_dtype).name
    result = performance_result(params, record, outcome, probe, extra or None)
    if reruns:
        result.concern("rerun", replan.rerun_warning(reruns), first=True, runs=len(reruns) + 1)
    return result
