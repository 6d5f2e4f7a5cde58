"""The system under test and the query sample library that LoadGen drives.

The SUT is a worker thread with a queue, never a thread per query: LoadGen's
issue callback only enqueues; the worker takes up to ``batch_size`` waiting
samples (in Server, waiting at most ``max_wait`` for a batch to fill), runs the
backend once on the stacked inputs, and completes every sample of the batch
through ``QuerySamplesComplete``. The QSL materialises inputs on the device when
LoadGen loads them and drops them when it unloads them.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    import torch


class SampleLibrary:
    def __init__(self, make_input: Callable[[int], "torch.Tensor"], total: int) -> None:
        self.make_input = make_input
        self.total = total
        self.loaded: dict[int, Any] = {}

    def load(self, indices: list[int]) -> None:
        for i in indices:
            self.loaded[i] = self.make_input(i)

    def unload(self, indices: list[int]) -> None:
        for i in indices:
            self.loaded.pop(i, None)


class BatchingSUT:
    def __init__(
        self,
        predict: Callable[[list[Any]], object] | None,
        qsl: SampleLibrary,
        batch_size: int,
        max_wait: float,
    ):
        self.predict = predict  # None: the null backend, which answers without touching the inputs
        self.qsl = qsl
        self.batch_size = batch_size
        self.max_wait = max_wait
        self.queue: queue.Queue[Any] = queue.Queue()
        self.batches = 0
        self.samples = 0
        self.error: BaseException | None = None
        self._worker = threading.Thread(target=self._serve, name="accelbench-sut", daemon=True)
        self._worker.start()

    def issue(self, query_samples: list[Any]) -> None:
        self.queue.put(list(query_samples))  # one queue item per LoadGen call, however many samples

    def flush(self) -> None:
        pass

    def stop(self) -> None:
        self.queue.put(None)
        self._worker.join()

    def _take(self, pending: deque[Any], block_until: float | None) -> bool:
        """Move the next issued list into ``pending``; False when stopping or (with a deadline) on timeout."""
        try:
            if block_until is None:
                item = self.queue.get()
            else:
                remaining = block_until - time.perf_counter()
                item = self.queue.get_nowait() if remaining <= 0 else self.queue.get(timeout=remaining)
        except queue.Empty:
            return False
        if item is None:
            self._stopping = True
            return False
        pending.extend(item)
        return True

    def _serve(self) -> None:
        import mlperf_loadgen as lg

        pending: deque[Any] = deque()
        self._stopping = False
        while True:
            if not pending and not self._take(pending, None):
                return
            deadline = time.perf_counter() + self.max_wait
            while len(pending) < self.batch_size and not self._stopping:
                # take what is already waiting at once; wait for more only up to the deadline (Server)
                if not self._take(pending, deadline if self.max_wait > 0 else time.perf_counter()):
                    break
            batch = [pending.popleft() for _ in range(min(self.batch_size, len(pending)))]
            try:
                if self.predict is not None:
                    self.predict([self.qsl.loaded[q.index] for q in batch])
            except BaseException as exc:  # keep answering LoadGen; the run is reported failed afterwards
                self.error = self.error or exc
            self.batches += 1
            self.samples += len(batch)
            lg.QuerySamplesComplete([lg.QuerySampleResponse(q.id, 0, 0) for q in batch])
            if self._stopping and not pending:
                return
