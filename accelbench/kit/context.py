"""The contract between the runner and a benchmark, and the one way a benchmark takes its device.

A benchmark receives its parameters and a :class:`RunContext`, calls :func:`prepare`
once, and yields records. Everything a device needs before any work is queued on it
happens in ``prepare``, so no family can forget a step (making a CUDA device current,
so that events and graph capture use the stream the work runs on; pinning the CPU
thread count that the record reports).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

from accelbench.devices import resolve_device
from accelbench.devices.kind import kind_of
from accelbench.devices.precision import set_numeric_mode
from accelbench.errors import BenchmarkSkipped

if TYPE_CHECKING:
    import torch


class Progress(Protocol):
    """Where a benchmark says what it is doing; ``left`` is its own estimate of the seconds left, where it has one
    from what it has measured so far (steps timed, epochs run), so the suite's ETA covers the entry in progress."""

    def __call__(self, message: str, left: float | None = None) -> None: ...


def quiet(message: str, left: float | None = None) -> None:
    """A Progress that says nothing (a benchmark called outside the suite)."""


@dataclass(frozen=True)
class RunContext:
    """What the runner gives a benchmark besides its parameters."""

    log_dir: Path
    progress: Progress = quiet
    #: files the entries of one run share (TensorRT engines and timing caches a search's later trials reuse);
    #: the runner deletes it when the run ends. None outside a run: nothing is cached
    cache_dir: Path | None = None
    #: the export cache shared across runs (accelbench.cache.exports_dir); None outside a run: nothing is kept
    export_cache: Path | None = None
    #: where the entry's working files go (an export, a quantized copy): inside the run folder, removed when the
    #: entry ends; None outside a run (a backend then uses a temporary folder it removes itself)
    scratch_dir: Path | None = None
    #: why the runner asked the benchmark to stop early (Ctrl-C, the timeout), or None: one that measures in
    #: windows ends after the step in progress and reports the windows it finished, so nothing is lost
    stop: Callable[[], str | None] = lambda: None


@dataclass(frozen=True)
class Prepared:
    """The device a benchmark runs on and the CPU threads it was given."""

    device: "torch.device"
    threads: int

    def record(self, params: Any, **extra: Any) -> dict[str, Any]:
        """The record's parameters: what was asked, with the device and threads that actually ran it."""
        device = kind_of(self.device).record_name(self.device)
        record: dict[str, Any] = params.to_dict() | {"device": device, "threads": self.threads} | extra
        return record


def prepare(params: Any, autotune: bool = True) -> Prepared:
    """Resolve the device, make it current, set the precision's math mode and pin the CPU thread count.

    ``autotune``: see :func:`accelbench.devices.precision.set_numeric_mode` (off for serving).
    """
    import torch

    device = resolve_device(params.device)
    kind_of(device).make_current(device)
    set_numeric_mode(device, getattr(params, "precision", "fp32"), autotune)
    torch.set_num_threads(params.threads or torch.get_num_threads())
    return Prepared(device, torch.get_num_threads())


def skip_if(reason: str | None, record: dict[str, Any] | None = None) -> None:
    """Raise the one skip exception when there is a reason this machine cannot run the variant.

    ``record`` (the parameters as resolved: device, threads) becomes the skipped record's parameters.
    """
    if reason:
        raise BenchmarkSkipped(reason, record)
