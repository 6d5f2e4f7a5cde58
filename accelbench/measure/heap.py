"""The harness's own heap kept out of a latency figure.

A worker that imported torch and transformers holds millions of Python objects, and a full cyclic collection walks
them all holding the GIL, stalling every thread for a visible share of a request's latency. ``gc.freeze`` before
the window leaves the collector only what the window allocates (its garbage is still collected); LoadGen's SUT
callbacks are Python too, so every LoadGen test and replay runs inside :func:`frozen_heap` (docs/methodology.md)."""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """The objects alive now left out of every collection until the block ends (collected once first)."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
