"""How a record's workload is named, without knowing the benchmark that made it.

``results`` reads records only: the benchmark-specific notation
(``1024x1024x1024 fp32``) lives with each benchmark's parameters and reaches these
modules as a ``describe`` function passed in by the caller (the CLI passes the
registry's). Without one, a workload is named by its parameters.
"""

from __future__ import annotations

from typing import Any, Callable

#: Parameters that change only how long, how often or with which luck (seeds) a figure is measured, never the
#: figure itself: no comparison and no history splits on them. (``price_per_hour``: a parameter of tta records
#: made before prices moved into ``system.price``.)
LENGTH_PARAMS = frozenset(
    {
        "min_time",
        "max_time",
        "min_reps",
        "warmup_time",
        "warmup",
        "num_batches",
        "display_every",
        "seed",
        "seeds_used",
        "price_per_hour",
    }
)
#: Parameters that say where a figure was measured: they differ between machines, so ``compare`` pairs records
#: across them, but on one system they change the figure, so a history keeps them apart.
PLACE_PARAMS = frozenset({"device", "threads"})
#: What ``compare`` ignores when it pairs records of two machines.
CONTEXT_PARAMS = LENGTH_PARAMS | PLACE_PARAMS

Describe = Callable[[str, dict[str, Any]], str]


def plain(benchmark: str, params: dict[str, Any]) -> str:
    """``k=v`` words for the parameters that say what was measured."""
    return " ".join(f"{k}={v}" for k, v in params.items() if k not in CONTEXT_PARAMS)
