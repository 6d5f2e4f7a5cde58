"""Before and after a run, for people and for scripts: the plan, progress without a terminal, JSON output."""

from __future__ import annotations

import json
from pathlib import Path

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
    assert rows[1]["last_seconds"] is None  # never ran here: no estimate is invented
    runs = json.loads(run_cli(["results", "runs", "--json"], cli_env, tmp_path).stdout)
    assert len(runs) == 1  # the dry run ran nothing


def test_a_request_that_cannot_finish_in_its_timeout_is_said_before_it_starts(tmp_path: Path, cli_env) -> None:
    proc = run_cli(["infer", "resnet18", "--scale", "tiny", "--duration", "100000", "--dry-run"], cli_env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "at least 100000 s" in proc.stdout and "timeout" in proc.stdout
