"""Before and after a run, for people and for scripts: the plan, progress without a terminal, JSON output."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import run_cli


def test_a_run_for_scripts_json_on_stdout_progress_on_stderr_and_in_the_log(tmp_path: Path, cli_env) -> None:
    proc = run_cli(["run", "selftest/ok", "--json", "--out", str(tmp_path / "runs")], cli_env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)  # nothing but the JSON on stdout
    assert run["counts"] == {"ok": 1, "failed": 0, "skipped": 0}
    assert Path(run["run_dir"]).is_absolute() and Path(run["run_dir"]).is_dir()
    assert run["results"][0]["benchmark"] == "selftest/ok" and run["results"][0]["run_id"] == run["run_id"]
    # no terminal: plain progress lines on stderr, with the position in the suite and the benchmark's own steps
    assert "1/1 selftest/ok" in proc.stderr and "summing 1000 integers 20 times" in proc.stderr
    logs = list((Path(run["run_dir"]) / "logs").glob("*.log"))
    assert any("summing 1000 integers" in p.read_text() for p in logs)  # the run's log says where it was

    listed = run_cli(["results", "list", "--json"], cli_env, tmp_path)
    assert [r["id"] for r in json.loads(listed.stdout)] == [run["results"][0]["id"]]
    runs = json.loads(run_cli(["results", "runs", "--json"], cli_env, tmp_path).stdout)
    assert runs[0]["run_id"] == run["run_id"] and runs[0]["counts"] == {"ok": 1} and runs[0]["fingerprint"]


def test_the_dry_run_lists_the_plan_with_last_times_and_runs_nothing(tmp_path: Path, cli_env) -> None:
    first = run_cli(["run", "selftest/ok", "--out", str(tmp_path / "runs")], cli_env, tmp_path)
    assert first.returncode == 0, first.stderr
    plan = run_cli(["run", "selftest/ok", "selftest/raise", "--dry-run", "--json"], cli_env, tmp_path)
    assert plan.returncode == 0, plan.stderr
    rows = json.loads(plan.stdout)
    assert [r["benchmark"] for r in rows] == ["selftest/ok", "selftest/raise"]
    assert rows[0]["last_seconds"] is not None and rows[0]["last_run"]  # measured here before
    assert rows[0]["estimate"]["source"] == "measured here before"
    assert rows[0]["estimate"]["seconds"] == rows[0]["last_seconds"]
    assert rows[1]["last_seconds"] is None  # never ran here: the cost model's estimate, said as such
    assert rows[1]["estimate"]["source"] == "model"
    runs = json.loads(run_cli(["results", "runs", "--json"], cli_env, tmp_path).stdout)
    assert len(runs) == 1  # the dry run ran nothing


def test_a_request_that_cannot_finish_in_its_timeout_is_said_before_it_starts(tmp_path: Path, cli_env) -> None:
    proc = run_cli(["infer", "resnet18", "--scale", "tiny", "--duration", "100000", "--dry-run"], cli_env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "at least 100000 s" in proc.stdout and "timeout" in proc.stdout


def test_the_eta_counts_the_entry_in_progress_by_its_own_estimate() -> None:
    from accelbench.cli import render
    from accelbench.suite.suites import Entry

    clock = [100.0]
    a, b, c = (Entry("selftest/ok", {"iterations": n}) for n in (1, 2, 3))
    obs = render.ProgressObserver({a.key: 50.0, b.key: 30.0}, quiet=True, clock=lambda: clock[0])
    obs.suite_started("r", Path("."), [a, b], 0)
    obs.entry_started(1, 2, a)
    assert obs._eta() == "about 1:20 left"  # 50 s for this one (its last time here) and 30 s for the next
    clock[0] += 20
    assert obs._eta() == "about 1:00 left"  # what has passed comes off the entry in progress
    obs.entry_progress("step 10/40", left=90.0)  # it measured itself slower than last time: its own word wins
    clock[0] += 10
    assert obs._eta() == "about 1:50 left"
    obs.entry_started(2, 2, b)
    assert obs._eta() == "about 0:30 left"  # the new entry's estimate replaces the old one's

    unknown = render.ProgressObserver({a.key: 50.0}, quiet=True, clock=lambda: clock[0])
    unknown.suite_started("r", Path("."), [a, c], 0)
    unknown.entry_started(1, 2, a)
    assert unknown._eta() == "this one: about 0:50 left"  # the next never ran here: no total is guessed
    unknown.entry_started(2, 2, c)
    assert unknown._eta() == ""
    unknown.entry_progress("epoch 1", left=12.0)
    assert unknown._eta() == "about 0:12 left"


def test_figures_show_the_digits_their_interval_supports() -> None:
    from accelbench.results import format as fmt
    from accelbench.results.record import Metric

    def m(value: float, rel: float | None, unit: str = "samples/s") -> Metric:
        ci = (value * (1 - rel), value * (1 + rel)) if rel is not None else None
        return Metric(value=value, unit=unit, higher_is_better=True, ci95=ci)

    assert fmt.metric(m(2506332, 0.095)) == "2.51M samples/s"  # was 2,506,332: seven digits for a ±9.5% figure
    assert fmt.metric(m(2506332, 0.6)) == "2.5M samples/s"
    assert fmt.metric(m(0.184, 0.012, "TFLOPS")) == "0.1840 TFLOPS"
    assert fmt.metric(m(19.3, None, "images/s")) == "19.30 images/s"
    assert fmt.metric(m(0.000184, 0.01, "TOPS")) == "0.1840 GOPS"
    assert fmt.metric(m(0.01234, 0.02, "s")) == "12.3 ms"
    assert fmt.number(12345.6, 3) == "12,300" and fmt.number(999.96) == "1,000" and fmt.number(999_999, 3) == "1.00M"
    assert fmt.number(1.5e9) == "1.500G" and fmt.number(0.00123, 3) == "0.00123"


def test_a_timeout_of_days_is_said_in_days_with_why(tmp_path: Path, cli_env) -> None:
    proc = run_cli(["tta", "digits", "--dry-run"], {**cli_env, "COLUMNS": "200"}, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "7 days" in proc.stdout and "604800" not in proc.stdout
    assert "a timeout in days" in proc.stdout and "--timeout S" in proc.stdout
    short = run_cli(["run", "selftest/ok", "--dry-run"], {**cli_env, "COLUMNS": "200"}, tmp_path)
    assert short.returncode == 0 and "timeout in days" not in short.stdout


def test_timeouts_read_in_the_unit_a_reader_thinks_in() -> None:
    from accelbench.cli.render import _span

    assert [_span(s) for s in (60, 600, 1800, 3600, 7200, 604800)] == [
        "60 s",
        "10 min",
        "30 min",
        "60 min",
        "2 h",
        "7 days",
    ]


def test_the_plans_caption_says_how_much_is_measured_and_how_much_modelled() -> None:
    """The total, split by source and counted; an entry without any estimate (a plan made by hand) is counted
    apart, never as "0:00" as if measured."""
    from accelbench.cli.render import plan_table
    from accelbench.suite.estimate import MODEL, Estimate
    from accelbench.suite.plan import Planned
    from accelbench.suite.suites import make_entry

    ok = make_entry("selftest/ok", {})

    def caption(*rows: tuple[float | None, float | None]) -> str:
        planned = [
            Planned(ok, 600.0, last, "r1" if last else None, model=Estimate(m, MODEL, "x") if m else None)
            for last, m in rows
        ]
        return plan_table(planned).caption

    assert caption((None, None), (None, None)) == "2 benchmark(s): no estimate"
    assert caption((30.0, None), (50.0, None)) == (
        "2 benchmark(s), about 1:20: 1:20 measured here before (2, plus start-up)"
    )
    assert caption((30.0, None), (None, 12.0), (None, 8.0)) == (
        "3 benchmark(s), about 0:50: 0:30 measured here before (1, plus start-up), 0:20 from the cost model (2)"
    )
    assert caption((None, 12.0), (None, None)) == (
        "2 benchmark(s), about 0:12: 0:12 from the cost model (1), 1 with no estimate"
    )
    kernels = [Planned(make_entry("kernels/gemm", {"m": m}), 600.0, None, process=1) for m in (64, 128)]
    shared = plan_table([*kernels, Planned(ok, 600.0, None, process=2)]).caption
    assert shared.endswith("; in 2 worker processes (consecutive kernels of one benchmark share one)")


def test_a_kernels_estimate_is_its_timing_budget_and_its_process_start_once() -> None:
    """The model reads the entry's own budget (warm-up, min-time; a min-reps of long calls past min-time) and
    counts a shared process's start on its first entry only."""
    from accelbench.suite.estimate import COSTS, MODEL, Target
    from accelbench.suite.plan import plan
    from accelbench.suite.suites import Suite, make_entry

    target = Target.of("cpu")
    short = make_entry("kernels/gemm", {"m": 64, "n": 64, "k": 64, "min_time": 0.5, "warmup_time": 0.1})
    longer = make_entry("kernels/gemm", {"m": 64, "n": 64, "k": 64, "min_time": 3.0, "warmup_time": 1.0})
    first, second = plan(Suite("t", [short, longer]), None, "x", target=target)
    costs = COSTS["cpu"]
    assert first.estimate is not None and second.estimate is not None
    assert first.estimate.source == second.estimate.source == MODEL
    assert first.estimate.seconds >= costs.process_start + 0.6 and "start" in first.estimate.how
    assert "start" not in second.estimate.how  # the same process
    assert second.estimate.seconds - first.estimate.seconds >= 3.4 - costs.process_start - 0.01
    assert "warm-up 1 s" in second.estimate.how and "timing 3 s" in second.estimate.how


def test_a_dry_run_of_standard_on_a_gpu_estimates_every_entry_saying_from_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under a fake CUDA (an H100 as torch.cuda describes it): every one of standard's entries has an estimate with
    its source, the one measured here before from the store, the rest from the cost model; the caption adds both
    (it used to say "at least 3:53 for the 375 whose own settings say a minimum, no estimate for the rest")."""
    from accelbench.cli.main import main
    from accelbench.results.record import Result
    from accelbench.results.store import Store
    from accelbench.suite.suites import builtin_suite
    from accelbench.system.profile import collect_profile

    _fake_h100(monkeypatch)
    suite = builtin_suite("standard").on("accelerator")
    llm = next(e for e in suite.entries if e.benchmark == "train/llm")
    db = tmp_path / "store.db"
    with Store(db) as store:  # the training slice ran here before, 95 s
        profile = collect_profile()
        system = {"fingerprint": profile["fingerprint"], "profile": profile}
        stored = Result(llm.benchmark, llm.params, status="skipped", reason="stored for the test", system=system)
        stored.started_at, stored.ended_at = "2026-01-01T10:00:00+00:00", "2026-01-01T10:01:35+00:00"
        stored.run_id, stored.spec_key = "run-before", llm.key
        store.add(stored)

    assert main(["run", "standard", "--dry-run", "--device", "cuda", "--db", str(db), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == len(suite.entries) == 391
    assert all(r["estimate"] and r["estimate"]["seconds"] >= 0 for r in rows)
    by_source: dict[str, list[dict]] = {}
    for r in rows:
        by_source.setdefault(r["estimate"]["source"], []).append(r)
    (measured,) = by_source["measured here before"]
    assert measured["benchmark"] == "train/llm" and measured["estimate"]["seconds"] == 95.0
    assert len(by_source["model"]) == 390
    models = {r["benchmark"]: r["estimate"] for r in by_source["model"]}
    assert "steps of" in models["train/throughput"]["how"] and "probe" in models["infer/llm"]["how"]
    assert "timing" in models["kernels/gemm"]["how"]
    assert not any("could not be modelled" in r["estimate"]["how"] for r in rows)

    assert main(["run", "standard", "--dry-run", "--device", "cuda", "--db", str(db)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "391 benchmark(s), about" in out and "measured here before (1, plus start-up)" in out
    assert "from the cost model (390)" in out and "no estimate" not in out


def _fake_h100(monkeypatch: pytest.MonkeyPatch) -> None:
    """One NVIDIA H100 as ``torch.cuda`` describes it (no GPU here): what the plan reads of a device."""
    import torch

    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (9, 0))
    props = SimpleNamespace(
        name="NVIDIA H100 80GB HBM3", total_memory=85 * 10**9, multi_processor_count=132, major=9, minor=0
    )
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d=None: props)


def test_the_plan_numbers_each_entrys_worker_process() -> None:
    """Consecutive kernels of one benchmark share a process; a model's entry, or another kernel, starts a new one."""
    from accelbench.suite.plan import plan
    from accelbench.suite.suites import Suite, make_entry

    entries = [make_entry("kernels/gemm", {"m": m}) for m in (64, 128, 256)]
    entries += [
        make_entry("kernels/conv", {}),
        make_entry("selftest/ok", {}),
        make_entry("selftest/ok", {"iterations": 9}),
    ]
    entries += [make_entry("kernels/gemm", {"m": 32})]
    assert [p.process for p in plan(Suite("t", entries), None, "x")] == [1, 1, 1, 2, 3, 4, 5]


def test_a_dry_run_creates_no_store(tmp_path: Path, cli_env) -> None:
    """--dry-run writes nothing: a store path that does not exist yet stays absent (its folder too)."""
    db = tmp_path / "not" / "yet" / "x.db"
    plan = run_cli(["kernels", "gemm", "--db", str(db), "--dry-run"], cli_env, tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert "from the cost model" in plan.stdout and not (tmp_path / "not").exists()


def test_a_closed_loop_and_a_sweep_of_them_are_estimated_as_they_run() -> None:
    """A closed loop runs rounds of its users at their rate (not a Server run's half rate); a sweep runs one loop
    a point, so it is estimated as their sum, not as a few probe batches."""
    from accelbench.suite.estimate import Target, modelled
    from accelbench.suite.suites import make_entry

    target = Target.of("cpu")
    base = {"model": "llama3.1-8b", "scale": "tiny", "engine": "static"}
    loop = modelled(make_entry("infer/llm", base | {"concurrency": "4"}), target)
    sweep = modelled(make_entry("infer/llm", base | {"mode": "sweep", "concurrency": "1,4,16"}), target)
    assert "closed loop of 4 users" in loop.how and "3 closed loops" in sweep.how
    assert sweep.seconds > loop.seconds  # three loops, one of them the four users'
