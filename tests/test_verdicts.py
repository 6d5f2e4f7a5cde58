"""One failure path and one "not valid", in every family.

A measurement whose verdict is not valid (LoadGen's INVALID, tta's seed rule, a find-peak with no VALID
confirmation) is an ``ok`` record with ``valid: false`` and its reasons as ``INVALID: ...`` warnings, and the
command exits 3; a measurement that could not be made is ``failed`` (one constructor, ``Result.failed``) and the
command exits 1; a dead rank is the same failed record in every family that starts ranks.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import run_cli

from accelbench.errors import BenchmarkFailed
from accelbench.kit.ranks import failure_cause
from accelbench.results.record import Result, schema_errors
from accelbench.suite.suites import Entry, make_entry
from accelbench.suite.worker import run_inline

TESTS = Path(__file__).parent

#: one command of each family, and the benchmark its entries run
COMMANDS = {
    "kernels": (["kernels", "gemm", "--m", "64", "--n", "64", "--k", "64"], "kernels/gemm"),
    "train": (["train", "ncf", "--scale", "tiny"], "train/throughput"),
    "infer": (["infer", "resnet50", "--backend", "sleep"], "infer/loadgen"),
    "tta": (["tta", "digits"], "tta/time_to_target"),
}


def _invalid(benchmark: str, params: dict) -> Result:
    return Result(
        benchmark,
        params,
        metrics={"figure": _figure()},
        primary_metric="figure",
        valid=False,
        warnings=["INVALID: the verdict's reason"],
    )


def _figure():
    from accelbench.kit import metrics as fig

    return fig.figure(1.0, "samples/s", higher_is_better=True)


def _runs(monkeypatch, tmp_path: Path, make) -> None:
    """The CLI's run of a suite, each entry's records made by ``make(entry)``: the command's own parsing, table,
    summary and exit status, without measuring."""
    from accelbench.suite import process, runner

    def run_suite(suite, store, options=None, observer=None, resume=None, profile=None):
        results = [r for entry in suite.entries for r in make(entry)]
        return runner.RunSummary("20260101-000000-test", tmp_path, results)

    monkeypatch.setattr(runner, "run_suite", run_suite)
    monkeypatch.setattr(process, "warm", lambda: None)


@pytest.mark.parametrize("family", list(COMMANDS))
def test_every_family_command_exits_3_when_not_valid_and_1_when_failed(family, monkeypatch, cli_env, tmp_path):
    args, benchmark = COMMANDS[family]
    db = ["--db", str(tmp_path / "v.db")]
    outcomes = {
        "valid": (lambda e: [Result(benchmark, e.params, metrics={"figure": _figure()}, valid=True)], 0),
        "no verdict": (lambda e: [Result(benchmark, e.params, metrics={"figure": _figure()})], 0),
        "not valid": (lambda e: [_invalid(benchmark, e.params)], 3),
        "failed": (lambda e: [Result.failed(benchmark, e.params, "a rank failed")], 1),
        "both": (lambda e: [_invalid(benchmark, e.params), Result.failed(benchmark, e.params, "no figure")], 1),
    }
    for what, (make, code) in outcomes.items():
        made: list[str] = []
        _runs(monkeypatch, tmp_path, lambda e, make=make, made=made: made.append(e.benchmark) or make(e))
        p = run_cli([*args, *db], cli_env, tmp_path)
        assert made == [benchmark] and p.returncode == code, (what, p.stdout + p.stderr)
        if what == "not valid":
            assert "1 ok (1 INVALID), 0 failed" in p.stdout, p.stdout


def test_failed_records_come_from_one_constructor():
    r = Result.failed("kernels/gemm", {"m": 1}, "wrong result", details={"log": "x.log"})
    assert (r.status, r.error, r.details, r.metrics, r.valid) == ("failed", "wrong result", {"log": "x.log"}, {}, None)
    d = r.to_dict() | {"run_id": "r", "system": {"fingerprint": "f", "profile": {}}}
    assert schema_errors(d) == []
    with pytest.raises(ValueError):
        Result.failed("kernels/gemm", {}, "")


def test_a_benchmark_that_raises_benchmark_failed_is_recorded_with_its_record(monkeypatch, tmp_path):
    """The one exception: the worker records it failed, with the parameters the benchmark had resolved."""
    import dataclasses
    import sys

    from accelbench import registry

    def run(params, ctx):
        raise BenchmarkFailed("no rate held", {"device": "cpu", "resolved": True}, {"log": "where.log"})
        yield

    info = registry.get("selftest/raise")
    monkeypatch.setattr(sys.modules[__name__], "_raises", run, raising=False)
    fake = dataclasses.replace(info, target=f"{__name__}:_raises")
    monkeypatch.setattr(registry, "get", lambda name: fake if name == info.name else info)
    [r] = run_inline(Entry(info.name, {}), tmp_path)
    assert (r.status, r.error) == ("failed", "no rate held")
    assert r.params == {"device": "cpu", "resolved": True} and r.details == {"log": "where.log"}


def test_tta_seed_rule_not_met_is_ok_invalid_and_exits_3(cli_env, tmp_path):
    """digits, one seed, one epoch to 99.99%: measured, but the seed rule leaves no time to target."""
    db = ["--db", str(tmp_path / "t.db")]
    args = ["tta", "digits", "--seeds", "1", "--seed", "1", "--max-epochs", "1", "--target", "0.9999"]
    p = run_cli([*args, "--threads", "2", *db], cli_env, tmp_path)
    assert p.returncode == 3, p.stdout + p.stderr
    assert "1 ok (1 INVALID), 0 failed" in p.stdout, p.stdout
    from accelbench.results.store import Store

    [r] = Store(tmp_path / "t.db").query()
    assert r.status == "ok" and r.valid is False and r.error is None
    assert r.warnings[0] == "INVALID: " + r.details["invalid_reasons"][0]
    assert "did not reach the target" in r.warnings[0] and "0.9999 within 1 epochs" in r.warnings[0]
    assert r.primary is None and r.metrics["throughput"].value > 0 and not r.details["score"]["valid"]


def test_find_peak_with_no_valid_confirmation_is_ok_invalid_and_exits_3(monkeypatch, cli_env, tmp_path):
    """The infer command's find-peak, run by the worker in this process with LoadGen's runs faked: the screens
    pass, every confirmation is INVALID. The record is the highest confirmation's, INVALID; exit status 3."""
    from accelbench.infer import peak
    from accelbench.loadgen.start import Outcome

    def fake_run(serving, settings, params, ctx):
        qps = settings.server_target_qps
        detail = {"result_perf_constraints_met": True, "result_99.00_percentile_latency_ns": 5e6}
        detail |= {"result_scheduled_samples_per_sec": qps, "result_completed_samples_per_sec": qps * 0.8}
        detail |= {"requested_server_target_qps": qps, "result_query_count": settings.min_query_count}
        if settings.min_query_count >= 662:  # a confirmation
            detail |= {"result_validity": "INVALID", "early_stopping_met": False}
        sut = SimpleNamespace(batches=1, samples=1, per_worker=[1], utilization=0.1)
        return Outcome(detail, {}, ctx.log_dir, sut)

    monkeypatch.setattr(peak, "loadgen_run", fake_run)
    records: list[Result] = []
    _runs(monkeypatch, tmp_path, lambda entry: records.extend(run_inline(entry, tmp_path)) or records)
    args = ["infer", "resnet50", "--backend", "sleep", "--service-ms", "1", "--scenario", "server"]
    p = run_cli(
        [*args, "--mode", "find-peak", "--latency-bound-ms", "20", "--db", str(tmp_path / "p.db")], cli_env, tmp_path
    )
    assert p.returncode == 3, p.stdout + p.stderr
    assert "1 ok (1 INVALID), 0 failed" in p.stdout, p.stdout
    [r] = records
    assert r.status == "ok" and r.valid is False and r.details["find_peak"]["peak"] is None
    assert r.warnings[0].startswith("INVALID: no peak: 3 confirmation runs at ")
    confirmed = [t["value"] for t in r.details["find_peak"]["trials"] if t["confirmation"]]
    assert r.details["target_qps"] == confirmed[0] == max(confirmed)  # the highest confirmation's figures
    assert r.primary_metric == "queries_per_second"  # completed: MLPerf v6's Server figure
    assert r.primary.value == pytest.approx(0.8 * confirmed[0])


@pytest.mark.slow  # torchrun: several processes, three times
def test_a_dead_rank_is_the_same_failed_record_in_every_family(monkeypatch, tmp_path):
    """Rank 1 dies as it starts (a crashed GPU worker) in train, tta and allreduce: one failed record shape."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import os\nif os.environ.get('TORCHELASTIC_RUN_ID') and os.environ.get('RANK') == '1':\n    os._exit(13)\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
    entries = {
        "train/throughput": {"model": "ncf", "scale": "tiny", "num_batches": 4, "warmup": 1, "display_every": 2},
        "tta/time_to_target": {"workload": "digits", "seeds": 1, "seed": 1},
        "kernels/allreduce": {"sizes": "4K"},
    }
    records = {}
    for benchmark, params in entries.items():
        [r] = run_inline(make_entry(benchmark, {**params, "nproc": 2, "device": "cpu", "threads": 1}), tmp_path)
        records[benchmark] = r
    for benchmark, r in records.items():
        assert r.status == "failed" and r.benchmark == benchmark, r.error
        assert re.fullmatch(
            r"a rank failed, so the run was stopped: torchrun exited with status \d+ after \d+ s: "
            r"rank 1 exited with code 13 \(see .+\.log\)",
            r.error,
        ), r.error
        assert Path(r.details["log"]).is_file() and r.details["log"] in r.error
        # the parameters as the family resolved them, not the entry's: the device it ran on
        assert r.params["device"] == "cpu" and r.params["nproc"] == 2
    shapes = {
        (r.status, r.valid, r.primary_metric, tuple(r.metrics), tuple(r.details), tuple(r.warnings), r.samples)
        for r in records.values()
    }
    assert len(shapes) == 1, shapes


def test_the_cause_of_a_failed_torchrun_job_is_read_from_its_log():
    raised = "[rank1]: Traceback (most recent call last):\n[rank1]: accelbench.errors.UsageError: bad model\n"
    assert failure_cause(raised + "=====\n") == "rank 1: accelbench.errors.UsageError: bad model"
    # rank 1 died without a word; rank 0's lost connection is only its consequence
    died = "[rank0]: RuntimeError: Connection closed by peer\nFailures:\n[1]:\n  rank : 0\n  exitcode : -15\n"
    died += "Root Cause (first observed failure):\n[0]:\n  rank      : 1 (local_rank: 1)\n  exitcode  : 13 (pid: 7)\n"
    assert failure_cause(died + "======\n") == "rank 1 exited with code 13"
    assert failure_cause(raised + died) == "rank 1: accelbench.errors.UsageError: bad model"
    assert failure_cause(died.replace(": 13 (", ": -9 (")) == "rank 1 was killed by signal 9"
    assert failure_cause("starting\nsomething odd\n-----\n") == "something odd"
