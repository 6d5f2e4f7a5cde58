"""``--mode find-peak`` for language models: the search's logic against a server of known capacity (each trial
answers as LoadGen would), and its flags. A real search (LoadGen, an engine) is in the closing notes; it takes
minutes on a CPU, too long for a test."""

from __future__ import annotations

from typing import Any

import pytest

from accelbench.errors import BenchmarkFailed, UsageError
from accelbench.loadgen.start import Outcome
from accelbench.serve import peak
from accelbench.serve.limits import Limits
from accelbench.serve.specs import LLMServeParams

LIMITS = Limits(2000.0, 100.0, "test")


def server(capacity: float, confirm_noise: float = 1.0) -> tuple[Any, list[tuple[float, Any]]]:
    """A run_at for a server that keeps up to ``capacity`` requests/s (a confirmation holds up to ``capacity`` x
    ``confirm_noise``), and the trials it was asked for."""
    asked: list[tuple[float, Any]] = []

    def run_at(rate: float, size: Any) -> Outcome:
        asked.append((rate, size))
        limit = capacity if size is not None else capacity * confirm_noise
        over = rate > limit
        d = {
            "result_perf_constraints_met": not over,
            "result_validity": "INVALID" if over else "VALID",
            "result_scheduled_samples_per_sec": rate,
            "result_completed_samples_per_sec": min(rate, limit * 0.8 if over else rate),
            "result_query_count": 662 if size is None else size[1],
            "result_first_token_99.00_percentile_latency_ns": 9e9 if over else 5e7,
        }
        return Outcome(d, {}, "log", None)

    return run_at, asked


def test_the_search_finds_the_capacity_within_2_percent_and_confirms_it() -> None:
    run_at, asked = server(20.0)
    rate, outcome, found = peak.search(run_at, probed_rate=30.0, start=15.0, limits=LIMITS, progress=lambda *a, **k: 0)
    assert rate is not None and 20.0 * (1 - peak.peak.PRECISION) <= rate <= 20.0
    assert found["peak_requests_per_second"] == rate and outcome.detail["result_validity"] == "VALID"
    screens = [t for t in found["trials"] if not t["confirmation"]]
    assert all(size == (4000, max(peak.SCREEN_FEWEST, int(r * 4))) for r, size in asked if size is not None)
    assert len(screens) >= 3 and found["trials"][-1]["confirmation"] and found["trials"][-1]["valid"]


def test_a_screen_that_does_not_keep_up_fails_whatever_its_latencies() -> None:
    assert not peak.kept_up({"result_scheduled_samples_per_sec": 30.0, "result_completed_samples_per_sec": 8.5})
    assert peak.kept_up({"result_scheduled_samples_per_sec": 30.0, "result_completed_samples_per_sec": 29.0})


def test_no_confirmation_holding_is_no_peak() -> None:
    run_at, _ = server(20.0, confirm_noise=0.0)  # the long runs never hold
    rate, _, found = peak.search(run_at, probed_rate=30.0, start=15.0, limits=LIMITS, progress=lambda *a, **k: 0)
    assert rate is None and found["peak_requests_per_second"] is None
    assert sum(t["confirmation"] for t in found["trials"]) == peak.peak.CONFIRMATIONS


def test_a_search_without_limits_or_without_any_valid_rate_says_why() -> None:
    run_at, _ = server(20.0)
    with pytest.raises(BenchmarkFailed, match="needs TTFT and TPOT limits"):
        peak.search(run_at, 30.0, 15.0, Limits(None, None, "offline"), lambda *a, **k: 0)
    nothing, _ = server(0.0)
    with pytest.raises(BenchmarkFailed, match="no valid Server rate"):
        peak.search(nothing, 30.0, 15.0, LIMITS, lambda *a, **k: 0)


def test_find_peak_flags_for_language_models() -> None:
    base = {"model": "llama3.1-8b", "scale": "tiny", "engine": "null", "mode": "find-peak"}
    with pytest.raises(UsageError, match="give --scenario server or interactive"):
        LLMServeParams(**base).validate()
    LLMServeParams(**(base | {"scenario": "server"})).validate()
    LLMServeParams(**(base | {"scenario": "interactive"})).validate()
