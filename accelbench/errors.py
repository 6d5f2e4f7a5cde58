"""Errors that reach the user as one line.

A user who mistypes a flag should learn what to fix, not read a traceback, so
every anticipated problem is raised as :class:`UsageError` and the CLI turns it
into ``accelbench: error: ...`` with exit status 2.
"""

from __future__ import annotations


class UsageError(Exception):
    """Bad input: a wrong name, a bad number, an unreadable or unwritable path."""

    exit_code = 2


class BenchmarkSkipped(Exception):
    """Raised inside a benchmark when the device cannot run the requested variant."""
