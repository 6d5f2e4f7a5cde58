"""``--batch-size auto``: the largest per-device batch whose training steps fit in memory.

Double from the model's default (or ``--max-batch-size``) until a step runs out of memory or would exceed the cap
(on a CPU, 80% of the memory available at the start, so the kernel's OOM killer never wakes), then bisect; cuDNN's
and cuBLAS's failed allocations count as "does not fit". The measured run keeps a margin below the edge: it
allocates what the two-step trial did not (FLOP counting, compile buffers, fragmentation)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from accelbench.devices import synchronize
from accelbench.train import loop

if TYPE_CHECKING:
    import torch

    from accelbench.kit.context import RunContext
    from accelbench.train.specs import TrainParams
    from accelbench.workloads.base import Workload

BISECT_STEPS = 4
#: Fraction of the largest fitting batch the measured run uses when memory, not the cap, set the limit.
MARGIN = 0.9
#: Library errors that mean an allocation failed near the memory limit (cuDNN/cuBLAS workspaces).
NEAR_LIMIT_ERRORS = ("CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED", "CUDNN_STATUS_INTERNAL_ERROR")


@dataclass
class Search:
    """What the search found: the batch to measure, the largest that fit, and every trial."""

    batch: int | None
    largest_fitting: int | None
    limit: int
    memory_bound: bool
    trials: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        if self.batch is None:
            reason = "not even a batch of 1 fits"
        elif self.memory_bound and self.batch != self.largest_fitting:
            reason = (
                f"memory: {self.largest_fitting} fit in a two-step trial; {self.batch} ({MARGIN:.0%}) leaves room "
                "for what the measured run adds"
            )
        elif self.memory_bound:
            reason = "memory"
        else:
            reason = f"the cap of {self.limit} (--max-batch-size) fits"
        return {"batch": self.batch, "largest_fitting": self.largest_fitting, "limit": self.limit, "reason": reason}


def predict_peak(trials: list[dict[str, Any]], baseline: int, batch: int) -> int | None:
    """The peak a trial at ``batch`` would reach, extrapolated linearly from the largest measured trial that fit.

    Activation memory grows with the batch; the extrapolation lets the search stop before a trial that
    would exceed a cap it can only check afterwards.
    """
    measured = [t for t in trials if t.get("fits") and t.get("peak_memory_bytes")]
    if not measured:
        return None
    last = max(measured, key=lambda t: t["batch_size"])
    growth = last["peak_memory_bytes"] - baseline
    return int(baseline + growth * batch / last["batch_size"])


def does_not_fit(exc: BaseException) -> bool:
    """An out-of-memory error, or a library's failed allocation near the limit."""
    return loop.is_oom(exc) or any(marker in str(exc) for marker in NEAR_LIMIT_ERRORS)


def with_margin(batch: int) -> int:
    """``MARGIN`` of ``batch``, a multiple of 8 from 16 up (Tensor Core friendly), never below 1."""
    smaller = int(batch * MARGIN)
    if smaller >= 16:
        smaller -= smaller % 8
    return max(1, min(batch, smaller))


def find_batch(
    workload: "Workload",
    model: "torch.nn.Module",
    params: "TrainParams",
    device: "torch.device",
    start: int,
    cap: int | None,
    ctx: "RunContext",
) -> Search:
    trials: list[dict[str, Any]] = []
    with loop.PeakMemory(device) as base:
        pass
    baseline = base.start  # memory in use before any trial: model, optimizer-free

    def fits(batch: int) -> bool:
        predicted = predict_peak(trials, baseline, batch)
        if cap is not None and predicted is not None and predicted > cap:
            # past the cap on a CPU the trial itself would wake the kernel's OOM killer: not run
            trials.append({"batch_size": batch, "fits": False, "predicted_peak_memory_bytes": predicted})
            ctx.progress(f"auto batch: {batch} would need about {predicted / 2**30:.1f} GiB, over the cap")
            return False
        peak = None
        trainer: loop.Trainer | None = None
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
                if not does_not_fit(exc):
                    raise
                ok = False
            finally:
                trainer = None  # noqa: F841 (drop the batch and optimizer state before the next trial)
        trials.append({"batch_size": batch, "fits": ok, "peak_memory_bytes": peak})
        ctx.progress(f"auto batch: {batch} {'fits' if ok else 'does not fit'}")
        return ok

    limit = params.max_batch_size or max(65536, 16 * start)
    good: int | None = None
    bad: int | None = None
    batch = min(start, limit)
    if fits(batch):
        good = batch
        while batch < limit:
            batch = min(batch * 2, limit)
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
        return Search(None, None, limit, True, trials)
    for _ in range(BISECT_STEPS):
        if bad is None or bad - good <= max(1, good // 16):
            break
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    memory_bound = bad is not None
    return Search(with_margin(good) if memory_bound else good, good, limit, memory_bound, trials)
