"""What a serving run holds while it runs, in one place: where the model is, what every run of one call shares,
one run's wiring, and what a driver hands back.

:mod:`accelbench.serve.run` prepares a :class:`Served` once per call, wires a :class:`Stage` for each run and hands
it to LoadGen's driver or accelbench's own, which returns a :class:`Measured`. Passing these, not their fields,
keeps each step's parameters to what varies between steps.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol

from accelbench.serve.engines.base import Engine, TokenRequest
from accelbench.serve.probe import Relay, TokenProbe
from accelbench.serve.sources.base import Work
from accelbench.serve.sources.prefix import Ledger

if TYPE_CHECKING:
    import torch

    from accelbench.kit.context import RunContext
    from accelbench.results.details import FindPeak
    from accelbench.results.record import Result
    from accelbench.serve.limits import Limits
    from accelbench.serve.roofline import Roof
    from accelbench.serve.specs import LLMServeParams
    from accelbench.workloads.decoder import Figures


@dataclass(frozen=True)
class Where:
    """Where the served model runs and whose weights it holds: the run's questions about its engine, answered once
    from the engine's capability flags (``runs_model``, ``remote``, ``loads_weights``), each named for what it
    decides, so the run asks a question rather than combining flags at each branch."""

    #: a model is served whose shape accelbench knows (not the null engine's instant answers, not a server's):
    #: its precision is checked on the device, its size counted, its config read
    model: bool
    #: the model runs in this process: the host's compute threads and the device's roofline are its
    local: bool
    #: a server's model: its weights, its precision and its accuracy gate are the server's to state
    server: bool
    #: the engine builds its own copy of the weights from a ``ModelSource`` (vLLM), so none is built here
    own_weights: bool

    @classmethod
    def of(cls, engine: Engine) -> "Where":
        return cls(
            model=engine.runs_model,
            local=engine.runs_model and not engine.remote,
            server=engine.remote,
            own_weights=engine.loads_weights,
        )

    @property
    def built(self) -> bool:
        """The weights served are the model built here (its FP32 buffers are the record's to list)."""
        return self.model and not self.own_weights


@dataclass(frozen=True)
class Served:
    """What every run of one ``infer`` call shares: the engine (started per run), the built model, the prompts."""

    engine: Engine
    model: Any
    device: "torch.device"
    threads: int
    work: Work
    limits: "Limits"
    benchmark: str  # the preset's MLPerf benchmark
    counted: "Figures | None"
    reference: Any = None  # accuracy mode: FP32's tokens
    roof: "Roof | None" = None  # the device's bandwidth and FLOPS, where the model runs here

    @property
    def where(self) -> Where:
        return Where.of(self.engine)


class CountingRelay(Relay):
    """The engine's one sink (:class:`~accelbench.serve.probe.Relay`), counting the requests it settled, answered or
    failed: what the engine was sent, the probe's and the driver's alike (read after the probe, it is the probe's;
    the record says how many the server saw that no figure counts)."""

    def __init__(self) -> None:
        super().__init__()
        self.settled = 0
        self._lock = threading.Lock()

    def _settle(self) -> None:
        with self._lock:  # the engine's threads (a batch's requests end together) and the driver's
            self.settled += 1

    def done(self, request: TokenRequest, tokens: list[int]) -> None:
        self._settle()  # counted before the target hears: a probe woken by its last answer reads it whole
        super().done(request, tokens)

    def failed(self, request: TokenRequest, error: BaseException) -> None:
        self._settle()
        super().failed(request, error)


@dataclass(frozen=True)
class Stage:
    """One run of the served engine (a sweep has one a point): what every run shares, the engine's one sink (the
    probe's first, then the driver's), and what is done to each prompt as it is sent, which the ledger counts
    (its prefix-cache figures are this run's alone)."""

    served: Served
    relay: CountingRelay
    ledger: Ledger
    shape: Callable[[int, list[int]], list[int]]

    @classmethod
    def wired(cls, served: Served) -> "Stage":
        ledger = Ledger(served.work.prompts)
        return cls(served, CountingRelay(), ledger, ledger.shaper(served.work.salt))


class Measured(Protocol):
    """What a driver measured, made a record once the engine has stopped (a client's figures, a ROUGE score of
    the answers, are read then, not while the engine serves)."""

    #: find-peak's search, where the driver searched (LoadGen's alone does)
    @property
    def found(self) -> FindPeak | None: ...

    def result(
        self, params: "LLMServeParams", ctx: "RunContext", record: dict[str, Any], probed: TokenProbe
    ) -> tuple["Result", dict[str, Any]]:
        """The driver's record of the run (its requests noted) and what the engine saw of its own side."""
        ...
