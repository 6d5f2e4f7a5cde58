"""Errors that reach the user as one line.

A user who mistypes a flag should learn what to fix, not read a traceback, so
every anticipated problem is raised as :class:`UsageError` and the CLI turns it
into ``accelbench: error: ...`` with exit status 2.
"""

from __future__ import annotations

from typing import Any


class UsageError(Exception):
    """Bad input: a wrong name, a bad number, an unreadable or unwritable path."""

    exit_code = 2


class BenchmarkSkipped(Exception):
    """The one way a benchmark says this machine cannot run the requested variant; the worker records ``skipped``.

    ``record`` is the record's parameters as resolved so far (device, threads), when the benchmark has them.
    """

    def __init__(self, reason: str, record: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.record = record


class BenchmarkFailed(Exception):
    """The one way a benchmark says a measurement could not be made (a rank died, no rate held at all); the
    worker records ``failed`` with this message, exit status 1.

    ``record`` is the record's parameters as resolved so far (device, threads), when the benchmark has them;
    ``details`` what the record should keep (where the log is). A measurement whose verdict is not valid is
    no failure: the benchmark returns it ``ok`` with ``valid=False`` (exit status 3).
    """

    def __init__(
        self, error: str, record: dict[str, Any] | None = None, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(error)
        self.record = record
        self.details = details or {}


class RecordedElsewhere(Exception):
    """Raised on a node of a multi-node job whose result another invocation records: no record here, no failure."""


class StoppedEarly(Exception):
    """The runner asked the benchmark to stop (Ctrl-C, its timeout) before it had measured anything to keep:
    the worker records nothing, and the runner says why."""
