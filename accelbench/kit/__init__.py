"""The benchmark kit: what every family builds on, between :mod:`accelbench.measure` + :mod:`accelbench.results`
and the families, owning the concepts that must mean the same everywhere: the runner/benchmark contract
(:class:`RunContext`) and :func:`prepare`, the one skip exception (:class:`BenchmarkSkipped`), derived figures
(:mod:`~accelbench.kit.metrics`), the torchrun launcher (:mod:`~accelbench.kit.ranks`) and the training step
(:mod:`~accelbench.kit.step`). Nothing here imports the CLI, the registry or a family."""

from accelbench.errors import BenchmarkSkipped, RecordedElsewhere
from accelbench.kit.context import Prepared, RunContext, prepare, skip_if

__all__ = ["BenchmarkSkipped", "Prepared", "RecordedElsewhere", "RunContext", "prepare", "skip_if"]
