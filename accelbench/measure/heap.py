"""The harness's own heap kept out of a latency figure.

A worker that has imported torch and transformers holds millions of Python objects, and the cyclic garbage
collector walks all of them in a full collection, holding the GIL: in a conversation replay through the endpoint
engine a full collection stopped every thread of the worker for 180-210 ms (a sampler thread every 2 ms saw
nothing run), and 1 to 2 of 256 requests went out that late. Moving the objects that exist before the measured
window to the collector's permanent generation (``gc.freeze``) leaves it only what the window itself allocates:
four replays in a row then sent every request under 10 ms late (the latest 2.5 ms). LoadGen's SUT callbacks are
Python too, so every LoadGen test and every replay runs inside :func:`frozen_heap`. Garbage made in the window is
still collected.
"""

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
