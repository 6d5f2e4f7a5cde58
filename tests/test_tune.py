"""accelbench tune: the staged search, its gate, its budget and its ranking, with trials faked where the logic
is ours (a table of figures per candidate) and one real search of a tiny model's training."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from helpers import writer_misfits

from accelbench.errors import UsageError
from accelbench.params import build_params, parse_duration
from accelbench.results.record import Metric, Result, schema_errors
from accelbench.suite.suites import Entry, make_entry
from accelbench.tune.outcome import ranking, reproduce, summary
from accelbench.tune.search import Tuner
from accelbench.tune.specs import TuneParams


@pytest.fixture(autouse=True)
def _two_openvino_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenVINO's optimal requests follow the host's cores: fixed here, so the tables below hold on any host."""
    monkeypatch.setattr("accelbench.tune.loadgen._openvino_requests", lambda: 2)


def tune_params(**values: Any) -> TuneParams:
    base = {"model": "resnet18", "scale": "tiny", "precisions": "fp32,int8", "compile": False, "budget": "10m"}
    return build_params(TuneParams, base | values, "tune")


class FakeTrials:
    """Runs no model: answers each entry from a table keyed by (backend, channels_last, batch, streams).

    ``figures`` gives the Offline samples/s (or the SingleStream p90 seconds); ``failing`` the entries that
    crash; ``inaccurate`` the runtimes whose accuracy gate fails. The clock advances ``seconds`` per trial.
    """

    def __init__(
        self,
        figures: dict[tuple, float],
        failing: set[tuple] = frozenset(),  # type: ignore[assignment]
        inaccurate: set[str] = frozenset(),  # type: ignore[assignment]
        seconds: float = 5.0,
    ) -> None:
        self.figures, self.failing, self.inaccurate, self.seconds = figures, failing, inaccurate, seconds
        self.now = 0.0
        self.entries: list[Entry] = []

    def clock(self) -> float:
        return self.now

    def __call__(self, entry: Entry) -> list[Result]:
        self.entries.append(entry)
        self.now += self.seconds
        p = entry.params
        key = (p["backend"], p.get("channels_last", False), p["batch_size"], p["streams"])
        if key in self.failing:
            return [Result(entry.benchmark, p, status="failed", error="killed by SIGKILL: out of memory")]
        if p["mode"] == "accuracy":
            ok = p["backend"] not in self.inaccurate
            metrics = {
                "fp32_agreement": Metric(value=1.0 if ok else 0.9, unit="fp32 agreement", higher_is_better=True),
                "quality_ratio": Metric(value=1.0 if ok else 0.9, unit="x FP32", higher_is_better=True),
            }
            return [Result(entry.benchmark, p, metrics=metrics, primary_metric="fp32_agreement", valid=ok)]
        value = self.figures.get(key, 10.0)
        if p["scenario"] == "singlestream":
            m = Metric(value=value, unit="s", higher_is_better=False)
            return [
                Result(
                    entry.benchmark,
                    p,
                    metrics={"latency_p90_seconds": m},
                    primary_metric="latency_p90_seconds",
                    valid=True,
                )
            ]
        name = "queries_per_second" if p["mode"] == "find-peak" else "throughput"
        m = Metric(value=value, unit="samples/s", higher_is_better=True)
        return [Result(entry.benchmark, p, metrics={name: m}, primary_metric=name, valid=True)]


FIGURES = {
    ("torch", False, 8, 1): 100.0,
    ("torch", True, 8, 1): 150.0,
    ("onnxruntime", False, 8, 1): 200.0,
    ("int8", False, 8, 1): 410.0,
    ("openvino", False, 8, 1): 300.0,
    ("openvino", False, 32, 1): 380.0,
    ("openvino", False, 8, 2): 420.0,
}


def test_the_fastest_candidate_wins_only_through_the_gate_and_its_confirmations() -> None:
    fake = FakeTrials(FIGURES, inaccurate={"int8"})
    params = tune_params(backends="torch,onnxruntime,int8,openvino", finalists=2, repeats=2)
    search = Tuner(params, fake, clock=fake.clock).run()
    rows = ranking(search)
    assert rows[0].status == "winner" and rows[0].candidate.settings["streams"] == 2  # openvino, two requests
    assert rows[0].confirmations == [420.0, 420.0, 420.0]  # a third round: LoadGen's ranges separate from 3 runs
    assert next(r for r in rows if r.candidate.settings["backend"] == "int8").status == "gate failed"
    # screening order: the default first; then the shape stage around the two best runtimes (openvino, int8)
    first = fake.entries[0].params
    assert (first["backend"], first["channels_last"], first["batch_size"]) == ("torch", False, 8)
    phases = [(e.params["mode"], e.params.get("duration")) for e in fake.entries]
    assert ("accuracy", 0.0) in phases and ("performance", 6.0) in phases
    # the default is confirmed beside the finalists, so the speed-up is measured side by side
    record = summary(search)
    assert record.status == "ok" and record.primary_metric == "throughput"
    assert record.metrics["speedup_over_default"].value == pytest.approx(4.2)
    assert record.details["reproduce"] == (
        "accelbench infer resnet18 --scale tiny --backend openvino --precision fp32 --streams 2 --duration 6.0"
    )  # the confirmations' length: the command gives the figure ranked
    assert [t["phase"] for t in record.details["trials"]].count("confirm") == 3 * 3  # 2 finalists + default
    full = record.to_dict() | {"run_id": "r", "system": {"fingerprint": "f", "profile": {}}}
    assert schema_errors(json.loads(json.dumps(full))) == []
    assert writer_misfits(Result.from_json(record.to_json())) == []  # every key as TuneDetails declares it


def test_a_crashing_candidate_is_failed_with_its_reason_and_the_search_goes_on() -> None:
    fake = FakeTrials(FIGURES, failing={("openvino", False, 8, 2)})
    search = Tuner(tune_params(backends="torch,onnxruntime,openvino", repeats=1), fake, clock=fake.clock).run()
    rows = ranking(search)
    crashed = next(r for r in rows if r.candidate.settings["backend"] == "openvino")
    assert crashed.status.startswith("failed: killed by SIGKILL")
    assert rows[0].status == "winner" and rows[0].candidate.settings["backend"] == "onnxruntime"


def test_the_budget_stops_each_phase_and_says_what_was_not_tried() -> None:
    fake = FakeTrials(FIGURES, seconds=10.0)
    # 200 s: screening leaves a gate (36 s expected: three screenings and the gate's samples at the default's 100
    # samples/s) and 3 rounds of two confirmations (20 s expected each: a screening and 2.5 s a second of LoadGen's
    # 4 s more) their time, so it stops by 44 s (4 trials of 10 s); the first round holds two candidates
    search = Tuner(
        tune_params(backends="torch,onnxruntime,int8,openvino", budget="200s", repeats=3), fake, clock=fake.clock
    ).run()
    screens = [t for t in search.trials if t.phase == "screen"]
    assert len(screens) == 4
    assert any("screening of runtimes" in s for s in search.stopped)
    assert any("round 1 holds 2 of 4" in s for s in search.stopped)
    assert [why for _, why in search.not_tried] and all("budget" in why for _, why in search.not_tried)
    assert fake.now <= 200 + 10  # at most one trial past the budget
    assert summary(search).status == "ok"


def test_singlestream_ranks_the_lowest_latency_and_tries_no_batch_sizes() -> None:
    latencies = {("torch", False, 8, 1): 0.030, ("onnxruntime", False, 8, 1): 0.012, ("openvino", False, 8, 1): 0.020}
    fake = FakeTrials(latencies)
    params = tune_params(backends="torch,onnxruntime,openvino", scenario="singlestream", repeats=1)
    search = Tuner(params, fake, clock=fake.clock).run()
    assert {e.params["batch_size"] for e in fake.entries} == {8}
    record = summary(search)
    assert record.details["winner"]["backend"] == "onnxruntime"
    assert record.metrics["speedup_over_default"].value == pytest.approx(2.5)  # 30 ms / 12 ms


def test_server_is_screened_on_offline_and_confirmed_by_find_peak() -> None:
    fake = FakeTrials(FIGURES)
    params = tune_params(backends="torch,onnxruntime", scenario="server", finalists=1)
    search = Tuner(params, fake, clock=fake.clock).run()
    screens = [e.params for e in fake.entries if e.params["mode"] == "performance"]
    confirms = [e.params for e in fake.entries if e.params["mode"] == "find-peak"]
    assert screens and {p["scenario"] for p in screens} == {"offline"}
    assert confirms and {p["scenario"] for p in confirms} == {"server"}
    assert len(confirms) == 6  # the finalist and the default, 3 rounds: LoadGen's ranges separate from 3 runs
    assert "--mode find-peak" in reproduce(search, ranking(search)[0].candidate)


def test_training_is_searched_over_precision_layout_and_batch() -> None:
    seen: list[dict] = []

    def trial(entry: Entry) -> list[Result]:
        seen.append(entry.params)
        p = entry.params
        value = 10.0 * (2 if p["channels_last"] else 1) * (1.5 if p["batch_size"] == "32" else 1)
        m = Metric(value=value, unit="images/s", higher_is_better=True)
        return [Result(entry.benchmark, p, metrics={"throughput": m}, primary_metric="throughput")]

    params = tune_params(task="train", precisions="fp32", repeats=1, batch_sizes="32")
    record = summary(Tuner(params, trial).run())
    assert record.details["winner"] == {
        "precision": "fp32",
        "channels_last": True,
        "compile": False,
        "batch_size": "32",
    }
    assert record.metrics["speedup_over_default"].value == pytest.approx(3.0)
    assert seen[0]["num_batches"] == 6 and seen[-1]["num_batches"] == 18
    assert record.details["reproduce"] == (
        "accelbench train resnet18 --scale tiny --batch-size 32 --channels-last --warmup 3 --num-batches 18 "
        "--display-every 2"
    )


def test_bad_input_is_refused_before_anything_runs() -> None:
    assert parse_duration("10m") == 600 and parse_duration("90") == 90 and parse_duration("1.5h") == 5400
    for bad, words in (
        ({"budget": "5s"}, "too short"),
        ({"budget": "ten"}, "bad duration"),
        ({"task": "train", "backends": "torch"}, "--backends applies to the infer/loadgen benchmark, not train/"),
        ({"backends": "null"}, "unknown backend"),
        ({"backends": "compile"}, "--no-compile"),
        ({"batch_sizes": "8,x"}, "whole numbers"),
        ({"checkpoint": "/nonexistent.pt"}, "does not exist"),
    ):
        with pytest.raises(UsageError, match=words):
            tune_params(**bad)
    with pytest.raises(UsageError, match="its own command"):
        make_entry("tune/search", {})


def test_the_report_shows_a_search_with_its_command() -> None:
    from accelbench.report.build import ReportInput, build
    from accelbench.report.markdown import render

    fake = FakeTrials(FIGURES)
    record = summary(Tuner(tune_params(backends="torch,openvino", repeats=1), fake, clock=fake.clock).run())
    record.run_id, record.system = "r", {"fingerprint": "f", "profile": {}}
    text = render(build(ReportInput(records=[record], title="t")), lambda chart: f"{chart.name}.png")
    assert "## Best settings (accelbench tune)" in text and record.details["reproduce"] in text
    assert "openvino fp32 bs 8 x2 in flight" in text and "winner" in text


def test_the_headline_says_whether_accuracy_was_verified(tmp_path: Path) -> None:
    """Without labels the gate judges fidelity to FP32, not accuracy: the best is said with that caveat, in the
    terminal and the report; with a dataset, that accuracy was verified on its labels."""
    from infer_fixtures import write_colour_folder

    from accelbench.cli.commands_tune import _outcome_lines
    from accelbench.report.tuning import _headline

    fake = FakeTrials(FIGURES)
    record = summary(Tuner(tune_params(backends="torch,openvino", repeats=1), fake, clock=fake.clock).run())
    assert record.details["outcome"] == "winner"
    words = record.details["accuracy"]
    assert words.startswith("accuracy not verified: fidelity to FP32 on random weights")
    assert any(words in line for line in _outcome_lines(record, "resnet18")) and words in _headline(record)
    assert "fidelity to FP32" in record.details["gate"]

    data = write_colour_folder(tmp_path / "colours")
    fake = FakeTrials(FIGURES)
    params = tune_params(backends="torch,openvino", repeats=1, dataset=str(data))
    record = summary(Tuner(params, fake, clock=fake.clock).run())
    assert record.details["accuracy"] == f"accuracy verified on the labels of {data}"
    assert "MLPerf's 99%" in record.details["gate"]


def test_a_real_search_stores_every_trial_beside_its_summary(tmp_path: Path, cli_env: dict[str, str]) -> None:
    """ncf (no image input: one runtime) at its default batch: one screening, stored; with nothing to compare it
    against, the search says "no search" (a skipped summary, exit 0) and confirms nothing."""
    args = ["tune", "ncf", "--scale", "tiny", "--task", "train", "--precisions", "fp32", "--no-compile"]
    args += ["--batch-sizes", "8192", "--repeats", "1", "--budget", "60s", "--json"]
    out = run_cli(args, cli_env, tmp_path, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads(out.stdout)
    record = doc["summary"]
    assert record["benchmark"] == "tune/search" and record["status"] == "skipped"
    assert record["reason"].startswith("no search: ") and "reproduce" not in record["details"]
    trials = record["details"]["trials"]
    assert [t["phase"] for t in trials] == ["screen"] and all(t["status"] == "ok" for t in trials)
    listed = run_cli(["results", "list", "--run", doc["run_id"], "--json"], cli_env, tmp_path)
    stored = json.loads(listed.stdout)
    assert len(stored) == len(trials) + 1
    assert {t["result_id"] for t in trials} <= {r["id"] for r in stored}


def test_many_cores_also_try_leaving_cores_to_the_harness(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a 16-core CPU the best threaded runtime is screened with 15 and 14 threads too; the winner's command
    keeps the count; on 2 cores, or with --threads given, no thread counts are tried."""
    from accelbench.tune import loadgen

    figures = {("torch", True, 8, 1): 150.0}
    monkeypatch.setattr(loadgen, "_cores", lambda: 16)
    fake = FakeTrials(figures)
    original = fake.__call__

    def by_threads(entry: Entry) -> list[Result]:
        [r] = original(entry)
        if entry.params.get("threads") == 15 and r.metrics.get("throughput"):
            r.metrics["throughput"] = Metric(value=190.0, unit="samples/s", higher_is_better=True)
        return [r]

    search = Tuner(tune_params(backends="torch", precisions="fp32"), by_threads, clock=fake.clock).run()
    tried = {e.params.get("threads") for e in fake.entries if e.params["mode"] == "performance"}
    assert {15, 14} <= tried
    winner = ranking(search)[0]
    assert winner.candidate.settings["threads"] == 15 and "15 threads" in winner.candidate.label()
    assert reproduce(search, winner.candidate).endswith("--threads 15")
    monkeypatch.setattr(loadgen, "_cores", lambda: 2)
    fake2 = FakeTrials(figures)
    Tuner(tune_params(backends="torch", precisions="fp32"), fake2, clock=fake2.clock).run()
    assert {e.params.get("threads") for e in fake2.entries} == {None}
    monkeypatch.setattr(loadgen, "_cores", lambda: 16)
    fake3 = FakeTrials(figures)
    Tuner(tune_params(backends="torch", precisions="fp32", threads=4), fake3, clock=fake3.clock).run()
    assert {e.params.get("threads") for e in fake3.entries} == {4}
