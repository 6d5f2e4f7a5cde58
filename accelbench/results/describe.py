"""How a record's workload is named, without knowing the benchmark that made it.

``results`` reads records only: the benchmark-specific notation
(``1024x1024x1024 fp32``) lives with each benchmark's parameters and reaches these
modules as a ``describe`` function passed in by the caller (the CLI passes the
registry's). Without one, a workload is named by its parameters.
"""

from __future__ import annotations

from typing import Any, Callable

#: Parameters that say how, where or with which luck (seeds, LoadGen's verdict) a figure was measured, not what
#: was measured; ``compare`` ignores them when it pairs records of two machines. (``price_per_hour``: a parameter
#: of tta records made before prices moved into ``system.price``.)
CONTEXT_PARAMS = frozenset(
    {
        "device",
        "threads",
        "min_time",
        "max_time",
        "min_reps",
        "warmup_time",
        "warmup",
        "seed",
        "seeds_used",
        "price_per_hour",
    }
)

Describe = Callable[[str, dict[str, Any]], str]


def plain(benchmark: str, params: dict[str, Any]) -> str:
    """``k=v`` words for the parameters that say what was measured."""
    return " ".join(f"{k}={v}" for k, v in params.items() if k not in CONTEXT_PARAMS)
