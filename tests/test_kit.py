"""The kit: one skip path, one launcher, one set of metric constructors, robust import."""

import json
import socket
import subprocess
import sys
from typing import Any

import pytest
from conftest import run_cli

from accelbench.kit import metrics as fig
from accelbench.measure.stats import Measurement
from accelbench.results.record import Metric
from accelbench.suite.runner import RunOptions, run_suite
from accelbench.suite.suites import Suite, make_entry
from accelbench.suite.worker import run_inline


def test_rate_interval_is_the_time_interval_inverted():
    m = Measurement((1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 4.0))
    r = fig.rate(8.0, m, "items/s")
    lo, hi = m.ci95
    assert r.value == pytest.approx(4.0) and r.ci95 == pytest.approx((8.0 / hi, 8.0 / lo)) and r.n == m.n
    pct = fig.pct_of_peak(r, 8.0)
    assert pct.value == pytest.approx(50.0) and pct.ci95 == pytest.approx((100 * 8 / hi / 8, 100 * 8 / lo / 8))
    assert fig.seconds(m).stats["median"] == m.median


def test_metric_fields_are_keyword_only():
    with pytest.raises(TypeError):
        Metric(1.0, "s", False)  # type: ignore[misc]


def _train_ncf(num_batches: int) -> Any:
    params = {"model": "ncf", "scale": "tiny", "warmup": 1, "threads": 2, "batch_size": "64", "device": "cpu"}
    [r] = run_inline(make_entry("train/throughput", params | {"num_batches": num_batches}))
    assert r.status == "ok", r.error
    return r


def test_training_pct_of_peak_carries_an_interval():
    r = _train_ncf(60)  # six windows of the default 10 steps
    pct, tp = r.metrics["pct_of_peak"], r.metrics["throughput"]
    assert pct.ci95 is not None and pct.ci95[0] <= pct.value <= pct.ci95[1]
    assert pct.ci95[1] / pct.ci95[0] == pytest.approx(tp.ci95[1] / tp.ci95[0])


def test_a_short_training_run_has_one_window_and_says_it_has_no_interval():
    r = _train_ncf(6)
    assert r.params["display_every"] == 6  # the default window adapts to a short run
    assert r.metrics["throughput"].ci95 is None and r.metrics["throughput"].n == 1
    assert any(w.startswith("few samples: 1") for w in r.warnings)


def test_an_impossible_nproc_is_skipped_by_every_family(tmp_path, store, profile):
    """A suite written for a bigger machine: each launching family says why and the suite exits clean."""
    too_many = 64
    suite = Suite(
        "big",
        [
            make_entry("kernels/allreduce", {"nproc": too_many, "device": "cpu"}),
            make_entry("train/throughput", {"model": "ncf", "scale": "tiny", "nproc": too_many, "device": "cpu"}),
            make_entry("tta/time_to_target", {"workload": "digits", "nproc": too_many, "device": "cpu", "seeds": 1}),
        ],
    )
    summary = run_suite(suite, store, RunOptions(out_dir=tmp_path), profile=profile)
    assert [r.status for r in summary.results] == ["skipped"] * 3, [r.error for r in summary.results]
    assert all("--nproc 64" in r.reason for r in summary.results)
    assert summary.results[1].params["device"] == "cpu"


def test_bad_imports_are_one_line_errors(cli_env, tmp_path):
    db = str(tmp_path / "s.db")
    noise = tmp_path / "noise.jsonl"
    noise.write_bytes(bytes(range(256)) * 4)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    for path, words in ((noise, "not UTF-8"), (deep, "nested too deeply")):
        p = run_cli(["results", "import", str(path), "--db", db], cli_env, tmp_path)
        assert p.returncode == 2 and words in p.stderr and "Traceback" not in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1


def test_a_results_file_cut_mid_write_imports_its_complete_records(cli_env, tmp_path):
    run = run_cli(["run", "selftest/ok", "selftest/ok", "--out", str(tmp_path / "runs")], cli_env, tmp_path)
    assert run.returncode == 0, run.stderr
    [folder] = (tmp_path / "runs").iterdir()
    lines = (folder / "results.jsonl").read_text().splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2])
    p = run_cli(["results", "import", str(cut), "--db", str(tmp_path / "o.db")], cli_env, tmp_path)
    assert p.returncode == 0, p.stderr
    assert "skipped cut.jsonl line 2: cut short" in p.stdout and "imported 1 new" in p.stdout
    broken = tmp_path / "broken.jsonl"
    broken.write_text(lines[0][:20] + "\n" + lines[1] + "\n")
    p = run_cli(["results", "import", str(broken), "--db", str(tmp_path / "o.db")], cli_env, tmp_path)
    assert p.returncode == 2 and "broken.jsonl:1" in p.stderr


def test_tiny_figures_get_a_smaller_unit():
    from accelbench.results.format import metric

    assert metric(Metric(value=1.181e-6, unit="TFLOPS", higher_is_better=True)) == "1.181 MFLOPS"
    assert metric(Metric(value=0.2889, unit="TFLOPS", higher_is_better=True)) == "0.2889 TFLOPS"
    assert metric(Metric(value=0.0016, unit="GB/s", higher_is_better=True)) == "1.600 MB/s"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, params",
    [
        ("train/throughput", {"model": "ncf", "scale": "tiny", "warmup": 1, "num_batches": 4, "batch_size": "64"}),
        ("tta/time_to_target", {"workload": "digits", "seeds": 1, "seed": 1, "target": 0.5, "max_epochs": 5}),
        ("kernels/allreduce", {"sizes": "64K", "min_time": 0.05, "min_reps": 3}),
    ],
)
def test_two_nodes_on_loopback_record_once_on_node_zero(name, params, cli_env, tmp_path):
    """Two invocations, as on two hosts, meet at 127.0.0.1: node 0's invocation records, node 1 says so."""
    endpoint = f"127.0.0.1:{_free_port()}"
    nodes = {"nproc": 1, "nnodes": 2, "rdzv_endpoint": endpoint, "device": "cpu", "threads": 1}
    procs = []
    for node in (1, 0):  # node 1 first: the rendezvous must not depend on who arrives first
        entry = {"benchmark": name, "params": params | nodes | {"node_rank": node}}
        code = (
            "import json, sys; from accelbench.suite.suites import make_entry; "
            "from accelbench.suite.worker import run_inline; e = json.loads(sys.argv[1]); "
            "rs = run_inline(make_entry(e['benchmark'], e['params']), __import__('pathlib').Path(sys.argv[2]), print); "
            "print('RECORDS', json.dumps([[r.status, r.error or r.reason] for r in rs]))"
        )
        log_dir = tmp_path / f"node{node}"
        log_dir.mkdir()
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", code, json.dumps(entry), str(log_dir)],
                env=cli_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outs = {}
    for node, proc in zip((1, 0), procs, strict=True):
        out, _ = proc.communicate(timeout=300)
        outs[node] = out
        assert proc.returncode == 0, out
    records = {n: json.loads(o.split("RECORDS ", 1)[1]) for n, o in outs.items()}
    assert records[1] == [] and "--node-rank 0 records the result" in outs[1]
    assert [s for s, _ in records[0]] == ["ok"], records[0]
