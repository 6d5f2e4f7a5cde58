"""``tta/time_to_target``: N seeds to the quality target, scored as MLPerf scores them (the runner prices it).

Seeds run one after another in this worker process (or, with ``--nproc``, in a
``torchrun`` job whose rank 0 reports every seed). Each seed writes its own
MLPerf log in the run folder as it goes, so an interrupted set keeps its logs.
"""

from __future__ import annotations

import dataclasses
import secrets
from pathlib import Path
from typing import Any, Iterator

from accelbench.devices import device_label
from accelbench.devices.kind import monitored_indices
from accelbench.devices.precision import precision_reason
from accelbench.families import benchmark_of
from accelbench.kit import metrics as fig
from accelbench.kit.context import RunContext, prepare, skip_if
from accelbench.kit.ranks import Nodes, node_gpus, run_ranks
from accelbench.measure.conditions import ConditionsMonitor
from accelbench.results.details import Details
from accelbench.results.record import Concern, Result
from accelbench.tta.loop import Job, SeedRun, precision_of, run_seed
from accelbench.tta.mlperf_log import RunLog
from accelbench.tta.recipes import recipe
from accelbench.tta.scoring import olympic
from accelbench.tta.specs import TtaParams
from accelbench.workloads.base import batch_class, by_batch_class

#: a torchrun job of several seeds may train for days (ImageNet); a hung rank is still stopped by the suite timeout
RANK_TIMEOUT = 7 * 24 * 3600.0
#: how long a rank waits for the others in a collective (an ImageNet evaluation on one rank can take minutes)
COLLECTIVE_TIMEOUT = 1800.0


def seed_list(params: TtaParams) -> list[int]:
    first = params.seed if params.seed >= 0 else secrets.randbelow(2**31 - params.seeds)
    return [first + i for i in range(params.seeds)]


def _recipe_batch(table: dict[str, int], device: Any) -> int:
    """A recipe's per-device batch for ``device``'s batch class, the GPU's where the class has none, else 64."""
    table = by_batch_class(table)
    return table.get(batch_class(device), table.get("gpu", 64))


def make_job(params: TtaParams, device: Any, ctx: RunContext, rank: int = 0, world: int = 1) -> Job:
    r = recipe(params.workload)
    ctx.progress(f"staging {r.name} data")
    data_dir = Path(params.data_dir).expanduser() if params.data_dir else None
    train, val = r.load(data_dir, params.scale)
    targets = r.targets(params.target, params.second_target)
    return Job(
        recipe=r,
        train=r.stage(train, device),
        val=val,
        params=params,
        device=device,
        batch=params.batch_size or _recipe_batch(r.batch_size, device),
        target=targets.pop(r.metric),
        more=targets,
        max_epochs=params.max_epochs or r.max_epochs,
        platform=device_label(device),
        rank=rank,
        world=world,
        progress=ctx.progress,
    )


def run_seeds(job: Job, seeds: list[int], log_dir: Path | None) -> list[SeedRun]:
    runs: list[SeedRun] = []
    for i, seed in enumerate(seeds):
        reached = [r.time_to_target for r in runs if r.converged and r.time_to_target]
        typical = sum(reached) / len(reached) if reached else None
        job = dataclasses.replace(job, seeds_after=len(seeds) - i - 1, typical_seconds=typical)
        path = log_dir / f"mlperf-{job.recipe.name}-seed{seed}.log" if log_dir else None
        log = RunLog(path)
        try:
            run = run_seed(job, seed, log)
        finally:
            log.close()
        run.log = str(path) if path else None
        runs.append(run)
    return runs


def run(params: TtaParams, ctx: RunContext) -> Iterator[Result]:
    prep = prepare(params)
    device = prep.device
    seeds = seed_list(params)
    r = recipe(params.workload)
    record = prep.record(params, seeds_used=seeds)
    precision = precision_of(params, r, device)
    skip_if(r.missing() or precision_reason(device, precision, params.emulated), record)
    gpus = node_gpus(params.nproc, device.type, record) if params.nproc > 1 else monitored_indices([device])
    with ConditionsMonitor(prep.threads, gpus=gpus) as monitor:
        if params.nproc * params.nnodes > 1:
            runs, job_info = _distributed(params, device.type, seeds, ctx, record)
        else:
            job = make_job(params, device, ctx)
            runs = run_seeds(job, seeds, ctx.log_dir)
            job_info = {
                "batch": job.batch,
                "target": job.target,
                "more_targets": job.more,
                "max_epochs": job.max_epochs,
                "precision": precision_of(params, r, device),
            }
    yield _result(params, record, runs, job_info, monitor.conditions.to_dict())


def _distributed(
    params: TtaParams, device_type: str, seeds: list[int], ctx: RunContext, record: dict[str, Any]
) -> tuple[list[SeedRun], dict[str, Any]]:
    data = run_ranks(  # a dead rank raises the failed record every family's ranks give
        "accelbench.tta.ddp_rank",
        {"params": params.to_dict(), "seeds": seeds},
        ctx,
        nproc=params.nproc,
        device_type=device_type,
        budget=RANK_TIMEOUT,
        rank_timeout=COLLECTIVE_TIMEOUT,
        nodes=Nodes.of(params),
        record=record,
    )
    runs = [SeedRun(**{k: v for k, v in d.items() if k != "throughput"}) for d in data["runs"]]
    return runs, data["job"]


class TtaDetails(Details, total=False):
    """What a time-to-accuracy record keeps beside the common keys (the score, each seed's run, the metric and its
    targets): the epochs a seed was given, the recipe's source and each seed's MLPerf log."""

    max_epochs: int
    recipe: str
    mlperf_logs: list[str]


def _result(
    params: TtaParams, record: dict[str, Any], runs: list[SeedRun], job: dict[str, Any], conditions: dict[str, Any]
) -> Result:
    r = recipe(params.workload)
    score = olympic([run.time_to_target for run in runs])
    record |= {"target": job["target"], "batch_size": job["batch"], "precision": job["precision"]}
    if job.get("more_targets"):  # the second target as resolved, as the first: a default and the same value given
        [record["second_target"]] = job["more_targets"].values()  # are one workload
    details: TtaDetails = {
        "metric": r.metric,
        "target": job["target"],
        "more_targets": job.get("more_targets") or {},
        "max_epochs": job["max_epochs"],
        "score": score.record(),
        "seeds": [run.to_dict() for run in runs],
        "recipe": r.source,
        "mlperf_logs": [run.log for run in runs if run.log],
    }
    # what the runs the time to target counts took (the olympic mean's; every converged one in an INVALID set)
    counted = [runs[i] for i in score.kept] or [run for run in runs if run.converged]
    metrics: dict[str, Any] = {}
    if counted:
        metrics["epochs_to_target"] = fig.figure(
            sum(x.epochs for x in counted) / len(counted), "epochs", higher_is_better=False
        )
        metrics["samples_to_target"] = fig.figure(
            sum(x.samples for x in counted) / len(counted), "samples", higher_is_better=False
        )
    metrics["throughput"] = fig.figure(sum(x.throughput for x in runs) / len(runs), "samples/s", higher_is_better=True)
    if score.spread is not None:
        metrics["time_to_target_spread"] = fig.figure(score.spread, "fraction", higher_is_better=False)
    concerns = fig.concerns_of(None, conditions)
    if not score.valid or score.time_to_target is None:
        # MLPerf's seed rule leaves no time to target, so no primary figure: what the seeds measured is kept and
        # said INVALID, as LoadGen's INVALID runs are (ok, valid false, exit 3)
        goals = {r.metric: job["target"]} | (job.get("more_targets") or {})
        said = " and ".join(f"{name} {target:g}" for name, target in goals.items())
        reason = f"{score.reason} ({said} within {job['max_epochs']} epochs)"
        details["invalid_reasons"] = [reason]
        return Result(
            benchmark_of(TtaParams),
            record,
            metrics=metrics,
            valid=False,
            concerns=[Concern("invalid", f"INVALID: {reason}"), *concerns],
            conditions=conditions,
            details=details,
        )
    ttt = fig.figure(score.time_to_target, "s", higher_is_better=False, n=len(runs))
    if score.converged < score.runs:
        dropped = score.runs - score.converged
        text = f"{dropped} run did not reach the target; it was dropped as the slowest"
        concerns.append(Concern("not-converged", text, {"runs": dropped}))
    return Result(
        benchmark_of(TtaParams),
        record,
        metrics={"time_to_target_seconds": ttt} | metrics,
        primary_metric="time_to_target_seconds",
        valid=True,
        concerns=concerns,
        conditions=conditions,
        details=details,
    )
