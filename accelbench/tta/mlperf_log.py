"""One MLPerf-format log per seed, written through ``mlperf_logging.mllog`` (the package MLPerf's checkers read).

Each log gets its own ``logging.Logger`` and file handler, so seeds (and
concurrent runs) never write into each other's files, and the handler is closed
when the run ends - whatever way it ends.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

from mlperf_logging import mllog
from mlperf_logging.mllog import constants as C


class RunLog:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._logger = logging.getLogger(f"accelbench.mllog.{uuid.uuid4().hex}")
        self._logger.propagate = False
        self._logger.setLevel(logging.INFO)
        self._handler: logging.Handler = logging.FileHandler(path) if path else logging.NullHandler()
        self._logger.addHandler(self._handler)
        self._ml = mllog.mllog.MLLogger(logger=self._logger, default_stack_offset=2)

    def event(self, key: str, value: Any = None, **metadata: Any) -> None:
        self._ml.event(key=key, value=value, metadata=metadata or None)

    def start(self, key: str, value: Any = None, **metadata: Any) -> None:
        self._ml.start(key=key, value=value, metadata=metadata or None)

    def end(self, key: str, value: Any = None, **metadata: Any) -> None:
        self._ml.end(key=key, value=value, metadata=metadata or None)

    def submission(self, benchmark: str, platform: str, closed: bool) -> None:
        """The submission fields MLPerf's checker requires of every log."""
        self.event(C.SUBMISSION_BENCHMARK, benchmark)
        self.event(C.SUBMISSION_ORG, "accelbench")
        self.event(C.SUBMISSION_DIVISION, C.CLOSED if closed else C.OPEN)
        self.event(C.SUBMISSION_STATUS, C.ONPREM)
        self.event(C.SUBMISSION_PLATFORM, platform or "unknown")

    def close(self) -> None:
        self._handler.close()
        self._logger.removeHandler(self._handler)
