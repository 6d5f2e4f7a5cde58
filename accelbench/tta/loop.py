"""One seed's run to target: the MLPerf clock, the evaluation cadence, the log, the quality curve.

The clock starts at ``run_start``, after the model is built (and compiled) and
the data staged, as MLPerf Training defines it, and stops at the first
evaluation that reaches the target; evaluation time counts, as it does in
MLPerf. The device (whatever its kind) is synchronised before the clock is read.
A step is the kit's :class:`~accelbench.kit.step.TrainStep`, the one training
throughput takes.
"""

from __future__ import annotations

import copy
import functools
import random
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, cast

from mlperf_logging.mllog import constants as C

from accelbench.devices import synchronize
from accelbench.devices.kind import kind_of
from accelbench.devices.precision import precision_reason
from accelbench.kit.context import Progress, quiet
from accelbench.kit.step import TrainStep, autocast
from accelbench.tta.mlperf_log import RunLog
from accelbench.tta.recipes.base import Recipe, Schedule
from accelbench.tta.specs import TtaParams

if TYPE_CHECKING:
    import torch


@dataclass
class SeedRun:
    seed: int
    converged: bool
    time_to_target: float | None
    epochs: int
    samples: int
    train_seconds: float
    final_quality: float
    curve: list[dict[str, float]] = field(default_factory=list)
    log: str | None = None
    status: str = "success"

    @property
    def throughput(self) -> float:
        return self.samples / self.train_seconds if self.train_seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"throughput": self.throughput}


def precision_of(params: TtaParams, recipe: Recipe, device: "torch.device") -> str:
    """The precision a run trains in: the flag, or auto (the recipe's on an accelerator, fp16 where bf16 is not
    native; the host trains in fp32)."""
    if params.precision != "auto":
        return params.precision
    if not kind_of(device).accelerator:
        return "fp32"
    if precision_reason(device, recipe.gpu_precision):
        return "amp_fp16"
    return recipe.gpu_precision


def reached(r: Recipe, quality: float, target: float) -> bool:
    """Whether ``quality`` meets ``target``: at or above it, or at or below it where the recipe's metric is a loss
    (a recipe that says ``lower_is_better = True``; the contract's metrics are accuracies unless one says so)."""
    return quality <= target if r.lower_is_better else quality >= target


def all_reached(r: Recipe, qualities: dict[str, float], targets: dict[str, float]) -> bool:
    """Whether every metric meets its target (MLPerf's Mask R-CNN counts only an evaluation where both its box
    and its mask AP do)."""
    return all(reached(r, qualities[name], target) for name, target in targets.items())


@dataclass
class _Failed:
    """What rank 0 sends the other ranks when combining the validation parts failed."""

    error: str


def _time_left(job: "Job", elapsed: float, epoch: int) -> tuple[float | None, str]:
    """The time left after ``epoch``: before a seed has reached the target only a bound is known (every seed
    running to --max-epochs), said as a bound in the message, not passed as the estimate; after one has, its
    time is the estimate."""
    per_epoch = elapsed / epoch
    if job.typical_seconds:
        return max(job.typical_seconds - elapsed, per_epoch) + job.seeds_after * job.typical_seconds, ""
    bound = per_epoch * ((job.max_epochs - epoch) + job.seeds_after * job.max_epochs)
    return None, f"; at most {int(bound // 60)}:{int(bound % 60):02d} left if every seed runs to --max-epochs"


def evaluate(r: Recipe, model: Any, job: "Job") -> dict[str, float]:
    """Every metric over the whole validation set: each rank scores its share, the parts are gathered on rank 0
    and combined by the recipe there (a mean of scores, a corpus BLEU, a COCO mAP; box and mask AP), and the
    figures sent back to every rank. Combining once, not on every rank, keeps N copies of the whole set's
    detections and N COCOevals (seconds of CPU each on full COCO) from competing on one host."""
    part = r.evaluate_part(model, job.val, job.device, job.rank, job.world)
    if job.world > 1:
        import torch.distributed as dist

        parts: list[Any] | None = [None] * job.world if job.rank == 0 else None
        dist.gather_object(part, parts, dst=0)
        out: list[Any] = [None]
        if parts is not None:
            try:
                out = [r.combine(parts)]
            except Exception as exc:  # every rank fails with rank 0, not waiting out the collective timeout
                out = [_Failed(f"{type(exc).__name__}: {exc}")]
                dist.broadcast_object_list(out, src=0)
                raise
        dist.broadcast_object_list(out, src=0)
        if isinstance(out[0], _Failed):
            raise RuntimeError(f"scoring the validation set failed on rank 0: {out[0].error}")
        quality = out[0]
    else:
        quality = r.combine([part])
    if isinstance(quality, dict):
        return {name: float(value) for name, value in quality.items()}
    return {r.metric: float(quality)}


@dataclass
class Job:
    """What every seed shares: the recipe, the staged data, and where and how it trains."""

    recipe: Recipe
    train: Any
    val: Any
    params: TtaParams
    device: "torch.device"
    batch: int
    target: float
    max_epochs: int
    platform: str
    rank: int = 0
    world: int = 1
    wrap: Callable[[Any], Any] = lambda m: m  # DDP on several ranks
    progress: Progress = quiet
    #: seeds still to train after this one, for the estimate of the time left
    seeds_after: int = 0
    #: the targets of the recipe's further metrics (Mask R-CNN's mask AP), reached with :attr:`target`
    more: dict[str, float] = field(default_factory=dict)
    #: the mean time earlier seeds of this set took to reach the target: the estimate of the time left, once known
    typical_seconds: float | None = None


def _seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


@dataclass
class _Training:
    """What one seed trains: the model, what the steps call (compiled or not), its schedule and its step."""

    model: Any
    runner: Any
    schedule: Schedule
    step: TrainStep


def _build(job: Job, seed: int, precision: str) -> _Training:
    """The seed's model, schedule and train step; under --compile, compiled (forward and backward) before the clock."""
    import torch

    r, p = job.recipe, job.params
    global_batch = job.batch * job.world
    model = job.wrap(r.build((job.train, job.val), p.scale).to(job.device))
    steps = r.steps_per_epoch(job.train, global_batch)
    schedule = r.schedule(model, global_batch, steps, job.max_epochs)
    train_step = TrainStep(schedule.optimizer, job.device, precision)
    # torch.compile of a module gives a module (an OptimizedModule), not the bare callable it is annotated as
    runner = cast("torch.nn.Module", torch.compile(model)) if p.compile else model
    if p.compile:  # compile (forward and backward) before the clock; the weights and statistics are put back
        state = copy.deepcopy(model.state_dict())
        batch = next(iter(r.batches(job.train, job.batch, 0, seed, job.rank, job.world, job.device)))
        with autocast(job.device, precision):
            r.loss(runner, batch).backward()
        model.load_state_dict(state)
        schedule.optimizer.zero_grad(set_to_none=True)
    return _Training(model, runner, schedule, train_step)


def _log_hyperparameters(job: Job, schedule: Schedule, log: RunLog) -> None:
    """The hyperparameters and sizes MLPerf's log records before the run starts."""
    r = job.recipe
    hyper = dict(schedule.hyperparameters)
    if "model_bn_span" in hyper:
        hyper["model_bn_span"] = job.batch
    for key, value in hyper.items():
        log.event(key, value)
    log.event(C.GLOBAL_BATCH_SIZE, job.batch * job.world)
    log.event(C.GRADIENT_ACCUMULATION_STEPS, 1)
    log.event(C.TRAIN_SAMPLES, r.train_samples(job.train))
    log.event(C.EVAL_SAMPLES, r.eval_samples(job.val))


def _train_epoch(job: Job, t: _Training, seed: int, epoch: int, step: int, run: SeedRun) -> int:
    """One epoch's steps, counted into ``run``; the step count after it."""
    r, kind = job.recipe, kind_of(job.device)
    t.model.train()
    t_train = time.perf_counter()
    for batch in r.batches(job.train, job.batch, epoch, seed, job.rank, job.world, job.device):
        t.schedule.step(step)
        loss = t.step(functools.partial(r.loss, t.runner, batch))
        kind.end_step(job.device)  # a lazy device (XLA) runs each step as its own graph, compiled once
        del loss
        step += 1
        run.samples += len(batch[0]) * job.world  # a tensor's rows, or a detector's list of images
    synchronize(job.device)
    run.train_seconds += time.perf_counter() - t_train
    return step


def _evaluate_epoch(job: Job, model: Any, log: RunLog, epoch: int, t0: float) -> tuple[dict[str, float], float]:
    """Every metric after ``epoch``, logged, and the seconds since the run started when they were known."""
    r = job.recipe
    log.start(C.EVAL_START, epoch_num=epoch)
    model.eval()
    qualities = evaluate(r, model, job)
    synchronize(job.device)
    elapsed = time.perf_counter() - t0
    if job.more:  # several metrics: MLPerf logs them in one event, by its names (Mask R-CNN: BBOX, SEGM)
        log.event(C.EVAL_ACCURACY, {r.mlperf_keys.get(k, k): v for k, v in qualities.items()}, epoch_num=epoch)
    else:
        log.event(C.EVAL_ACCURACY, qualities[r.metric], epoch_num=epoch)
    log.end(C.EVAL_STOP, epoch_num=epoch)
    return qualities, elapsed


def run_seed(job: Job, seed: int, log: RunLog) -> SeedRun:
    r = job.recipe
    precision = precision_of(job.params, r, job.device)
    log.start(C.INIT_START)
    log.submission(r.mlperf_benchmark, job.platform, closed=r.mlperf_benchmark == "resnet")
    log.event(C.CACHE_CLEAR, True)
    log.event(C.SEED, seed)
    _seed_everything(seed)
    training = _build(job, seed, precision)
    _log_hyperparameters(job, training.schedule, log)
    log.end(C.INIT_STOP)
    synchronize(job.device)
    log.start(C.RUN_START)
    t0 = time.perf_counter()
    run = SeedRun(seed, False, None, 0, 0, 0.0, 0.0)
    step = 0
    quality = 0.0

    def evaluated(epoch: int) -> bool:
        return epoch == job.max_epochs or r.evaluates_at(epoch)

    block = 1  # the first epoch of the block (the epochs up to and including the next evaluation)
    for epoch in range(1, job.max_epochs + 1):
        if epoch == block:
            until = next(e for e in range(epoch, job.max_epochs + 1) if evaluated(e))
            log.start(C.BLOCK_START, first_epoch_num=epoch, epoch_count=until - epoch + 1)
        log.start(C.EPOCH_START, epoch_num=epoch)
        step = _train_epoch(job, training, seed, epoch, step, run)
        log.end(C.EPOCH_STOP, epoch_num=epoch)
        run.epochs = epoch
        if not evaluated(epoch):  # the reference evaluates later (SSD: first after epoch 33): say where it is
            elapsed = time.perf_counter() - t0
            left, note = _time_left(job, elapsed, epoch)
            job.progress(
                f"seed {seed} epoch {epoch}: trained; evaluated after epoch {until} at {elapsed:.1f} s{note}", left=left
            )
            continue
        log.end(C.BLOCK_STOP, first_epoch_num=block)
        block = epoch + 1
        qualities, elapsed = _evaluate_epoch(job, training.model, log, epoch, t0)
        quality = qualities[r.metric]
        point = {"epoch": epoch, "seconds": elapsed, "quality": quality, "samples": run.samples}
        run.curve.append(point | {k: qualities[k] for k in job.more})
        left, note = _time_left(job, elapsed, epoch)
        scored = ", ".join(f"{k} {qualities[k]:.4f}" for k in [r.metric, *job.more])
        job.progress(f"seed {seed} epoch {epoch}: {scored} at {elapsed:.1f} s{note}", left=left)
        if all_reached(r, qualities, {r.metric: job.target} | job.more):
            run.converged, run.time_to_target = True, elapsed
            break
    run.final_quality = quality
    run.status = C.SUCCESS if run.converged else C.ABORTED
    log.end(C.RUN_STOP, status=run.status)
    return run
