"""An official-profile run is compliant only where its own logs show the MLPerf rules held."""

from __future__ import annotations

from typing import Any

from accelbench.loadgen.compliance import MIN_DURATION_MS, broken_rules
from accelbench.loadgen.mlcommons import ROUNDS

SEEDS = ROUNDS["v6.1"].seeds
FULL = {
    "effective_min_duration_ms": MIN_DURATION_MS,
    "result_min_duration_met": True,
    "early_stopping_met": True,
    "effective_qsl_rng_seed": SEEDS.qsl,
    "effective_sample_index_rng_seed": SEEDS.sample_index,
    "effective_schedule_rng_seed": SEEDS.schedule,
    "effective_performance_sample_count": 1024,
}


def broken(
    detail: dict[str, Any] | None,
    details: dict[str, Any] | None = None,
    model: str = "resnet50",
    mode: str = "performance",
) -> list[str]:
    return broken_rules(detail, details or {}, model, mode, True)


def test_each_rule_a_log_can_show_broken_is_named() -> None:
    assert broken(FULL | {"effective_scenario": "SingleStream"}) == []
    [short] = broken(FULL | {"effective_min_duration_ms": 3000})
    assert short.startswith("its minimum duration was 3 s where MLPerf's rules ask 600 s")
    assert broken(FULL | {"result_min_duration_met": False}) == ["it ended before its minimum duration"]
    stopped = FULL | {"early_stopping_met": False}
    assert broken(stopped | {"effective_scenario": "SingleStream"}) == ["LoadGen's early stopping was not met"]
    assert broken(stopped | {"effective_scenario": "Offline"}) == []  # Offline judges no tail
    assert broken(stopped, mode="accuracy") == []  # an accuracy run has no duration or tail to hold
    unscored = broken(None, {"accuracy_verified": False})
    assert unscored == ["its accuracy was not scored on the benchmark's data set"]
    assert broken(None, {"accuracy_verified": True}) == []
    [few] = broken(FULL | {"effective_performance_sample_count": 64})
    assert few == "its performance sample count was 64 where the round asks at least 1024"
    [other] = broken(FULL | {"effective_qsl_rng_seed": 1, "loadgen_version": "9.9"})
    assert other.startswith("9.9 ran with seeds no MLPerf round accelbench knows (v6.0, v6.1) uses")
    [model] = broken(FULL, model="resnet18")
    assert model.startswith("resnet18 is not an MLPerf Inference model")
    assert broken_rules(FULL, {}, "resnet50", "performance", False) == ["LoadGen's verdict is INVALID"]
    offline = FULL | {"effective_scenario": "Offline"}
    assert broken(offline | {"effective_samples_per_query": 24576}) == []
    [small] = broken(offline | {"effective_samples_per_query": 368})
    assert small == "its Offline query held 368 samples where the round asks at least 24576"


def test_a_short_official_run_is_not_compliant_and_says_why(run_isolated) -> None:
    """``--profile official --duration 3`` cuts mlperf.conf's 600 s: LoadGen may call it VALID, but the record is
    not for submission, and its first non-compliance says the duration."""
    params = {"backend": "null", "threads": 2, "batch_size": 8, "device": "cpu", "scenario": "singlestream"}
    [r] = run_isolated(params | {"profile": "official", "duration": 3})
    assert r.status == "ok" and r.details["compliant"] is False
    assert any("minimum duration was 3 s" in why for why in r.details["not_compliant"])
    [said] = [c.text for c in r.concerns if c.kind == "non-compliant"]
    assert said.startswith("not for submission: its minimum duration was 3 s")
    assert r.concerns[0].kind == "non-compliant"  # said first
    assert r.details["mlperf_round"] in ROUNDS  # mlperf.conf's seeds: the installed LoadGen's round
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


def test_the_stream_headline_is_mlperfs_early_stopping_estimate(run_isolated) -> None:
    """SingleStream's headline is LoadGen's early-stopping estimate of the p90 (what MLPerf reports), the raw p90
    beside it; the estimate is the number the summary prints."""
    import re
    from pathlib import Path

    params = {"backend": "null", "threads": 2, "batch_size": 8, "device": "cpu", "scenario": "singlestream"}
    [r] = run_isolated(params | {"duration": 1})
    assert r.primary_metric == "latency_p90_early_stopping_seconds"
    summary = (Path(r.details["loadgen_log_dir"]) / "mlperf_log_summary.txt").read_text()
    [ns] = re.findall(r"Early stopping 90.0th percentile estimate: (\d+)", summary)
    assert r.primary.value == int(ns) / 1e9
    assert "latency_p90_seconds" in r.metrics
    settings = r.details["loadgen_settings"]
    assert settings["effective_scenario"] == "SingleStream" and "effective_qsl_rng_seed" in settings
    assert r.details["mlperf_round"] is None  # the quick profile reads no mlperf.conf: no round's seeds


def test_an_fp32_agreement_is_never_called_mlperfs_valid() -> None:
    """An accuracy run scored against FP32's own answers on synthetic samples agrees with FP32 or not; only a run
    whose accuracy was verified (or a performance run) says LoadGen's VALID."""
    from accelbench.results.format import verdict_word
    from accelbench.results.record import Result

    synthetic = Result("infer/loadgen", {}, valid=True, details={"accuracy_verified": False})
    assert verdict_word(synthetic) == "agrees with FP32 (not MLPerf's accuracy)"
    assert verdict_word(Result("infer/loadgen", {}, valid=False, details={"accuracy_verified": False})).startswith(
        "disagrees"
    )
    assert verdict_word(Result("infer/loadgen", {}, valid=True, details={"accuracy_verified": True})) == "VALID"
    assert verdict_word(Result("infer/loadgen", {}, valid=None)) == ""
