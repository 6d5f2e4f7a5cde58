"""The settings a search tries, in two stages, and the ones it leaves out with the reason.

First the runtime (backend, precision, memory format, compilation) at the default batch, then the shape of the
work around the best runtimes: a full product of every axis would spend the budget on a fraction of it. What the
device cannot run natively is left out before anything is timed. Which axes there are is the searched benchmark's
(:mod:`accelbench.tune.task`); the stages here only order and deduplicate."""

from __future__ import annotations

from typing import Any

from accelbench.tune.candidate import Candidate, Space
from accelbench.tune.loadgen import INFER_BATCHES, INFER_DEFAULT, MANY_CORES, THREADED_BACKENDS
from accelbench.tune.specs import TuneParams
from accelbench.tune.task import compile_modes
from accelbench.tune.train import TRAIN_DEFAULT

__all__ = [
    "INFER_BATCHES", "INFER_DEFAULT", "MANY_CORES", "THREADED_BACKENDS", "TRAIN_DEFAULT", "Candidate", "Space",
    "grouped", "runtime_stage", "shape_stage",
]  # fmt: skip


def runtime_stage(params: TuneParams) -> Space:
    """Every runtime at the default shape: the default first, compiled ones last (each compile costs minutes)."""
    return params.tuned().runtimes()


def shape_stage(params: TuneParams, best: list[Candidate], tried: set[str]) -> list[Candidate]:
    """The shape of the work around the best runtimes, as the searched benchmark offers it, not yet tried."""
    seen = set(tried)
    unique = []
    for c in params.tuned().shapes(best):
        if c.key not in seen:
            seen.add(c.key)
            unique.append(c)
    return unique


def _batches(params: TuneParams, c: Candidate | None, device: Any) -> list[Any]:
    """The batch sizes the searched benchmark tries on ``device`` around a best runtime."""
    return params.tuned().batches(device)


def _compile_modes(device: Any) -> tuple[str, ...]:
    return compile_modes(device)


def grouped(left_out: list[tuple[Candidate, str]]) -> list[tuple[str, list[str]]]:
    """The left-out candidates by reason, so that one reason is said once."""
    out: dict[str, list[str]] = {}
    for c, why in left_out:
        out.setdefault(why, []).append(c.label())
    return list(out.items())
