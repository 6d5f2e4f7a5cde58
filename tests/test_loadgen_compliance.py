"""An official-profile run is compliant only where its own logs show the MLPerf rules held."""

from __future__ import annotations

from accelbench.loadgen.compliance import MIN_DURATION_MS, broken_rules

FULL = {"effective_min_duration_ms": MIN_DURATION_MS, "result_min_duration_met": True, "early_stopping_met": True}


def test_each_rule_a_log_can_show_broken_is_named() -> None:
    assert broken_rules(FULL | {"effective_scenario": "SingleStream"}, {}) == []
    [short] = broken_rules(FULL | {"effective_min_duration_ms": 3000}, {})
    assert short.startswith("its minimum duration was 3 s where MLPerf's rules ask 600 s")
    assert broken_rules(FULL | {"result_min_duration_met": False}, {}) == ["it ended before its minimum duration"]
    stopped = FULL | {"early_stopping_met": False}
    single = broken_rules(stopped | {"effective_scenario": "SingleStream"}, {})
    assert single == ["LoadGen's early stopping was not met"]
    assert broken_rules(stopped | {"effective_scenario": "Offline"}, {}) == []  # Offline judges no tail
    unscored = broken_rules(None, {"accuracy_verified": False})
    assert unscored == ["its accuracy was not scored on the benchmark's data set"]
    assert broken_rules(None, {"accuracy_verified": True}) == []


def test_a_short_official_run_is_not_compliant_and_says_why(run_isolated) -> None:
    """``--profile official --duration 3`` cuts mlperf.conf's 600 s: LoadGen may call it VALID, but the record is
    not for submission, and its first non-compliance says the duration."""
    params = {"backend": "null", "threads": 2, "batch_size": 8, "device": "cpu", "scenario": "singlestream"}
    [r] = run_isolated(params | {"profile": "official", "duration": 3})
    assert r.status == "ok" and r.details["compliant"] is False
    assert any("minimum duration was 3 s" in why for why in r.details["not_compliant"])
    [said] = [c.text for c in r.concerns if c.kind == "non-compliant"]
    assert said.startswith("non-compliant, not for submission: its minimum duration was 3 s")
    [quick] = run_isolated(params | {"duration": 1})  # the quick profile says it is quick, as before
    assert quick.details["compliant"] is False and "not_compliant" not in quick.details


def test_a_server_records_bound_is_the_one_loadgen_enforced(run_isolated) -> None:
    """The official profile holds a model to mlperf.conf's Server bound (resnet18 has no entry: its "*" rule), and the
    record says that bound, as LoadGen's own log does, not accelbench's table's."""
    from pathlib import Path

    from accelbench.loadgen.logs import read_detail

    params = {"model": "resnet18", "backend": "null", "threads": 2, "device": "cpu", "scenario": "server"}
    [r] = run_isolated(params | {"profile": "official", "duration": 1, "target_qps": 200})
    detail = read_detail(Path(r.details["loadgen_log_dir"]) / "mlperf_log_detail.txt")
    assert r.details["latency_bound_ms"] == detail["effective_target_latency_ns"] / 1e6
    [quick] = run_isolated(params | {"duration": 1, "target_qps": 200, "latency_bound_ms": 15})
    assert quick.details["latency_bound_ms"] == 15.0
