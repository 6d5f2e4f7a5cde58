"""The probe of a token run: the engine warmed up and timed on a batch of requests, straight (no LoadGen).

It gives the plan LoadGen needs (Offline's expected requests/s, SingleStream's expected latency, a Server target)
and, after a run that disagreed with its plan, the repeated measurement the rerun is planned from.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from accelbench.errors import BenchmarkFailed
from accelbench.serve.engines.base import Engine, Sink, Timeline, TokenRequest

#: seconds the probe waits for its batch before calling the engine stuck
PROBE_TIMEOUT = 600.0
#: warm-up batches at most: an engine warms over several batches (transformers' continuous batching took
#: 1.7 s for its first batches of 8 on a 2-core CPU, 0.1 s later), so the probe times a batch only once
#: two consecutive ones agree within ``PROBE_AGREE``
PROBE_WARMUPS, PROBE_AGREE = 6, 1.3


class Relay:
    """The engine's one sink, pointed at the probe first and at the LoadGen SUT for the run."""

    def __init__(self) -> None:
        self.target: Sink | None = None

    def first(self, request: TokenRequest, token: int) -> None:
        self.target.first(request, token)  # type: ignore[union-attr]

    def step(self, request: TokenRequest, count: int) -> None:
        self.target.step(request, count)  # type: ignore[union-attr]

    def done(self, request: TokenRequest, tokens: list[int]) -> None:
        self.target.done(request, tokens)  # type: ignore[union-attr]

    def failed(self, request: TokenRequest, error: BaseException) -> None:
        self.target.failed(request, error)  # type: ignore[union-attr]

    def wrote(self, request: TokenRequest, at: float) -> None:
        """The moment the engine wrote the request: passed on where the target times requests from it."""
        told = getattr(self.target, "wrote", None)
        if told is not None:
            told(request, at)

    def answering(self, request: TokenRequest) -> None:
        """The first token of the answer after a reasoning model's thinking: passed on where the target keeps it."""
        told = getattr(self.target, "answering", None)
        if told is not None:
            told(request)


@dataclass(frozen=True)
class TokenProbe:
    requests_per_second: float
    tokens_per_second: float
    single_seconds: float  # one request alone, start to last token
    first_batch_seconds: float = 0.0  # the first batch, cold: what warming up (and compiling) cost
    single_tpot_seconds: float | None = None  # one request alone: the fastest a token comes after the first

    def to_dict(self) -> dict[str, float | None]:
        return {
            "requests_per_second": self.requests_per_second,
            "tokens_per_second": self.tokens_per_second,
            "single_request_seconds": self.single_seconds,
            "first_batch_seconds": self.first_batch_seconds,
            "single_tpot_seconds": self.single_tpot_seconds,
        }


def _timed(engine_sink: Relay, engine: Engine, requests: list[TokenRequest]) -> tuple[float, Timeline]:
    timeline = Timeline(expected=len(requests))
    engine_sink.target = timeline
    start = time.perf_counter()
    engine.submit(requests)
    if not timeline.finished.wait(PROBE_TIMEOUT):
        raise BenchmarkFailed(
            f"the {engine.name} engine answered {len(timeline.dones)} of {len(requests)} requests "
            f"in {PROBE_TIMEOUT:g} s"
        )
    if timeline.error is not None:
        e = timeline.error
        first = str(e) if getattr(e, "plain", False) else f"{type(e).__name__}: {e}"
        many = f"{timeline.failures} of {len(requests)}"
        raise BenchmarkFailed(f"{many} probe requests failed, the first: {first}") from e
    return time.perf_counter() - start, timeline


def probe(
    relay: Relay,
    engine: Engine,
    prompts: list[list[int]],
    outs: list[int],
    batch: int,
    shape: Callable[[int, list[int]], list[int]] | None = None,
) -> TokenProbe:
    """Warm-up batches until two agree (at most ``PROBE_WARMUPS``), then the last one's rate and one timed single
    request, straight to the engine (``outs``: each prompt's output tokens; ``shape``: what is done to a prompt as
    it is sent, as the run does it)."""
    n = len(prompts)

    def make(ids: range) -> list[TokenRequest]:
        out = []
        for i in ids:
            prompt = shape(i % n, prompts[i % n]) if shape is not None else prompts[i % n]
            out.append(TokenRequest(-1 - i, i % n, prompt, outs[i % n]))
        return out

    seconds, timeline = _timed(relay, engine, make(range(batch)))
    cold = seconds
    for _ in range(PROBE_WARMUPS):
        previous = seconds
        seconds, timeline = _timed(relay, engine, make(range(batch)))
        if max(seconds, previous) <= PROBE_AGREE * min(seconds, previous):
            break
    tokens = sum(n for _, n in timeline.dones.values())
    single, alone = _timed(relay, engine, make(range(1)))
    return TokenProbe(batch / max(seconds, 1e-9), tokens / max(seconds, 1e-9), single, cold, single_tpot(alone))


def single_tpot(timeline: Timeline) -> float | None:
    """One request alone: its first token to its last over the tokens after the first (LoadGen's TPOT), or None
    where it had one token."""
    [(key, (done, tokens))] = timeline.dones.items()
    first = timeline.firsts.get(key)
    return (done - first) / (tokens - 1) if first is not None and tokens > 1 else None
