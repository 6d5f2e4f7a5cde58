"""A served language-model request from its send to its last token: :class:`RequestRow`, what LoadGen's SUT and
accelbench's driver hand on, one row of the run's request file and what every figure is computed from; and
:class:`InFlight`, the small mutable builder the engine's callbacks stamp while the request is under way.

Both are slotted and keep their gaps as an array of doubles: an Offline run holds some 90,000 requests."""

from __future__ import annotations

import json
from array import array
from dataclasses import dataclass, fields
from typing import Any

#: a request the driver sent that had no answer when its run ended (a stall): its row's error
UNANSWERED = "no answer (the replay ended first)"


@dataclass(frozen=True, slots=True)
class RequestRow:
    """One request: who sent it, when (seconds from the run's start), what came back and when.

    ``gaps`` are the seconds between consecutive tokens after the first, as inter-token latency counts them: a
    chunk of k tokens that arrived at once is k gaps of a k-th of its wait each."""

    id: int  # LoadGen's query id; the driver's request number
    sample: int | None  # the prompt library's sample (LoadGen's index), a trace's row, a conversation's number
    user: int | None  # the closed loop's user, where the driver says
    session: int | None  # a conversation's number (its turns share it)
    turn: int | None  # 1 for a conversation's first turn
    scheduled: float | None  # when the request was due (the trace's timestamp, a turn after its answer)
    sent: float  # when it was handed to the engine
    first: float | None  # its first token (a reasoning token counts)
    first_answer: float | None  # its first token of the answer after any reasoning, where the engine tells
    done: float | None  # its last token, or its failure
    prompt_tokens: int
    output_tokens: int
    gaps: array[float]
    status: str  # "ok" or "failed"
    error: str | None

    @property
    def answered(self) -> bool:
        """Answered in full: what every figure counts."""
        return self.status == "ok" and self.first is not None and self.done is not None

    @property
    def ttft(self) -> float | None:
        """Seconds from the send to the first token."""
        return self.first - self.sent if self.first is not None else None

    @property
    def tpot(self) -> float | None:
        """Seconds a token after the first: first token to last over the tokens after the first."""
        if self.first is None or self.done is None or self.output_tokens < 2:
            return None
        return (self.done - self.first) / (self.output_tokens - 1)

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in FIELDS} | {"gaps": self.gaps.tolist()}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RequestRow:
        values: dict[str, Any] = {k: d.get(k) for k in FIELDS}
        return cls(**values | {"gaps": array("d", d.get("gaps") or [])})


#: a row's fields, in the file's order
FIELDS = tuple(f.name for f in fields(RequestRow))


@dataclass(slots=True)
class InFlight:
    """A request under way, its times as the callbacks stamp them (``perf_counter``), until :meth:`row`."""

    id: int
    sample: int | None
    prompt_tokens: int
    sent: float
    scheduled: float | None = None  # seconds from the run's start
    user: int | None = None
    session: int | None = None
    turn: int | None = None
    first: float | None = None
    last: float | None = None  # the last token's time: the next gap's start
    first_answer: float | None = None
    done: float | None = None
    output_tokens: int = 0
    error: str | None = None
    gaps: array[float] | None = None  # made at the first gap: a request queued has none

    def step(self, now: float, count: int) -> None:
        """``count`` more tokens at ``now``: ``count`` gaps of a ``count``-th of the wait since the last."""
        last = self.last
        if last is not None:
            gaps = self.gaps
            if gaps is None:
                gaps = self.gaps = array("d")
            if count == 1:  # a token a call, as in-process engines step: no list on the engine's thread
                gaps.append(now - last)
            else:
                gaps.extend([(now - last) / count] * count)
        self.last = now

    def row(self, start: float) -> RequestRow:
        """Its row, times from ``start`` (the run's, by the same clock); unanswered (a stall) where it has none."""
        answered = self.error is None and self.done is not None and self.first is not None
        error = self.error if self.error is not None or answered else UNANSWERED
        first, answer, done = self.first, self.first_answer, self.done
        return RequestRow(
            self.id, self.sample, self.user, self.session, self.turn, self.scheduled, self.sent - start,
            first - start if first is not None else None, answer - start if answer is not None else None,
            done - start if done is not None else None, self.prompt_tokens, self.output_tokens,
            self.gaps if self.gaps is not None else array("d"), "ok" if answered else "failed", error,
        )  # fmt: skip
