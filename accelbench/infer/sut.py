"""The batching SUT LoadGen drives: one worker thread per serving device on a shared queue (never a thread per
query); a worker takes up to ``batch_size`` waiting samples (Server: waiting at most ``max_wait``), runs its
backend once and completes the batch, with each sample's answer attached in accuracy mode."""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from accelbench.loadgen.library import SampleLibrary


class Pending:
    """Issued samples not yet batched: a list read from a moving front (slicing, not a per-sample popleft)."""

    __slots__ = ("items", "pos")

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.pos = 0

    def __len__(self) -> int:
        return len(self.items) - self.pos

    def extend(self, new: list[Any]) -> None:
        if self.pos:
            self.items, self.pos = self.items[self.pos :], 0
        if self.items:
            self.items.extend(new)
        else:
            self.items = new

    def take(self, n: int) -> list[Any]:
        batch = self.items[self.pos : self.pos + n]
        self.pos += len(batch)
        if self.pos == len(self.items):
            self.items, self.pos = [], 0
        return batch


@dataclass
class Worker:
    """One serving device: its backend's predict (None: answer at once) and where its inputs must live.

    Calling it moves a batch to the worker's device first, so every caller (the SUT, the probe's warm-up
    of each device) gives each device its own inputs.
    """

    predict: Callable[[Any], Any] | None
    device: Any = None

    def __call__(self, inputs: Any) -> Any:
        if self.predict is None:
            return None
        if self.device is not None:
            inputs = tuple(t.to(self.device, non_blocking=True) for t in inputs)
        return self.predict(inputs)


class BatchingSUT:
    def __init__(
        self,
        workers: list[Worker],
        qsl: SampleLibrary[Any],
        batch_size: int,
        max_wait: float,
        collate: Callable[[list[Any]], Any] = list,
        answers: Callable[[list[int], Any], list[Any]] | None = None,
    ):
        self.qsl = qsl
        self.batch_size = batch_size
        self.max_wait = max_wait
        self.collate = collate
        #: accuracy mode: (samples' QSL indices, the batch's outputs) -> each sample's answer, back to LoadGen
        self.answers = answers
        self.queue: queue.Queue[Any] = queue.Queue()
        # each worker writes only its own slot: no lock on the hot path
        self.per_worker = [0] * len(workers)
        self.batches_per_worker = [0] * len(workers)
        #: seconds each worker spent in its backend, and the span from the first issue to the last answer: how
        #: busy the system was (find-peak's screens read it, see :attr:`utilization`)
        self.busy_per_worker = [0.0] * len(workers)
        self.first_issue: float | None = None
        self.last_answer = 0.0
        self.error: BaseException | None = None
        self._threads = [
            threading.Thread(target=self._serve, args=(i, w), name=f"accelbench-sut-{i}", daemon=True)
            for i, w in enumerate(workers)
        ]
        for t in self._threads:
            t.start()

    @property
    def batches(self) -> int:
        return sum(self.batches_per_worker)

    @property
    def samples(self) -> int:
        return sum(self.per_worker)

    @property
    def utilization(self) -> float | None:
        """The fraction of the run's span the workers spent serving (None before any answer).

        A short Server screen at or over capacity can end before its queue is long enough to break the latency
        bound, while its worker never rests: ResNet-50 on a 2-core CPU screened clean at 16.8 QPS with a
        2 s bound, then had 867 of 906 confirmation queries late at 15.1 QPS.
        """
        if self.first_issue is None or self.last_answer <= self.first_issue:
            return None
        return sum(self.busy_per_worker) / (len(self.busy_per_worker) * (self.last_answer - self.first_issue))

    def issue(self, query_samples: list[Any]) -> None:
        if self.first_issue is None:
            self.first_issue = time.perf_counter()
        samples = list(query_samples)
        if len(self._threads) == 1 or len(samples) <= self.batch_size:
            self.queue.put(samples)  # one queue item per LoadGen call, however many samples
            return
        for start in range(0, len(samples), self.batch_size):  # several workers share a large query
            self.queue.put(samples[start : start + self.batch_size])

    def flush(self) -> None:
        pass

    def stop(self) -> None:
        for _ in self._threads:
            self.queue.put(None)
        for t in self._threads:
            t.join()

    def _take(self, pending: Pending, block_until: float | None) -> bool | None:
        """Move the next issued list into ``pending``; False on timeout, None when told to stop."""
        try:
            if block_until is None:
                item = self.queue.get()
            else:
                remaining = block_until - time.perf_counter()
                item = self.queue.get_nowait() if remaining <= 0 else self.queue.get(timeout=remaining)
        except queue.Empty:
            return False
        if item is None:
            return None
        pending.extend(item)
        return True

    def _serve(self, index: int, worker: Worker) -> None:
        import mlperf_loadgen as lg

        pending = Pending()
        stopping = False
        while True:
            if not pending:
                if stopping or not self._take(pending, None):
                    return
            deadline = time.perf_counter() + self.max_wait
            while len(pending) < self.batch_size and not stopping:
                # take what is already waiting at once; wait for more only up to the deadline (Server)
                got = self._take(pending, deadline if self.max_wait > 0 else time.perf_counter())
                stopping = got is None
                if not got:
                    break
            batch = pending.take(self.batch_size)
            if not batch:
                continue
            payloads = None
            start = time.perf_counter()
            try:
                if worker.predict is not None:
                    out = worker(self.collate([self.qsl.loaded[q.index] for q in batch]))
                    if self.answers is not None:
                        payloads = self.answers([q.index for q in batch], out)
            except BaseException as exc:  # keep answering LoadGen; the run is reported failed afterwards
                self.error = self.error or exc
            done = time.perf_counter()
            self.busy_per_worker[index] += done - start
            self.last_answer = max(self.last_answer, done)
            self.batches_per_worker[index] += 1
            self.per_worker[index] += len(batch)
            if payloads is None:
                lg.QuerySamplesComplete([lg.QuerySampleResponse(q.id, 0, 0) for q in batch])
            else:  # LoadGen copies each answer during the call; the arrays stay alive until it returns
                lg.QuerySamplesComplete(
                    [
                        lg.QuerySampleResponse(q.id, a.ctypes.data, a.nbytes)
                        for q, a in zip(batch, payloads, strict=True)
                    ]
                )
