"""Graphs compiled during a block, on a device that compiles (XLA): counted apart from the measured work.

On a lazy device the first step of a new shape compiles (seconds on a TPU) and a step whose graph changes
compiles again. A warm-up that compiled is expected, and its cost is reported as such; a graph compiled inside
the measured windows means the figure includes compilation, and the record is set aside as a busy host's is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelbench.devices import kind as device_kind

if TYPE_CHECKING:
    import torch

#: the warning's prefix, which the comparison engine sets aside (as "contended" and "noisy")
RECOMPILED = "recompiled"


class CompileCount:
    """Graphs compiled and seconds spent compiling since construction or the last :meth:`since`; inert on an eager
    device, whose :meth:`since` is None."""

    def __init__(self, device: "torch.device") -> None:
        self.kind = device_kind.kind_of(device)
        self.base = self.kind.compilations()

    def since(self) -> tuple[int, float] | None:
        """(graphs, seconds) since the count began, and begins a new count from now."""
        if self.base is None:
            return None
        now = self.kind.compilations()
        assert now is not None
        out = (now[0] - self.base[0], now[1] - self.base[1])
        self.base = now
        return out


def compile_meta(warmup: tuple[int, float] | None, window: tuple[int, float] | None) -> dict[str, Any]:
    """What a measurement keeps of compilation (empty on an eager device): the warm-up's and the windows'."""
    if warmup is None or window is None:
        return {}
    return {
        "compiles": {
            "warmup_graphs": warmup[0],
            "warmup_compile_seconds": round(warmup[1], 4),
            "window_graphs": window[0],
            "window_compile_seconds": round(window[1], 4),
        }
    }


def compile_warning(meta: dict[str, Any]) -> str | None:
    """The warning of a measurement whose windows compiled a graph: its figure includes compilation."""
    c = meta.get("compiles") or {}
    if not c.get("window_graphs"):
        return None
    return (
        f"{RECOMPILED}: {c['window_graphs']} graph(s) compiled inside the measured windows "
        f"({c['window_compile_seconds']:.3g} s of compilation counted in the figure; a shape or graph changed "
        "between steps), beside the warm-up's expected compilation"
    )
