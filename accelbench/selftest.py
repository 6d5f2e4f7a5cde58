"""Benchmarks that misbehave on purpose, to prove the runner survives them.

``accelbench run selftest/crash`` lets a user check on their own machine that a
crashing, hanging or raising benchmark is recorded as failed and the suite goes on.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

from accelbench.errors import UsageError
from accelbench.kit import metrics as fig
from accelbench.measure.stats import Measurement
from accelbench.params import CommonParams
from accelbench.results.record import Result

if TYPE_CHECKING:
    from accelbench.kit.context import RunContext


@dataclass(frozen=True)
class OkParams(CommonParams):
    iterations: int = 1000

    def validate(self) -> None:
        super().validate()
        if self.iterations < 1:
            raise UsageError("iterations must be a positive integer")


@dataclass(frozen=True)
class RaiseParams(CommonParams):
    message: str = "deliberate failure"


@dataclass(frozen=True)
class CrashParams(CommonParams):
    how: str = "segfault"

    def validate(self) -> None:
        super().validate()
        if self.how not in ("segfault", "abort", "kill", "exit"):
            raise UsageError(f"how={self.how!r}: use segfault, abort, kill or exit")


@dataclass(frozen=True)
class HangParams(CommonParams):
    seconds: float = 3600.0


def run_ok(params: OkParams, ctx: "RunContext") -> Iterator[Result]:
    ctx.progress(f"summing {params.iterations} integers 20 times")
    samples = []
    for _ in range(20):
        t0 = time.perf_counter_ns()
        sum(range(params.iterations))
        samples.append((time.perf_counter_ns() - t0) / 1e9)
    m = Measurement(tuple(samples))
    yield Result(
        benchmark="selftest/ok",
        params=params.to_dict(),
        metrics={"seconds": fig.seconds(m)},
        primary_metric="seconds",
        samples=list(m.samples),
    )


def run_raise(params: RaiseParams, ctx: "RunContext") -> Iterator[Result]:
    raise RuntimeError(params.message)
    yield from ()


def run_crash(params: CrashParams, ctx: "RunContext") -> Iterator[Result]:
    if params.how == "segfault":
        ctypes.string_at(0)
    elif params.how == "abort":
        os.abort()
    elif params.how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(3)
    yield from ()


def run_hang(params: HangParams, ctx: "RunContext") -> Iterator[Result]:
    ctx.progress("sleeping")
    time.sleep(params.seconds)
    yield from ()
