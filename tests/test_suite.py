import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import popen_interruptible

from accelbench.errors import UsageError
from accelbench.suite.runner import RunOptions, run_suite
from accelbench.suite.suites import Suite, builtin_suite, load_suite_file, make_entry, resolve_targets
from accelbench.suite.worker import run_inline


def _suite(*entries):
    return Suite("t", [make_entry(name, params, timeout) for name, params, timeout in entries])


def test_failures_are_recorded_and_the_suite_goes_on(tmp_path, store, profile):
    suite = _suite(
        ("selftest/ok", {}, None),
        ("selftest/raise", {"message": "kaput"}, None),
        ("selftest/crash", {"how": "segfault"}, None),
        ("selftest/crash", {"how": "kill"}, None),
        ("selftest/hang", {}, 1.5),
        ("selftest/ok", {"iterations": 10}, None),
    )
    t0 = time.perf_counter()
    summary = run_suite(suite, store, RunOptions(out_dir=tmp_path / "runs"), profile=profile)
    assert time.perf_counter() - t0 < 60
    statuses = [r.status for r in summary.results]
    assert statuses == ["ok", "failed", "failed", "failed", "failed", "ok"]
    errors = [r.error for r in summary.results]
    assert "RuntimeError: kaput" in errors[1]
    assert "segmentation fault" in errors[2]
    assert "out of memory" in errors[3]
    assert "timed out after 1.5 s" in errors[4]
    # every record is in the store and in the run folder
    assert store.count() == 6
    lines = (summary.run_dir / "results.jsonl").read_text().splitlines()
    assert [json.loads(x)["status"] for x in lines] == statuses
    assert json.loads((summary.run_dir / "system.json").read_text())["fingerprint"] == profile["fingerprint"]
    assert all(r.system["fingerprint"] == profile["fingerprint"] for r in summary.results)


def test_resume_skips_what_finished(tmp_path, store, profile):
    suite = _suite(("selftest/ok", {}, None), ("selftest/raise", {}, None))
    first = run_suite(suite, store, RunOptions(out_dir=tmp_path), profile=profile)
    again = run_suite(Suite("x", []), store, RunOptions(out_dir=tmp_path), resume=first.run_id[:12], profile=profile)
    assert again.run_id == first.run_id and again.already_done == 2 and again.results == []
    retry = run_suite(
        Suite("x", []), store, RunOptions(out_dir=tmp_path, retry_failed=True), resume=first.run_id, profile=profile
    )
    assert [r.benchmark for r in retry.results] == ["selftest/raise"]
    assert len(store.query(run_id=first.run_id)) == 3
    # the retried entry keeps its place in the suite (002), and its new attempt a log of its own
    logs = sorted(p.name for p in (first.run_dir / "logs").iterdir())
    assert [name.split("-")[0] for name in logs] == ["001", "002", "002.2"], logs
    with pytest.raises(UsageError, match="no run"):
        run_suite(Suite("x", []), store, RunOptions(out_dir=tmp_path), resume="nope", profile=profile)


def test_ctrl_c_keeps_finished_records_and_resume_finishes(tmp_path, cli_env):
    db = tmp_path / "s.db"
    cmd = [sys.executable, "-m", "accelbench", "run", "selftest/ok", "selftest/hang", "selftest/ok"]
    cmd += ["--db", str(db), "--out", str(tmp_path / "runs"), "--timeout", "60"]
    proc = popen_interruptible(cmd, cli_env, tmp_path)
    from accelbench.results.store import Store

    deadline = time.time() + 60
    while time.time() < deadline:
        time.sleep(0.3)
        try:
            if db.exists() and Store(db, readonly=True).count() >= 1:
                break
        except UsageError:  # the runner is still creating the store
            continue
    time.sleep(1.0)  # now inside selftest/hang
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, (out, err)
    assert "--resume" in out
    s = Store(db, readonly=True)
    assert [r.status for r in s.query()] == ["ok"]
    run_id = s.runs()[0].run_id
    done = subprocess.run(
        [sys.executable, "-m", "accelbench", "run", "--resume", run_id, "--db", str(db), "--timeout", "1"],
        env=cli_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1  # the hang fails on its 1 s timeout
    statuses = sorted(r.status for r in Store(db, readonly=True).query(run_id=run_id))
    assert statuses == ["failed", "ok", "ok"]
    # the resumed entries continue the first run's numbering: no second 001- beside the first run's logs
    logs = sorted(p.name for p in (tmp_path / "runs" / run_id / "logs").iterdir())
    assert [name.split("-")[0] for name in logs] == ["001", "002", "002.2", "003"], logs
    assert "hang" in logs[2] and "ok" in logs[3], logs


def test_suite_file_expands_lists_and_applies_defaults(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text(
        'name = "mine"\n[defaults]\nmin_time = 0.2\n'
        '[[benchmark]]\nname = "kernels/gemm"\ntimeout = 30\n'
        'params = { m = [64, 128], n = 64, k = 64, precision = ["fp32", "bf16"] }\n'
    )
    suite = load_suite_file(f)
    assert suite.name == "mine" and len(suite.entries) == 4
    assert {(e.params["m"], e.params["precision"]) for e in suite.entries} == {
        (64, "fp32"),
        (64, "bf16"),
        (128, "fp32"),
        (128, "bf16"),
    }
    assert all(e.params["min_time"] == 0.2 and e.timeout == 30 for e in suite.entries)
    assert len({e.key for e in suite.entries}) == 4


@pytest.mark.parametrize(
    "text, message",
    [
        ("name = [", "not valid TOML"),
        ('name = "x"\n', "at least one"),
        ('[[benchmark]]\nname = "kernels/nope"\n', "unknown benchmark"),
        ('[[benchmark]]\nname = "kernels/gemm"\nparams = { m = 0 }\n', "--m must be a positive integer"),
        ('[[benchmark]]\nname = "kernels/gemm"\nparams = { m = "big" }\n', "must be int"),
        ('[[benchmark]]\nname = "kernels/gemm"\nparams = { colour = 1 }\n', "no parameter 'colour'"),
        ('[[benchmark]]\nname = "kernels/gemm"\nparams = { precision = "fp64" }\n', "unknown precision"),
        ('[[benchmark]]\nname = "kernels/gemm"\ntimeout = -1\n', "timeout must be a positive"),
        ('bogus = 1\n[[benchmark]]\nname = "kernels/gemm"\n', "unknown top-level key"),
    ],
)
def test_malformed_suite_files(tmp_path, text, message):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(UsageError, match=message):
        load_suite_file(f)


def test_builtin_suites_and_targets():
    quick = builtin_suite("quick")
    kernels = {"gemm", "conv", "rnn", "attention", "sparse", "membw", "allreduce"}
    assert {e.benchmark for e in quick.entries} == {f"kernels/{k}" for k in kernels} | {
        "train/throughput",
        "train/llm",
        "infer/loadgen",
        "infer/llm",
        "tta/time_to_target",
    }
    assert builtin_suite("standard").entries
    mixed = resolve_targets(["selftest/ok", "quick"])
    assert len(mixed.entries) == len(quick.entries) + 1
    with pytest.raises(UsageError, match="neither a suite"):
        resolve_targets(["fastest"])
    with pytest.raises(UsageError, match="did you mean 'kernels/gemm'"):
        resolve_targets(["kernels/gem"])


def test_the_tpu_vs_gpu_suite_runs_the_studys_sweep_and_meets_its_published_rows():
    """Each entry is ResNet-50 training at a per-device batch the study reports; a record of its 256 entry
    stands beside both published rows (4x Cloud TPU v2, 4x V100) with a ratio per device."""
    from accelbench.reference.match import matches
    from accelbench.results.record import Metric, Result

    suite = builtin_suite("tpu-vs-gpu")
    assert {e.params["model"] for e in suite.entries} == {"resnet50"}
    assert {e.params["batch_size"] for e in suite.entries} == {"32", "64", "128", "256"}
    assert {e.params["precision"] for e in suite.entries} == {"amp_bf16", "amp_fp16"}
    entry = next(e for e in suite.entries if e.params["batch_size"] == "256" and e.params["precision"] == "amp_bf16")
    metric = Metric(value=900.0, unit="images/s", higher_is_better=True, n=10, ci95=(890.0, 910.0))
    r = Result(entry.benchmark, dict(entry.params), metrics={"throughput": metric}, primary_metric="throughput")
    rows = [m for m in matches(r) if m.reference.source == "TPUv2 vs V100 study"]
    study = {m.reference.accelerator: m for m in rows if m.reference.data == "synthetic"}
    tpu = study["Cloud TPU v2"]
    assert tpu.like and tpu.ratio_per_device == pytest.approx(900 / (3186 / 4))
    assert "4 vs 1 device(s): compare per device" in tpu.differences
    assert study["Tesla V100"].ratio is None  # published in fp16: no ratio for a bf16 run


def test_inline_run_returns_records():
    results = run_inline(make_entry("selftest/ok", {}), Path("."))
    assert results[0].status == "ok" and results[0].metrics["seconds"].value > 0
    failed = run_inline(make_entry("selftest/raise", {"message": "x"}))
    assert failed[0].status == "failed" and failed[0].error == "RuntimeError: x"


def test_a_killed_runner_takes_its_benchmark_with_it(tmp_path, cli_env):
    import psutil

    cmd = [
        sys.executable,
        "-m",
        "accelbench",
        "run",
        "selftest/hang",
        "--db",
        str(tmp_path / "s.db"),
        "--timeout",
        "120",
    ]
    proc = subprocess.Popen(cmd, env=cli_env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    parent = psutil.Process(proc.pid)
    deadline = time.time() + 60
    workers: list = []
    while time.time() < deadline and not workers:
        time.sleep(0.2)
        # the worker is forked by the runner's forkserver: a grandchild that sleeps in selftest/hang
        workers = [p for p in parent.children(recursive=True) if p.pid != proc.pid and _leads_session(p)]
    assert workers, "the runner never started its worker"
    everything = parent.children(recursive=True)
    proc.kill()
    proc.wait()
    gone, alive = psutil.wait_procs(everything, timeout=15)
    assert not alive, [p.cmdline()[:3] for p in alive]


def _leads_session(p) -> bool:
    import os

    try:
        return os.getsid(p.pid) == p.pid
    except ProcessLookupError:
        return False


def test_kernel_entries_share_a_process_and_one_that_overruns_leaves_the_rest_a_fresh_one(tmp_path, store, profile):
    """Consecutive entries of one kernel run in one worker process (its start-up paid once); each keeps its own
    timeout and log, and the entry after one killed at its timeout runs in a new process. Other benchmarks never
    share one."""
    quick = {"min_time": 0.05, "max_time": 0.2, "min_reps": 3, "precision": "fp32"}
    suite = _suite(
        ("kernels/gemm", quick | {"m": 64, "n": 64, "k": 64}, None),
        ("kernels/gemm", quick | {"m": 96, "n": 96, "k": 96}, None),
        ("kernels/gemm", quick | {"m": 2048, "n": 2048, "k": 2048, "min_time": 60.0, "max_time": 120.0}, 3.0),
        ("kernels/gemm", quick | {"m": 64, "n": 64, "k": 32}, None),
        ("selftest/ok", {}, None),
        ("selftest/ok", {"iterations": 10}, None),
    )
    summary = run_suite(suite, store, RunOptions(out_dir=tmp_path / "runs"), profile=profile)
    statuses = [r.status for r in summary.results]
    assert statuses[:2] == ["ok", "ok"] and statuses[3:] == ["ok", "ok", "ok"]
    overrun = summary.results[2]  # killed at its timeout, or stopped there keeping the samples it had
    assert "timed out after 3 s" in str(overrun.error) or "stopped" in overrun.details, overrun.error
    logs = sorted((summary.run_dir / "logs").glob("*.log"))
    assert len(logs) == 6  # one log an entry, shared process or not
    pids = [int(log.read_text().split(" in worker process ")[1].split()[0]) for log in logs]
    assert pids[0] == pids[1] == pids[2]  # one process for the first three gemms, the overrun among them
    assert len({pids[2], pids[3], pids[4], pids[5]}) == 4  # after the kill a fresh one; selftests each their own


def test_a_suite_runs_the_entries_for_what_it_runs_on(tmp_path, cli_env):
    """quick on a CPU keeps its CPU-sized entries; on an accelerator, work that fills the device: peak-sized GEMMs in
    every precision, memory bandwidth, a full-width LLM slice, ResNet-50 at batch 256, never the tiny models."""
    quick = builtin_suite("quick")
    cpu, gpu = quick.on("cpu"), quick.on("accelerator")
    assert len(cpu.entries) + len(gpu.entries) == len(quick.entries) and cpu.meta["left_out"] == len(gpu.entries)
    assert all(e.params.get("scale", "full") == "full" for e in gpu.entries)
    assert all(e.params.get("scale") == "tiny" for e in cpu.entries if e.benchmark.startswith(("train/", "infer/")))
    gemm = [e.params for e in gpu.entries if e.benchmark == "kernels/gemm"]
    assert {p["m"] for p in gemm} == {8192} and {"bf16", "fp16", "fp8", "tf32"} <= {p["precision"] for p in gemm}
    (llm,) = [e.params for e in gpu.entries if e.benchmark == "train/llm"]
    assert (llm["layers"], llm["seq_len"], llm["precision"]) == (4, 8192, "amp_bf16")
    assert {e.benchmark for e in gpu.entries} >= {"kernels/membw", "train/throughput", "infer/loadgen"}
    # the suite format: a wrong target is one line
    bad = tmp_path / "bad.toml"
    bad.write_text('[[benchmark]]\nname = "selftest/ok"\non = "gpu"\n')
    with pytest.raises(UsageError, match="on is cpu or accelerator, not 'gpu'"):
        load_suite_file(bad)
    # the CLI picks by --device (here the CPU) and says what it left out
    out = subprocess.run(
        [sys.executable, "-m", "accelbench", "run", "quick", "--dry-run", "--device", "cpu"],
        capture_output=True, text=True, env=cli_env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert f"{len(gpu.entries)} entries of quick are for runs on an accelerator: left out of this one" in out.stdout
    assert "8192x8192x8192" not in out.stdout and "resnet18" in out.stdout
