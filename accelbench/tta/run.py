"""``tta/time_to_target``: N seeds to the quality target, scored as MLPerf scores them, priced if asked.

Seeds run one after another in this worker process (or, with ``--nproc``, in a
``torchrun`` job whose rank 0 reports every seed). Each seed writes its own
MLPerf log in the run folder as it goes, so an interrupted set keeps its logs.
"""

from __future__ import annotations

import json
import secrets
import uuid
from pathlib import Path
from typing import Any, Iterator

from accelbench.config import price_per_hour
from accelbench.kernels.common import prepare
from accelbench.measure.conditions import ConditionsMonitor
from accelbench.registry import RunContext
from accelbench.results.record import Metric, Result
from accelbench.tta.loop import Job, SeedRun, precision_of, run_seed
from accelbench.tta.mlperf_log import RunLog
from accelbench.tta.recipes import recipe
from accelbench.tta.scoring import olympic
from accelbench.tta.specs import TtaParams

NAME = "tta/time_to_target"
#: a torchrun job of several seeds may train for days (ImageNet); a hung rank is still stopped by the suite timeout
RANK_TIMEOUT = 7 * 24 * 3600.0


def seed_list(params: TtaParams) -> list[int]:
    first = params.seed if params.seed >= 0 else secrets.randbelow(2**31 - params.seeds)
    return [first + i for i in range(params.seeds)]


def make_job(params: TtaParams, device: Any, ctx: RunContext, rank: int = 0, world: int = 1) -> Job:
    from accelbench.devices import device_label

    r = recipe(params.workload)
    ctx.progress(f"staging {r.name} data")
    data_dir = Path(params.data_dir).expanduser() if params.data_dir else None
    train, val = r.load(data_dir, params.scale)
    return Job(
        recipe=r,
        train=train,
        val=val,
        params=params,
        device=device,
        batch=params.batch_size or r.batch_size.get(device.type, r.batch_size.get("cuda", 64)),
        target=params.target or r.target,
        max_epochs=params.max_epochs or r.max_epochs,
        platform=device_label(device),
        rank=rank,
        world=world,
        progress=ctx.progress,
    )


def run_seeds(job: Job, seeds: list[int], log_dir: Path | None) -> list[SeedRun]:
    runs = []
    for seed in seeds:
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
    device, threads = prepare(params)
    seeds = seed_list(params)
    r = recipe(params.workload)
    record: dict[str, Any] = params.to_dict() | {"device": str(device), "threads": threads, "seeds_used": seeds}
    with ConditionsMonitor(threads) as monitor:
        if params.nproc > 1:
            runs, job_info = _distributed(params, seeds, ctx)
        else:
            job = make_job(params, device, ctx)
            runs = run_seeds(job, seeds, ctx.log_dir)
            job_info = {
                "batch": job.batch,
                "target": job.target,
                "max_epochs": job.max_epochs,
                "precision": precision_of(params, r, device),
            }
    yield _result(params, record, runs, job_info, monitor.conditions.to_dict())


def _distributed(params: TtaParams, seeds: list[int], ctx: RunContext) -> tuple[list[SeedRun], dict[str, Any]]:
    from accelbench.launch.torchrun import check_nproc, run_torchrun

    device, _ = prepare(params)
    check_nproc(params.nproc, device.type)
    out = ctx.log_dir / f"tta-ddp-{uuid.uuid4().hex[:8]}.json"
    args = ["--params", json.dumps(params.to_dict()), "--seeds", ",".join(map(str, seeds))]
    args += ["--out", str(out), "--log-dir", str(ctx.log_dir)]
    ctx.progress(f"torchrun: {params.nproc} processes, {len(seeds)} seed(s)")
    try:
        run_torchrun(
            "accelbench.tta.ddp_rank", args, params.nproc, ctx.log_dir / f"{out.stem}.log", timeout=RANK_TIMEOUT
        )
    except RuntimeError as exc:
        raise RuntimeError(f"a rank failed or hung, so the run was stopped: {exc}") from None
    data = json.loads(out.read_text(encoding="utf-8"))
    out.unlink()
    runs = [SeedRun(**{k: v for k, v in d.items() if k != "throughput"}) for d in data["runs"]]
    return runs, data["job"]


def _result(
    params: TtaParams, record: dict[str, Any], runs: list[SeedRun], job: dict[str, Any], conditions: dict[str, Any]
) -> Result:
    r = recipe(params.workload)
    score = olympic([run.time_to_target for run in runs])
    price = params.price_per_hour or price_per_hour()
    record |= {"target": job["target"], "batch_size": job["batch"], "precision": job["precision"], "valid": score.valid}
    details: dict[str, Any] = {
        "metric": r.metric,
        "target": job["target"],
        "max_epochs": job["max_epochs"],
        "score": score.__dict__,
        "seeds": [run.to_dict() for run in runs],
        "recipe": r.source,
        "mlperf_logs": [run.log for run in runs if run.log],
        "price_per_hour_usd": price or None,
    }
    converged = [run for run in runs if run.converged]
    if not score.valid or score.time_to_target is None:
        error = f"invalid result: {score.reason} ({r.metric} {job['target']:g} within {job['max_epochs']} epochs)"
        return Result(NAME, record, status="failed", error=error, details=details, conditions=conditions)
    metrics = {
        "time_to_target_seconds": Metric(score.time_to_target, "s", False, None, len(runs)),
        "epochs_to_target": Metric(sum(x.epochs for x in converged) / len(converged), "epochs", False, None, None),
        "samples_to_target": Metric(sum(x.samples for x in converged) / len(converged), "samples", False, None, None),
        "train_throughput": Metric(sum(x.throughput for x in runs) / len(runs), "samples/s", True, None, None),
        "time_to_target_spread": Metric(score.spread or 0.0, "fraction", False, None, None),
    }
    if price:
        metrics["cost_to_target_usd"] = Metric(score.time_to_target / 3600 * price, "USD", False, None, None)
    warnings = [w for w in conditions.get("warnings", []) if w]
    if score.converged < score.runs:
        warnings.append(f"{score.runs - score.converged} run did not reach the target; it was dropped as the slowest")
    return Result(
        NAME,
        record,
        metrics=metrics,
        primary_metric="time_to_target_seconds",
        warnings=warnings,
        conditions=conditions,
        details=details,
    )
