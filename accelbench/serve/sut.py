"""The LoadGen SUT in token mode: requests go to the engine as issued, tokens come back as they are generated.

LoadGen's issue callback only hands the requests to the engine (which queues them on its own thread). The
engine calls back :meth:`TokenSUT.first` at each request's first token, which reaches LoadGen as
``FirstTokenComplete`` (its time to first token), and :meth:`TokenSUT.done` at its completion, which reaches it
as ``QuerySamplesComplete`` with the number of tokens (its time per output token, and tokens/s). The token ids
are the response's data, so accuracy mode's log holds the generated text.

Each request's times are stamped as the callbacks see them (:class:`~accelbench.serve.rows.InFlight`); when
LoadGen's test ends, each becomes its row (:class:`~accelbench.serve.rows.RequestRow`), written to the run's logs
(:mod:`accelbench.serve.requests`) and what the record's own figures are computed from.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import mlperf_loadgen as lg
import numpy as np

from accelbench.errors import BenchmarkFailed
from accelbench.loadgen.library import SampleLibrary
from accelbench.results.details import RequestLogEntry
from accelbench.serve import requests as reqlog
from accelbench.serve.engines.base import Engine, TokenRequest
from accelbench.serve.rows import InFlight, RequestRow


class TokenSUT:
    def __init__(
        self,
        engine: Engine,
        qsl: SampleLibrary[list[int]],
        max_new_tokens: Any,
        shape: Callable[[int, list[int]], list[int]] | None = None,
        log_dir: Path | None = None,
    ) -> None:
        """``log_dir``: where the requests are written when LoadGen's test ends (None: nowhere)."""
        self.engine = engine
        self.log_dir = log_dir
        #: every request seen through, in the order they ended, made rows when the test ends (not on the engine's
        #: threads): written then, and what the record's own figures are computed from
        self.rows: list[RequestRow] = []
        #: the requests under way, by LoadGen's query id, and those ended since
        self._flights: dict[int, InFlight] = {}
        self._ended: list[InFlight] = []
        #: the written file's entry for the record's ``details.request_log`` (None until written)
        self.request_log: RequestLogEntry | None = None
        #: what is done to a sample's prompt as it is sent (made distinct, counted for the prefix cache)
        self.shape = shape
        self.qsl = qsl
        #: a sample index -> the tokens to generate for it (drawn with the prompts)
        self.max_new_tokens = max_new_tokens
        self.error: BaseException | None = None
        #: each failed request's message, counted (a served endpoint's words): the run's error summarises them
        self.failures: Counter[str] = Counter()
        self.stopped = False
        self.samples = 0
        self.tokens = 0
        #: requests answered in fewer than two tokens (a server that stopped at its end of sequence): they have no
        #: time per output token, and LoadGen's token mode calls a run with one INVALID
        self.one_token = 0
        self.first_issue: float | None = None
        self.last_answer = 0.0
        self.outputs: dict[int, list[int]] = {}  # sample index -> tokens (kept for accuracy mode)
        self.input_tokens = 0
        self.keep_outputs = False
        #: tokens held in the KV cache by the requests between their first token and their completion (prompt and
        #: tokens so far): the peak, and the integral over time for the mean
        self.kv_tokens = 0
        self.kv_peak = 0
        self.kv_integral = 0.0
        self._kv_since: float | None = None
        self._held: dict[int, int] = {}
        #: requests between their first token and their completion (decoding): the integral over time, and the
        #: time any was (a decode step's batch, on average, is the one over the other)
        self.in_flight = 0
        self.flight_integral = 0.0
        self.busy_seconds = 0.0
        #: the prompts' causal attention pairs (a prompt of p tokens: p(p+1)/2), for the prefill's FLOPs
        self.prompt_pairs = 0
        self._lock = threading.Lock()

    # LoadGen's side
    def issue(self, query_samples: list[Any]) -> None:
        now = time.perf_counter()
        if self.first_issue is None:
            self.first_issue = now
        loaded, shape, flights = self.qsl.loaded, self.shape, self._flights
        requests = [
            TokenRequest(
                q.id,
                q.index,
                shape(q.index, loaded[q.index]) if shape else loaded[q.index],
                self.max_new_tokens(q.index),
            )
            for q in query_samples
        ]
        for r in requests:
            flights[r.id] = InFlight(r.id, r.index, len(r.prompt), now)
        self.engine.submit(requests)

    def flush(self) -> None:
        pass

    def stop(self) -> None:
        """LoadGen's test ended (every request answered); the engine stays warm for a rerun: the run stops it. The
        requests are written now, so a run that fails (its error raised after this) keeps them too, and says where."""
        self.stopped = True
        with self._lock:
            ended, self._ended = self._ended, []
        self.rows += [f.row(self.first_issue or 0.0) for f in ended]
        if self.log_dir is None or self.request_log is not None:
            return
        self.request_log = reqlog.keep_loadgen(self, self.log_dir, self.engine, self.rows)
        if isinstance(self.error, BenchmarkFailed):
            self.error.details["request_log"] = self.request_log

    def _hold(self, request: TokenRequest, tokens: int, now: float, flight: int = 0) -> None:
        """``tokens`` more (or, negative, fewer) held in the KV cache by ``request`` from ``now``; ``flight``: it
        started (1) or ended (-1) decoding."""
        with self._lock:
            if self._kv_since is not None:
                elapsed = now - self._kv_since
                self.kv_integral += self.kv_tokens * elapsed
                self.flight_integral += self.in_flight * elapsed
                self.busy_seconds += elapsed if self.in_flight else 0.0
            self._kv_since = now
            self.in_flight += flight
            self._held[request.id] = self._held.get(request.id, 0) + tokens
            self.kv_tokens += tokens
            self.kv_peak = max(self.kv_peak, self.kv_tokens)

    @property
    def kv_mean(self) -> float:
        """Tokens held in the KV cache, averaged over the run (first issue to last answer)."""
        span = self.last_answer - (self.first_issue or self.last_answer)
        return self.kv_integral / span if span > 0 else 0.0

    def _flight(self, request: TokenRequest) -> InFlight:
        """``request`` under way (one LoadGen never issued: from now, as its answer is)."""
        flight = self._flights.get(request.id)
        if flight is None:
            flight = self._flights[request.id] = InFlight(
                request.id, request.index, len(request.prompt), time.perf_counter()
            )
        return flight

    def _end(self, request: TokenRequest, now: float) -> InFlight:
        flight = self._flights.pop(request.id, None)
        if flight is None:
            flight = InFlight(request.id, request.index, len(request.prompt), now)
        flight.done = now
        return flight

    # the engine's side (a Sink)
    def first(self, request: TokenRequest, token: int) -> None:
        flight = self._flight(request)
        now = flight.first = flight.last = time.perf_counter()
        self._hold(request, len(request.prompt) + 1, now, flight=1)
        data = np.array([token], dtype=np.int32)
        lg.FirstTokenComplete([lg.QuerySampleResponse(request.id, data.ctypes.data, data.nbytes, 1)])

    def answering(self, request: TokenRequest) -> None:
        """The first token of ``request``'s answer after a reasoning model's thinking arrived (an engine that tells
        them apart calls this; its row's ``first_answer``)."""
        flight = self._flights.get(request.id)
        if flight is not None and flight.first_answer is None:
            flight.first_answer = time.perf_counter()

    def step(self, request: TokenRequest, count: int) -> None:
        now = time.perf_counter()
        self._flight(request).step(now, count)
        self._hold(request, count, now)

    def done(self, request: TokenRequest, tokens: list[int]) -> None:
        now = time.perf_counter()
        data = np.asarray(tokens, dtype=np.int32)
        self._hold(request, -self._held.get(request.id, 0), now, flight=-1 if request.id in self._held else 0)
        with self._lock:
            self.prompt_pairs += len(request.prompt) * (len(request.prompt) + 1) // 2
            self._held.pop(request.id, None)
            self.samples += 1
            self.tokens += len(tokens)
            self.one_token += len(tokens) < 2
            self.input_tokens += len(request.prompt)
            self.last_answer = now
            flight = self._end(request, now)
            flight.output_tokens = len(tokens)
            if flight.first is None:
                flight.first = now
            self._ended.append(flight)
            if self.keep_outputs:
                self.outputs[request.index] = list(tokens)
        # LoadGen copies the answer during the call (accuracy mode); the array lives until it returns
        lg.QuerySamplesComplete([lg.QuerySampleResponse(request.id, data.ctypes.data, data.nbytes, len(tokens))])

    def failed(self, request: TokenRequest, error: BaseException) -> None:
        """Answer LoadGen anyway (it would wait forever); the run is reported failed afterwards."""
        now = time.perf_counter()
        with self._lock:
            plain = getattr(error, "plain", False)  # its message says it all (a server's words)
            words = str(error) if plain else f"{type(error).__name__}: {error}"
            self.failures[words] += 1
            flight = self._end(request, now)
            flight.error = words
            self._ended.append(flight)
            top = "; ".join(f"{why} (x{n})" for why, n in self.failures.most_common(3))
            total = sum(self.failures.values())
            self.error = BenchmarkFailed(f"{total} request{'s' * (total > 1)} failed: {top}")
        lg.QuerySamplesComplete([lg.QuerySampleResponse(request.id, 0, 0, 1)])
