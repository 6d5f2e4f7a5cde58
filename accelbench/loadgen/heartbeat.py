"""Progress while LoadGen runs: it holds the calling thread for the whole test, minutes on a slow engine.

Before this, a run said "LoadGen server (about 0:15 left)" and then nothing for 148 s (the system was slower
than its probe), or "about 4:57 left" and then five silent minutes. A thread beside the test reads how many
samples the SUT has answered and, every :data:`EVERY` seconds, says so with the time left at the rate answered
so far; a test shorter than that says nothing more.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from accelbench.kit.context import Progress

#: seconds between two progress lines while a LoadGen test runs
EVERY = 10.0


def line(answered: int, planned: int, elapsed: float) -> tuple[str, float | None]:
    """The progress line and the seconds left at the rate answered so far (None before any answer)."""
    said = f"LoadGen: {answered:,} of {planned:,} planned samples answered after {elapsed:.0f} s"
    if not answered:
        return said, None
    return said, max(planned - answered, 0) * elapsed / answered


@contextmanager
def heartbeat(
    progress: Progress,
    answered: Callable[[], int],
    planned: int,
    every: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Iterator[None]:
    """Say every ``every`` seconds (:data:`EVERY`) how many of the ``planned`` samples are answered, while the
    block runs."""
    every = EVERY if every is None else every
    stop = threading.Event()
    start = clock()

    def beat() -> None:
        while not stop.wait(every):
            message, left = line(answered(), planned, clock() - start)
            progress(message, left=left)

    thread = threading.Thread(target=beat, name="accelbench-loadgen-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
