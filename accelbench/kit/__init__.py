"""The benchmark kit: what every family (kernels, train, infer, tta) builds on.

It sits between :mod:`accelbench.measure` + :mod:`accelbench.results` and the families,
and owns the concepts that must mean the same everywhere:

- the runner/benchmark contract (:class:`RunContext`) and device preparation (:func:`prepare`);
- the one skip exception (:class:`BenchmarkSkipped`; the worker turns it into a ``skipped`` record);
- constructors of derived figures (:mod:`accelbench.kit.metrics`);
- the one torchrun launcher (:mod:`accelbench.kit.ranks`);
- the one training step (:mod:`accelbench.kit.step`).

Nothing here imports the CLI, the registry or a family.
"""

from accelbench.errors import BenchmarkSkipped, RecordedElsewhere
from accelbench.kit.context import Prepared, RunContext, prepare, skip_if

__all__ = ["BenchmarkSkipped", "Prepared", "RecordedElsewhere", "RunContext", "prepare", "skip_if"]
