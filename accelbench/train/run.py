"""``train/throughput``: samples per second of one model training on synthetic data.

Batch sizes are per device. ``auto`` finds the largest batch that fits: start
from the model's default, double until a step runs out of memory (or exceeds
``--memory-cap``; on a CPU, 80% of the memory available at the start, so the
search never wakes the kernel's OOM killer), then bisect between the last batch
that fit and the first that did not.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterator

from accelbench.devices.precision import matmul_mode, unsupported_reason
from accelbench.errors import UsageError
from accelbench.kernels.common import prepare
from accelbench.measure.conditions import ConditionsMonitor
from accelbench.params import parse_size
from accelbench.registry import RunContext
from accelbench.results.record import Metric, Result
from accelbench.system.specs import peak_for
from accelbench.train import loop
from accelbench.train.specs import TrainParams
from accelbench.workloads import workload_class

if TYPE_CHECKING:
    import torch

    from accelbench.workloads.base import Workload

NAME = "train/throughput"
BISECT_STEPS = 4


def find_batch(
    workload: "Workload",
    model: "torch.nn.Module",
    params: TrainParams,
    device: "torch.device",
    start: int,
    cap: int | None,
    ctx: RunContext,
) -> tuple[int | None, list[dict[str, Any]]]:
    """The largest per-device batch whose steps fit in memory (None if not even 1 fits), and every trial."""
    from accelbench.devices import synchronize

    trials: list[dict[str, Any]] = []
    with loop.PeakMemory(device) as base:
        pass
    baseline = base.start  # memory in use before any trial: model, optimizer-free

    def fits(batch: int) -> bool:
        peak = None
        with loop.freed(device):
            try:
                trainer = loop.make_trainer(workload, model, params, device, batch)
                with loop.PeakMemory(device, sample=True) as mem:
                    for _ in range(2):
                        trainer.step()
                    synchronize(device)
                peak = baseline + mem.growth
                ok = cap is None or peak <= cap
            except Exception as exc:
                if not loop.is_oom(exc):
                    raise
                ok = False
            finally:
                trainer = None  # noqa: F841 (drop the batch and optimizer state before the next trial)
        trials.append({"batch_size": batch, "fits": ok, "peak_memory_bytes": peak})
        ctx.progress(f"auto batch: {batch} {'fits' if ok else 'does not fit'}")
        return ok

    limit = max(65536, 16 * start)
    good: int | None = None
    bad: int | None = None
    batch = start
    if fits(batch):
        good = batch
        while batch * 2 <= limit:
            batch *= 2
            if not fits(batch):
                bad = batch
                break
            good = batch
    else:
        bad = batch
        while batch > 1:
            batch //= 2
            if fits(batch):
                good = batch
                break
            bad = batch
    if good is None:
        return None, trials
    for _ in range(BISECT_STEPS):
        if bad is None or bad - good <= max(1, good // 16):
            break
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return good, trials


def _memory_cap(params: TrainParams, device: "torch.device") -> int | None:
    if params.memory_cap:
        return parse_size(params.memory_cap)
    if device.type == "cpu":
        import psutil

        return int(psutil.virtual_memory().available * 0.8)
    return None


def _failed(record: dict[str, Any], error: str) -> Result:
    return Result(NAME, record, status="failed", error=error)


def run(params: TrainParams, ctx: RunContext) -> Iterator[Result]:
    if params.world_size > 1:
        yield from run_distributed(params, ctx)
        return
    yield from run_single(params, ctx)


def run_distributed(params: TrainParams, ctx: RunContext) -> Iterator[Result]:
    """DDP over ``nproc`` processes per node under torchrun; rank 0's figures become the record."""
    import json
    import uuid

    from accelbench.launch.torchrun import check_nproc, run_torchrun
    from accelbench.measure.stats import Measurement

    device, threads = prepare(params)
    workload = workload_class(params.model)
    info = workload.info
    record: dict[str, Any] = params.to_dict() | {"device": device.type, "nproc": params.nproc}
    try:
        check_nproc(params.nproc, device.type)
    except UsageError as exc:  # in a suite, a machine with fewer devices skips this point
        yield Result(NAME, record, status="skipped", reason=str(exc))
        return
    peak_precision = loop.PEAK_PRECISION[params.precision]
    reason = unsupported_reason(device, peak_precision)
    if reason:
        yield Result(NAME, record, status="skipped", reason=reason)
        return
    batch = info.batch_for(device.type) if params.batch_size == "default" else int(params.batch_size)
    world = params.world_size
    record |= {"batch_size": batch, "batch_size_request": params.batch_size, "global_batch_size": batch * world}
    out = ctx.log_dir / f"train-ddp-{uuid.uuid4().hex[:8]}.json"
    budget = 300 + 20 * (params.warmup + params.num_batches)
    args = ["--params", json.dumps(params.to_dict()), "--batch", str(batch), "--out", str(out), "--timeout", "300"]
    ctx.progress(f"torchrun: {params.nproc} process(es) x {params.nnodes} node(s)")
    with ConditionsMonitor(threads) as monitor:
        try:
            run_torchrun(
                "accelbench.train.ddp_rank",
                args,
                params.nproc,
                ctx.log_dir / f"train-ddp-{out.stem[-8:]}.log",
                timeout=budget,
                nnodes=params.nnodes,
                node_rank=params.node_rank,
                rdzv_endpoint=params.rdzv_endpoint,
            )
        except RuntimeError as exc:
            yield _failed(record, f"a rank failed or hung, so the run was stopped: {exc}")
            return
    if not out.exists():
        yield Result(NAME, record, status="skipped", reason=f"node {params.node_rank}: node 0 records the result")
        return
    data = json.loads(out.read_text(encoding="utf-8"))
    out.unlink()
    m = Measurement(tuple(data["samples"]), clock="cuda_event" if device.type == "cuda" else "perf_counter_ns")
    details: dict[str, Any] = {"domain": info.domain, "sample_unit": info.sample_unit, "source": info.source}
    details |= {"world_size": data["world_size"], "backend": data["backend"], "final_loss": data["loss"]}
    record["threads"] = data["threads"]
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
    )


def run_single(params: TrainParams, ctx: RunContext) -> Iterator[Result]:
    import torch

    device, threads = prepare(params)
    workload = workload_class(params.model)()
    info = workload.info
    record: dict[str, Any] = params.to_dict() | {"device": str(device), "threads": threads}
    peak_precision = loop.PEAK_PRECISION[params.precision]
    reason = unsupported_reason(device, peak_precision if params.precision != "fp32" else "fp32")
    if reason:
        yield Result(NAME, record, status="skipped", reason=reason)
        return
    details: dict[str, Any] = {"domain": info.domain, "sample_unit": info.sample_unit, "source": info.source}
    with matmul_mode(device, "tf32" if params.precision == "tf32" else "fp32"):
        ctx.progress(f"building {info.name} ({params.scale})")
        model = loop.prepare_model(workload, params, device)
        if params.batch_size == "auto":
            batch, details["auto_batch_trials"] = find_batch(
                workload, model, params, device, info.batch_for(device.type), _memory_cap(params, device), ctx
            )
            if batch is None:
                failed = _failed(record, "not even a batch of 1 fits in memory (or under --memory-cap)")
                failed.details = details
                yield failed
                return
        else:
            batch = info.batch_for(device.type) if params.batch_size == "default" else int(params.batch_size)
        record |= {"batch_size": batch, "batch_size_request": params.batch_size, "global_batch_size": batch}
        try:
            trainer = loop.make_trainer(workload, model, params, device, batch)
            ctx.progress("counting FLOPs")
            flops = loop.flops_per_sample(trainer, batch)
            if params.compile:
                ctx.progress("compiling")
                trainer.model = torch.compile(model)
            gpu = (device.index or 0) if device.type == "cuda" else None
            with ConditionsMonitor(threads, gpu) as monitor, loop.PeakMemory(device) as mem:
                measurement, last_loss = loop.run_windows(
                    trainer,
                    params,
                    lambda step, sec: ctx.progress(
                        f"step {step}/{params.num_batches}: {batch / sec:,.1f} {info.sample_unit}/s"
                    ),
                )
        except Exception as exc:
            if not loop.is_oom(exc):
                raise
            yield _failed(
                record,
                f"batch size {batch} per device did not fit in memory ({str(exc).splitlines()[0][:160]}); "
                "try a smaller --batch-size or --batch-size auto",
            )
            return
    if not math.isfinite(last_loss):
        yield _failed(record, f"the loss is not finite ({last_loss}) after {params.num_batches} steps")
        return
    details["final_loss"] = last_loss
    conditions = monitor.conditions.to_dict()
    yield _result(
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
    details: dict[str, Any],
    conditions: dict[str, Any],
    world: int = 1,
) -> Result:
    """The record: system throughput (median over windows, with CI), per device, step time, memory, FLOPs."""
    lo, hi = m.ci95
    global_batch = batch * world
    rate = global_batch / m.median
    rate_ci = (global_batch / hi, global_batch / lo) if lo > 0 else None
    per_device_ci = (rate_ci[0] / world, rate_ci[1] / world) if rate_ci else None
    metrics = {
        "throughput": Metric(rate, f"{unit}/s", True, rate_ci, m.n),
        "throughput_per_device": Metric(rate / world, f"{unit}/s", True, per_device_ci, m.n),
        "step_seconds": Metric(m.median, "s", False, (lo, hi), m.n, m.summary()),
        "peak_memory_bytes": Metric(float(peak_memory), "B", False, None, None),
    }
    if flops:
        tflops = flops * rate / 1e12
        metrics["tflops"] = Metric(
            tflops, "TFLOPS", True, (flops * rate_ci[0] / 1e12, flops * rate_ci[1] / 1e12) if rate_ci else None, m.n
        )
        peak = peak_for(device, precision, threads)
        if peak is not None:
            metrics["pct_of_peak"] = Metric(100 * tflops / (peak.tflops * world), "%", True, None, m.n)
            details["peak"] = {
                "value": peak.tflops,
                "unit": "TFLOPS",
                "source": peak.source,
                "estimated": peak.estimated,
            }
        details["flops_per_sample"] = flops
    details |= {"clock": m.clock, "windows": m.n}
    return Result(
        NAME,
        record,
        metrics=metrics,
        primary_metric="throughput",
        warnings=[w for w in [m.noise_warning(), *conditions.get("warnings", [])] if w],
        conditions=conditions,
        samples=list(m.samples),
        details=details,
    )
