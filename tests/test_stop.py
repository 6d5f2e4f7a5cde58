"""Stopping a run keeps what it finished: training windows measured before a Ctrl-C or a timeout are a record."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

from conftest import popen_interruptible

from accelbench.suite.runner import RunOptions, run_suite
from accelbench.suite.suites import Suite, make_entry

LONG = {"model": "resnet18", "scale": "tiny", "warmup": 1, "num_batches": 100000, "display_every": 2, "threads": 2}


def test_a_training_run_stopped_at_its_timeout_keeps_its_finished_windows(tmp_path, store, profile):
    entry = make_entry("train/throughput", LONG, timeout=12)
    t0 = time.monotonic()
    [r] = run_suite(Suite("t", [entry]), store, RunOptions(out_dir=tmp_path), profile=profile).results
    took = time.monotonic() - t0
    assert r.status == "ok", r.error
    assert r.details["stopped"].startswith("stopped at the entry's timeout: ")
    windows = r.details["windows"]
    assert windows >= 1 and f"{windows} of 50000 windows measured" in r.details["stopped"]
    assert any(w.startswith("stopped early: ") for w in r.warnings)
    assert r.metrics["throughput"].value > 0 and len(r.samples) == windows
    assert took < 12 + 30, took  # the step in progress, not the grace period, ended it


def test_a_benchmark_that_does_not_listen_is_killed_at_its_timeout_as_before(tmp_path, store, profile):
    t0 = time.monotonic()
    entry = make_entry("selftest/hang", {}, timeout=1.5)
    [r] = run_suite(Suite("t", [entry]), store, RunOptions(out_dir=tmp_path), profile=profile).results
    assert r.status == "failed" and "timed out" in r.error
    assert time.monotonic() - t0 < 15  # no grace period for a benchmark that never asked whether to stop


def test_ctrl_c_during_training_keeps_the_finished_windows(tmp_path: Path, cli_env: dict[str, str]) -> None:
    db = tmp_path / "s.db"
    cmd = [sys.executable, "-m", "accelbench", "train", "resnet18", "--scale", "tiny", "--warmup", "1"]
    cmd += ["--num-batches", "100000", "--display-every", "2", "--threads", "2", "--db", str(db), "--json"]
    proc = popen_interruptible(cmd, cli_env, tmp_path)
    from accelbench.results.store import Store

    deadline = time.time() + 120
    runs = tmp_path / "accelbench-runs"
    while time.time() < deadline:  # until the first windows are reported (the entry's log says the steps)
        time.sleep(0.5)
        logs = list(runs.glob("*/logs/*.log")) if runs.exists() else []
        if any("step 6/" in p.read_text(errors="replace") for p in logs):
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    [r] = Store(db, readonly=True).query()
    assert r.status == "ok" and r.details["stopped"].startswith("interrupted (Ctrl-C): ")
    assert r.details["windows"] >= 3
