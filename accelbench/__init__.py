"""accelbench: one tool that measures how fast a machine trains and serves neural networks.

The package root stays light (no torch import) so that ``accelbench --help`` is instant;
the library API is re-exported lazily, and importing it wires nothing: ``compare`` reads each record
as stored unless given ``defaults=accelbench.registry.default_params`` (what the CLI passes), with
which a record made before a setting existed is paired as having its default.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "Timer": "accelbench.measure.timer",
    "TimerConfig": "accelbench.measure.timer",
    "Measurement": "accelbench.measure.stats",
    "Result": "accelbench.results.record",
    "Metric": "accelbench.results.record",
    "Store": "accelbench.results.store",
    "run_suite": "accelbench.suite.runner",
    "Suite": "accelbench.suite.suites",
    "Entry": "accelbench.suite.suites",
    "compare": "accelbench.results.compare",
    "collect_profile": "accelbench.system.profile",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'accelbench' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = ["__version__", *_LAZY]
