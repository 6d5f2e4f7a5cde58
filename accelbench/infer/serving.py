"""What one LoadGen test serves from (:class:`Serving`): the workers, the samples and how they batch.

A plain description, below everything that reads it: the calibration probe (:mod:`accelbench.infer.settings`)
times its workers to plan the test, the driver (:mod:`accelbench.infer.driver`) runs the test on them, and
accuracy mode (:mod:`accelbench.infer.accuracy`) scores their answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from accelbench.infer.served import Served
from accelbench.infer.sut import Worker


@dataclass
class Serving:
    """Everything a LoadGen run needs: the workers, the samples and how they batch."""

    workers: list[Worker]
    make_input: Callable[[int], Any]
    total: int
    collate: Callable[[list[Any]], Any]
    served: Served | None
    model: Any
    threads: int
    device: Any = None
    dataset: Any = None
    #: where the served weights came from (a checkpoint, or random and how initialised), for the record
    weights: str = ""
    #: what the backend's runtime chose, for the record's details.backend
    facts: dict[str, Any] = field(default_factory=dict)
