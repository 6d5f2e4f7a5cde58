"""``train/throughput``: samples per second of one model training on synthetic data.

Batch sizes are per device; ``auto`` searches the largest that fits (:mod:`accelbench.train.autobatch`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Iterator

from accelbench.devices.kind import kind_of
from accelbench.devices.precision import precision_reason
from accelbench.families import benchmark_of
from accelbench.kit import metrics as fig
from accelbench.kit.context import RunContext, prepare, skip_if
from accelbench.kit.ranks import Nodes, node_gpus, run_ranks
from accelbench.measure.conditions import ConditionsMonitor
from accelbench.measure.stats import Measurement
from accelbench.params import parse_size
from accelbench.results.record import Result
from accelbench.system.specs import peak_for
from accelbench.train import loop
from accelbench.train.autobatch import find_batch
from accelbench.train.data import default_workers, measure_pipeline, open_pipeline
from accelbench.train.specs import (
    UNUSED_PIPELINE,
    TrainDetails,
    TrainParams,
    devices_used,
    training_figures,
    windowed_result,
)
from accelbench.workloads import workload_class

if TYPE_CHECKING:
    import torch


def _memory_cap(params: TrainParams, device: "torch.device") -> int | None:
    if params.memory_cap:
        return parse_size(params.memory_cap)
    if device.type == "cpu":
        import psutil

        return int(psutil.virtual_memory().available * 0.8)
    return None


def _failed(record: dict[str, Any], error: str, **fields: Any) -> Result:
    return Result.failed(benchmark_of(TrainParams), record, error, **fields)


def run(params: TrainParams, ctx: RunContext) -> Iterator[Result]:
    if params.world_size > 1:
        yield from run_distributed(params, ctx)
        return
    yield from run_single(params, ctx)


def run_distributed(params: TrainParams, ctx: RunContext) -> Iterator[Result]:
    """DDP over ``nproc`` ranks per node under the kit's launcher; rank 0's figures become the record."""
    prep = prepare(params)
    device = prep.device
    info = workload_class(params.model).info
    record: dict[str, Any] = params.to_dict() | {"device": kind_of(device).name, "display_every": params.window}
    peak_precision = loop.PEAK_PRECISION[params.precision]
    skip_if(precision_reason(device, peak_precision, params.emulated), record)
    batch = info.batch_for(device) if params.batch_size == "default" else int(params.batch_size)
    world = params.world_size
    record |= {"batch_size": batch, "batch_size_request": params.batch_size, "global_batch_size": batch * world}
    if params.data == "synthetic":
        record |= UNUSED_PIPELINE
    else:
        record["workers"] = workers(params)
    gpus = node_gpus(params.nproc, device.type, record)
    with ConditionsMonitor(prep.threads, gpus=gpus) as monitor:
        data = run_ranks(  # a dead rank raises the failed record every family's ranks give
            "accelbench.train.ddp_rank",
            {"params": params.to_dict(), "batch": batch, "workers": record["workers"]},
            ctx,
            nproc=params.nproc,
            device_type=device.type,
            budget=300 + 20 * (params.warmup + params.num_batches),
            nodes=Nodes.of(params),
            record=record,
        )
    m = Measurement(tuple(data["samples"]), calls_per_sample=params.window, clock=data["clock"])
    details: TrainDetails = {"domain": info.domain, "sample_unit": info.sample_unit, "source": info.source}
    details |= {"world_size": data["world_size"], "backend": data["backend"], "final_loss": data["loss"]}
    devices = devices_used(params.nproc, params.nnodes, device)
    details["devices"] = devices
    if data.get("pipeline"):
        details |= {"pipeline": data["pipeline"], "input_wait_seconds_per_window": data["input_waits"]}
    record["threads"] = data["threads"]
    if not math.isfinite(data["loss"]):
        yield _failed(record, f"the loss is not finite ({data['loss']}) during the {params.num_batches} measured steps")
        return
    yield _result(
        record,
        m,
        batch,
        int(data["peak_memory_bytes"]),
        data["flops_per_sample"],
        device,
        data["threads"],
        peak_precision,
        info.sample_unit,
        details,
        monitor.conditions.to_dict(),
        world=data["world_size"],
        devices=devices,
    )


def run_single(params: TrainParams, ctx: RunContext) -> Iterator[Result]:

    prep = prepare(params)
    device, threads = prep.device, prep.threads
    workload = workload_class(params.model)()
    info = workload.info
    record = prep.record(params, display_every=params.window)
    if params.data == "synthetic":  # a sweep's --data-dir and --workers do not apply here: not recorded
        record |= UNUSED_PIPELINE
    peak_precision = loop.PEAK_PRECISION[params.precision]
    skip_if(precision_reason(device, peak_precision, params.emulated), record)
    details: TrainDetails = {"domain": info.domain, "sample_unit": info.sample_unit, "source": info.source}
    if params.data_only:
        yield _data_only(params, workload, device, threads, record, details, ctx)
        return
    ctx.progress(f"building {info.name} ({params.scale})")
    model = loop.prepare_model(workload, params, device)
    batch = _batch_size(workload, model, params, device, details, ctx)
    if batch is None:
        yield _failed(record, "not even a batch of 1 fits in memory (or under --memory-cap)", details=details)
        return
    record |= {"batch_size": batch, "batch_size_request": params.batch_size, "global_batch_size": batch}
    try:
        trainer, flops = _trainer(workload, model, params, device, batch, record, details, ctx)
        with ConditionsMonitor(threads, kind_of(device).monitored(device)) as monitor, loop.PeakMemory(device) as mem:
            measurement, last_loss = loop.run_windows(trainer, params, _progress(ctx, params, batch, info), ctx.stop)
    except Exception as exc:
        if not loop.is_oom(exc):
            raise
        yield _failed(record, _did_not_fit(batch, exc))
        return
    if not math.isfinite(last_loss):
        yield _failed(record, f"the loss is not finite ({last_loss}) during the {params.num_batches} measured steps")
        return
    details["final_loss"] = last_loss
    details["peak_memory_method"] = mem.method
    conditions = monitor.conditions.to_dict()
    if trainer.window_waits:
        details["input_wait_seconds_per_window"] = trainer.window_waits
    if trainer.stopped:
        details["stopped"] = trainer.stopped
    result = _result(
        record,
        measurement,
        batch,
        mem.peak,
        flops,
        device,
        threads,
        peak_precision,
        info.sample_unit,
        details,
        conditions,
    )
    if trainer.stopped:  # the windows finished before a Ctrl-C or the timeout: kept, and said to be partial
        result.concern("stopped-early", f"stopped early: {trainer.stopped}")
    yield result


def _batch_size(
    workload: Any, model: Any, params: TrainParams, device: "torch.device", details: TrainDetails, ctx: RunContext
) -> int | None:
    """The batch per device: the flag, the model's default, or with ``auto`` the largest that fits (its trials in
    ``details``); None where not even 1 does."""
    info = workload.info
    if params.batch_size != "auto":
        return info.batch_for(device) if params.batch_size == "default" else int(params.batch_size)
    search = find_batch(workload, model, params, device, info.batch_for(device), _memory_cap(params, device), ctx)
    batch, details["auto_batch_trials"] = search.batch, search.trials
    details["auto_batch"] = search.summary()
    return batch


def _trainer(
    workload: Any,
    model: Any,
    params: TrainParams,
    device: "torch.device",
    batch: int,
    record: dict[str, Any],
    details: TrainDetails,
    ctx: RunContext,
) -> tuple[loop.Trainer, float | None]:
    """The trainer ready to time: its input pipeline where the data is real, its FLOPs a sample counted (before
    --compile compiles it), and those FLOPs."""
    trainer = loop.make_trainer(workload, model, params, device, batch)
    if params.data == "real":
        ctx.progress("starting the input pipeline")
        record["workers"] = workers(params)
        trainer.use_real_data(params, batch, record["workers"])
        details["pipeline"] = trainer.pipeline.setup if trainer.pipeline else {}
    ctx.progress("counting FLOPs")
    flops = loop.flops_per_sample(trainer, batch)
    if params.compile:
        ctx.progress("compiling")
        trainer.model = loop.compiled(model, params)
    return trainer, flops


def _did_not_fit(batch: int, exc: BaseException) -> str:
    return (
        f"batch size {batch} per device did not fit in memory ({str(exc).splitlines()[0][:160]}); "
        "try a smaller --batch-size or --batch-size auto"
    )


def _progress(ctx: RunContext, params: TrainParams, batch: int, info: Any) -> Callable[[int, float], None]:
    """What each measured window says: the step, the rate, and the time the steps left take at it."""
    return lambda step, sec: ctx.progress(
        f"step {step}/{params.num_batches}: {batch / sec:,.1f} {info.sample_unit}/s",
        left=(params.num_batches - step) * sec,
    )


def workers(params: TrainParams) -> int:
    """The loader workers of one rank: the flag, or the cores available to it (see data.default_workers)."""
    return params.workers if params.workers >= 0 else default_workers(params.nproc)


def _data_only(
    params: TrainParams,
    workload: Any,
    device: "torch.device",
    threads: int,
    record: dict[str, Any],
    details: TrainDetails,
    ctx: RunContext,
) -> Result:
    """``--data-only``: the input pipeline alone, the samples/s it can deliver to the device."""
    info = workload.info
    batch = info.batch_for(device) if params.batch_size == "default" else int(params.batch_size)
    record |= {"batch_size": batch, "batch_size_request": params.batch_size, "global_batch_size": batch}
    record["workers"] = workers(params)
    ctx.progress("starting the input pipeline")
    pipeline = open_pipeline(workload, params, device, batch, record["workers"])
    details["pipeline"] = pipeline.setup
    ctx.progress(f"timing the pipeline alone: {params.num_batches} batches")
    with ConditionsMonitor(threads, None) as monitor:
        m = measure_pipeline(pipeline, device, params.warmup, params.num_batches // params.window, params.window)
    metrics = {"throughput": fig.rate(batch, m, f"{info.sample_unit}/s"), "batch_seconds": fig.seconds(m)}
    details["data_only"] = True
    return windowed_result(benchmark_of(TrainParams), record, m, metrics, details, monitor.conditions.to_dict())


def _result(
    record: dict[str, Any],
    m: Any,
    batch: int,
    peak_memory: int,
    flops: float | None,
    device: "torch.device",
    threads: int,
    precision: str,
    unit: str,
    details: TrainDetails,
    conditions: dict[str, Any],
    world: int = 1,
    devices: int = 1,
) -> Result:
    """The record: system throughput (median over windows, with CI), per device, step time, memory, FLOPs. Per
    device and against the peak of the ``devices`` the ``world`` ranks ran on: ranks sharing one CPU share it."""
    metrics = training_figures(batch * world, m, f"{unit}/s", devices, peak_memory)
    throughput = metrics["throughput"]
    waits = details.get("input_wait_seconds_per_window")
    if waits:  # the share of each window the steps spent waiting for their batches: input-bound by this much
        shares = sorted(w / (s * m.calls_per_sample) for w, s in zip(waits, m.samples, strict=True))
        metrics["input_wait_share"] = fig.figure(100 * shares[len(shares) // 2], "%", higher_is_better=False, n=m.n)
    if flops:
        tflops = fig.scaled(throughput, flops / 1e12, "TFLOPS")
        metrics["tflops"] = tflops
        # the threads the peak is counted on: every rank's on a CPU the ranks share, else one rank's
        shared = world // devices if not kind_of(device).accelerator else 1
        peak = peak_for(device, precision, threads * shared)
        if peak is not None:
            metrics["pct_of_peak"] = fig.pct_of_peak(tflops, peak.tflops * devices)
            details["peak"] = fig.peak_details(peak.tflops, "TFLOPS", peak.source, peak.estimated)
        details["flops_per_sample"] = flops
    return windowed_result(benchmark_of(TrainParams), record, m, metrics, details, conditions)
