"""MLPerf's compliance tests run through accelbench: a performance run under the test's audit.config, judged by
:mod:`accelbench.loadgen.verify` against the runs it audits. A system that caches answers on purpose fails TEST04;
an honest one passes. (TEST01, whose sampled answers match the accuracy run's, is checked in
tests/test_submission_inference.py, on the runs its tree is made of.)"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from accelbench.infer.backends import Sleep
from accelbench.loadgen import verify
from accelbench.loadgen.audit import config_text
from accelbench.loadgen.mlcommons import ROUNDS

#: a system of known capacity: 8 samples per 4 ms batch
SLEEP = {"backend": "sleep", "service_ms": 4.0, "batch_size": 8, "threads": 2, "device": "cpu", "duration": 1}


class LastSampleCached(Sleep):
    """Sleeps its service time for each sample unlike the one before it, and answers a repeat at once: a cache of
    one answer, which random issue almost never hits and TEST04's one repeated sample always does."""

    def load(  # type: ignore[override]
        self, served: Any, model: Any, device: Any, precision: str, calibration: list[Any], service_ms: float = 1.0
    ) -> Any:
        per_sample = service_ms / 1000 / 8
        last: list[Any] = [None]

        def predict(inputs: Any) -> None:
            fresh = 0
            for sample in inputs:
                fresh += sample != last[0]
                last[0] = sample
            if fresh:
                time.sleep(per_sample * fresh)

        return predict


def log_dir(result: Any) -> Path:
    return Path(result.details["loadgen_log_dir"])


def test_the_audit_config_holds_mlcommons_values() -> None:
    resnet = ROUNDS["v6.1"].models["resnet"]
    test01 = config_text("TEST01", resnet, "offline")
    assert "*.*.mode = 2" in test01 and "*.*.accuracy_log_sampling_target = 4096" in test01
    assert "*.*.accuracy_log_rng_seed = 720381539243781796" in test01
    test04 = config_text("TEST04", resnet, "singlestream")
    assert "*.SingleStream.performance_issue_same = 1" in test04
    assert "*.SingleStream.performance_issue_same_index = 3" in test04
    test06 = config_text("TEST06", ROUNDS["v6.1"].models["llama3.1-8b"], "server")
    assert "*.*.min_duration = 0" in test06 and "*.*.sample_concatenate_permutation = 0" in test06


@pytest.mark.parametrize("backend, passes", [("sleep", True), ("test_loadgen_audit:LastSampleCached", False)])
def test_test04_catches_a_system_that_caches_answers(run_isolated, backend: str, passes: bool) -> None:
    params = SLEEP | {"backend": backend, "scenario": "offline"}
    [reference] = run_isolated(params)
    [audit] = run_isolated(params | {"audit": "TEST04"})
    assert audit.details["audit"] == "TEST04" and audit.details["compliant"] is False
    assert (log_dir(audit) / "audit.config").is_file()
    assert audit.details["loadgen_settings"]["effective_performance_issue_same"] is True
    assert any(c.kind == "audit" for c in audit.concerns)
    checked = verify.test04(log_dir(reference), log_dir(audit))
    assert checked.passed is passes, checked.files
    assert ("TEST PASS" in checked.files["verify_performance.txt"]) is passes


def test_a_discarded_reruns_logs_move_apart_named_as_discarded(tmp_path: Path) -> None:
    from accelbench.loadgen.replan import DISCARDED, discard

    run = tmp_path / "logs" / "loadgen-offline-performance-0a1b2c3d"
    run.mkdir(parents=True)
    (run / "mlperf_log_detail.txt").write_text("x")
    moved = discard(run)
    assert moved == tmp_path / "logs" / DISCARDED / run.name and not run.exists()
    assert (moved / "mlperf_log_detail.txt").is_file() and "not the reported result" in (
        moved / "DISCARDED.txt"
    ).read_text()
    assert discard(tmp_path / "gone") == tmp_path / "gone"  # nothing to move
