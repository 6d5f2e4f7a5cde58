"""What a token run is held to and fed with: MLPerf's TTFT/TPOT limits, and the prompts.

The limits are ``mlperf.conf``'s (LoadGen embeds the file; a test reads them back through
``TestSettings.FromConfig``): p99 TTFT and TPOT for Server, and tighter ones for "interactive". A preset without an
MLPerf benchmark of its own borrows one of its class's limits, and the record says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from accelbench.errors import UsageError
from accelbench.results import details

if TYPE_CHECKING:
    from accelbench.results.record import Result
    from accelbench.workloads.decoder import Decoder, Preset

#: mlperf.conf benchmark -> scenario -> (p99 TTFT ms, p99 TPOT ms)
MLPERF_LIMITS: dict[str, dict[str, tuple[float, float]]] = {
    "llama2-70b": {"server": (2000, 200), "interactive": (450, 40)},
    "mixtral-8x7b": {"server": (2000, 200)},
    "llama3_1-8b": {"server": (2000, 100), "interactive": (500, 30)},
    "llama3_1-405b": {"server": (6000, 175), "interactive": (4500, 80)},
    "gpt-oss-120b": {"server": (3000, 80), "interactive": (2000, 15)},
    "deepseek-r1": {"server": (2000, 80), "interactive": (1500, 15)},
}

#: prompt and output lengths when not given: the common 1k/1k at full scale; at tiny scale short enough that a
#: 2-core CPU serves a quick run in seconds
DEFAULT_LENGTHS = {"full": (1024, 1024), "tiny": (128, 32)}


def lengths(params: Any) -> tuple[int, int]:
    """A token run's prompt and output tokens: its flags (``--input-tokens``, ``--output-tokens``), else its
    scale's defaults (:data:`DEFAULT_LENGTHS`)."""
    default_in, default_out = DEFAULT_LENGTHS["tiny" if params.scale == "tiny" else "full"]
    given_in, given_out = params.input_tokens, params.output_tokens
    return (given_in if given_in is not None else default_in), (given_out if given_out is not None else default_out)


@dataclass(frozen=True)
class Limits:
    """The limits a run is held to, under the names its record gives them (:class:`accelbench.results.details.Limits`,
    ``details.limits``): one set of names from the flags to the judge, the report and reference matching, so mypy
    checks each key from where it is written (:meth:`record`) to where it is read (:meth:`from_details`)."""

    #: p99 time to first token, ms (None: none, as in Offline)
    ttft_p99_ms: float | None
    #: p99 time per output token, ms (None: none)
    tpot_p99_ms: float | None
    #: where they came from (``mlperf.conf llama3_1-8b Server``, ``--ttft-ms and --tpot-ms``)
    source: str
    #: a run over a limit is INVALID; False: the limits count goodput only (a closed loop given no limit)
    judged: bool = True

    def record(self) -> details.Limits:
        """The limits as the record keeps them (``judged`` only where False: a record without it was judged)."""
        out: details.Limits = {"ttft_p99_ms": self.ttft_p99_ms, "tpot_p99_ms": self.tpot_p99_ms, "source": self.source}
        if not self.judged:
            out["judged"] = False
        return out

    @classmethod
    def from_details(cls, kept: details.Limits) -> Limits:
        """The limits a record keeps, read back: a limit only where it is a number, a record of an older
        accelbench (no ``judged``) judged."""
        ttft, tpot = details.number(kept.get("ttft_p99_ms")), details.number(kept.get("tpot_p99_ms"))
        return cls(ttft, tpot, str(kept.get("source") or ""), kept.get("judged") is not False)

    @classmethod
    def of(cls, r: Result) -> Limits | None:
        """The limits a serving record was held to (None where it keeps none: not a serving run's record)."""
        kept = details.limits_of(r)
        return None if kept is None else cls.from_details(kept)


#: the source of an Offline run's TPOT limit
OFFLINE_TPOT = (
    "--tpot-ms: the p99 TPOT of an Offline run at a fixed concurrency, judged by accelbench (LoadGen judges none)"
)


def offline_tpot_reason(limits: Limits, tpot_p99_ms: float | None) -> str | None:
    """Why an Offline run held to ``--tpot-ms`` is INVALID (its p99 TPOT over the limit), or None."""
    if limits.source != OFFLINE_TPOT or limits.tpot_p99_ms is None or tpot_p99_ms is None:
        return None
    if tpot_p99_ms <= limits.tpot_p99_ms:
        return None
    return (
        f"TPOT over the limit (accelbench): p99 TPOT {tpot_p99_ms:.4g} ms over the {limits.tpot_p99_ms:g} ms "
        "--tpot-ms at this concurrency; lower --batch-size"
    )


def mlperf_name(benchmark: str, scenario: str) -> str:
    """The name mlperf.conf gives a benchmark in a scenario (interactive has its own entries)."""
    return f"{benchmark}-interactive" if scenario == "interactive" else benchmark


def preset_of(model: str) -> Preset:
    """The preset of a language model (``workload_class(model).preset``): a decoder's workload class is a
    :class:`~accelbench.workloads.decoder.Decoder`, which ``workload_class``'s return type does not say."""
    from accelbench.workloads import workload_class

    return cast("type[Decoder]", workload_class(model)).preset


def limits_for(model: str, benchmark: str, own: bool, scenario: str, ttft_ms: float, tpot_ms: float) -> Limits:
    """The limits a run is held to: the flags where given, else MLPerf's for the preset's benchmark.

    Offline and SingleStream have none (LoadGen judges neither there), except Offline given ``--tpot-ms``: a fixed
    concurrency held to an interactivity, as a Pareto point is read; its TTFT is not judged, since each request waits
    for one of the ``--batch-size`` places. A closed loop is held to the limits given (the other at MLPerf's Server
    limit); given none, they count its goodput and judge nothing (:func:`closed_loop_limits`)."""
    if scenario == "concurrency":
        return closed_loop_limits(model, benchmark, own, ttft_ms, tpot_ms)
    if scenario not in ("server", "interactive"):
        if ttft_ms or (tpot_ms and scenario != "offline"):
            flags = "--ttft-ms and --tpot-ms apply" if ttft_ms else "--tpot-ms applies"
            also = "" if ttft_ms and scenario != "offline" else " (and --tpot-ms alone to offline)"
            raise UsageError(f"{flags} to the server and interactive scenarios{also}, not {scenario}")
        if tpot_ms:
            return Limits(None, tpot_ms, OFFLINE_TPOT)
        return Limits(None, None, f"none: LoadGen judges no token latency in {scenario}")
    published = MLPERF_LIMITS.get(benchmark, {}).get(scenario)
    if published is None and not (ttft_ms and tpot_ms):
        raise UsageError(f"mlperf.conf has no {scenario} limits for {model}: give both --ttft-ms and --tpot-ms")
    if ttft_ms and tpot_ms:
        return Limits(ttft_ms, tpot_ms, "--ttft-ms and --tpot-ms")
    assert published is not None
    borrowed = "" if own else f" (borrowed: {model} has no MLPerf benchmark of its own)"
    source = f"mlperf.conf {mlperf_name(benchmark, scenario)} Server{borrowed}"
    ttft, tpot = ttft_ms or published[0], tpot_ms or published[1]
    if ttft_ms or tpot_ms:
        source += "; " + ("--ttft-ms" if ttft_ms else "--tpot-ms") + " given"
    return Limits(ttft, tpot, source)


def closed_loop_limits(model: str, benchmark: str, own: bool, ttft_ms: float, tpot_ms: float) -> Limits:
    """A closed loop's limits. Its TTFT is timed from each request's own send, so MLPerf's Server limits read as
    they do for a Server run; but a closed loop is a point of a curve, not a claim of a rate within limits, so it is
    judged (INVALID over a limit) only where the user gave a limit, and otherwise counts goodput against MLPerf's.
    Given one, the other is MLPerf's and judged with it, as in a Server run (the record's source says so)."""
    published = MLPERF_LIMITS.get(benchmark, {}).get("server")
    borrowed = "" if own else f" (borrowed: {model} has no MLPerf benchmark of its own)"
    if ttft_ms or tpot_ms:
        given = " and ".join(f for f, v in (("--ttft-ms", ttft_ms), ("--tpot-ms", tpot_ms)) if v)
        other = f"; the other mlperf.conf's {benchmark} Server limit{borrowed}, judged too" if published else (
            "; the other none"
        )  # fmt: skip
        rest = "" if ttft_ms and tpot_ms else other
        ttft = ttft_ms or (published[0] if published else None)
        tpot = tpot_ms or (published[1] if published else None)
        return Limits(ttft, tpot, f"{given}: the closed loop's p99, judged by accelbench{rest}")
    if published is None:
        return Limits(None, None, "none: no limit given and mlperf.conf has no Server limits for the model")
    return Limits(
        published[0],
        published[1],
        f"mlperf.conf {benchmark} Server{borrowed}: goodput counted against them, nothing judged (give --ttft-ms "
        "or --tpot-ms to judge the closed loop)",
        judged=False,
    )


def draw_prompts(count: int, length: int, jitter: float, vocab: int, seed: int = 0) -> list[list[int]]:
    """``count`` prompts of random token ids, each ``jitter``..1 times ``length`` long (seeded: the same every run).

    Random ids, not text: a decoder's speed depends on how many tokens it reads and writes, not which.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    low = max(1, int(round(length * jitter)))
    lengths = rng.integers(low, length + 1, size=count)
    return [rng.integers(1, vocab, size=int(n)).tolist() for n in lengths]
