"""``--mode find-peak`` for a language model: the highest request rate whose p99 TTFT and TPOT stay within the
limits, confirmed VALID by LoadGen (goodput's peak), through the floor's Server search
(:func:`accelbench.loadgen.search.search_server`). A screen lasts two TTFT limits (1 to 8 s, at least
``SCREEN_FEWEST`` requests), judged by LoadGen's TTFT/TPOT constraints and whether the server kept up; the
confirmation is the profile's run."""

from __future__ import annotations

import time
from typing import Any, Callable

from accelbench.errors import BenchmarkFailed
from accelbench.loadgen import search as peak
from accelbench.loadgen.start import Outcome
from accelbench.results.details import FindPeak
from accelbench.serve.limits import Limits

#: a screen: about this many ms of requests, at least this many (a filter; the confirmation is the verdict), and at
#: least ``SCREEN_TTFTS`` TTFT limits long (an overloaded queue cannot outgrow a 2 s limit in 1 s), at most the last
SCREEN_MS, SCREEN_FEWEST, SCREEN_TTFTS, SCREEN_MAX_MS = 1000, 16, 2, 8000
#: a screen also fails where the server completed fewer requests per second than LoadGen scheduled: it did not
#: keep up, whatever the latencies of the requests that finished in time said
KEPT_UP = 0.95


def kept_up(d: dict[str, Any]) -> bool:
    completed = float(d.get("result_completed_samples_per_sec") or 0.0)
    scheduled = float(d.get("result_scheduled_samples_per_sec") or 0.0)
    return not scheduled or completed >= KEPT_UP * scheduled


def search(
    run_at: Callable[[float, tuple[int, int] | None], Outcome],
    probed_rate: float,
    start: float,
    limits: Limits,
    progress: Callable[..., None],
) -> tuple[float | None, Outcome, FindPeak]:
    """(the confirmed rate or None, the run to report, the search for the record). ``run_at(rate, size)``: one
    LoadGen Server run at ``rate`` requests/s, ``size`` its (minimum ms, minimum queries) for a screen, None for
    the profile's own (a confirmation)."""
    ttft_ms = limits.ttft_p99_ms
    if ttft_ms is None or limits.tpot_p99_ms is None:
        raise BenchmarkFailed("--mode find-peak needs TTFT and TPOT limits: give --ttft-ms and --tpot-ms")
    trials: list[dict[str, Any]] = []
    started = time.monotonic()

    screen_ms = int(min(max(SCREEN_MS, SCREEN_TTFTS * ttft_ms), SCREEN_MAX_MS))

    def trial(value: float, confirm: bool = False, after: int = 0) -> tuple[bool, Outcome]:
        queries = max(SCREEN_FEWEST, int(value * screen_ms / 1000))
        kind = "confirmation" if confirm else f"screen {len(trials) + 1}"
        progress(
            f"find-peak {kind}: {value:,.2f} requests/s ({time.monotonic() - started:.0f} s so far)",
            left=None if confirm else (queries / max(value, 1e-9) + peak.TRIAL_OVERHEAD) * (1 + after),
        )
        outcome = run_at(value, None if confirm else (screen_ms, queries))
        d = outcome.detail
        ok = d.get("result_validity") == "VALID" if confirm else peak.screen_passed(d) and kept_up(d)
        trials.append(
            {
                "requests_per_second": value,
                "valid": ok,
                "confirmation": confirm,
                "requests": d.get("result_query_count"),
                "ttft_p99_ms": (d.get("result_first_token_99.00_percentile_latency_ns") or 0) / 1e6,
                "tpot_p99_ms": (d.get("result_time_per_output_token_99.00_percentile_ns") or 0) / 1e6,
                "completed_per_second": d.get("result_completed_samples_per_sec"),
                "scheduled_per_second": d.get("result_scheduled_samples_per_sec"),
                "log_dir": str(outcome.outdir),
            }
        )
        return ok, outcome

    try:
        rate, outcome, held = peak.search_server(trial, start, probed_rate, lambda v: 0.0)
    except BenchmarkFailed as exc:
        raise BenchmarkFailed(f"{exc} (or --ttft-ms/--tpot-ms)", None, {"find_peak": {"trials": trials}}) from None
    found: FindPeak = {
        "peak_requests_per_second": rate if held else None,
        "trials": trials,
        "precision": peak.PRECISION,
        "limits": limits.record(),
        "search_seconds": round(time.monotonic() - started, 1),
        "method": f"screens of {screen_ms / 1000:g} s judged by LoadGen's TTFT/TPOT constraints and whether the "
        f"server completed {KEPT_UP:.0%} of the scheduled rate, bisected to 2%, then the profile's run at the peak "
        "(stepping down while INVALID)",
    }
    return (rate if held else None), outcome, found
