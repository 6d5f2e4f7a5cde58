"""accelbench tune's claims: a speed-up only against a default measured VALID more than once, a best only where it
separated from the runner-up, "no search" where nothing was compared, and a budget that holds to one trial.

Trials are faked (a table of figures per candidate, a clock that advances by each phase's seconds), so a
two-minute budget is tested without sleeping; the real search is in the README's figures and the report.
"""

from __future__ import annotations

import json
from dataclasses import replace
from itertools import cycle
from pathlib import Path
from typing import Any, Iterator

import pytest

from accelbench.params import build_params
from accelbench.results.record import Metric, Result, schema_errors
from accelbench.suite.suites import Entry
from accelbench.tune.outcome import ranking, summary
from accelbench.tune.search import MAX_ROUNDS, Tuner
from accelbench.tune.space import INFER_DEFAULT, Candidate
from accelbench.tune.specs import TuneParams
from accelbench.tune.trials import Search, Trial
from accelbench.tune.verdict import apart, sample_figures

DEFAULT = ("torch", False, 8, 1)
ONNX = ("onnxruntime", False, 8, 1)
OPENVINO = ("openvino", False, 8, 2)


@pytest.fixture(autouse=True)
def _two_openvino_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenVINO's optimal requests follow the host's cores: fixed here, so the candidates hold on any host."""
    monkeypatch.setattr("accelbench.tune.loadgen._openvino_requests", lambda: 2)


def tune_params(**values: Any) -> TuneParams:
    base = {"model": "resnet18", "scale": "tiny", "precisions": "fp32", "compile": False, "budget": "10m"}
    return build_params(TuneParams, base | values, "tune")


def phase_of(p: dict[str, Any]) -> str:
    if p.get("mode") == "accuracy":
        return "gate"
    if p.get("mode") == "find-peak" or p.get("duration") == 6.0 or p.get("num_batches") == 18:
        return "confirm"
    return "screen"


class Fake:
    """Runs no model. ``figures`` gives each candidate's Offline samples/s, one value or a list cycled through per
    run (run-to-run variation); ``invalid`` the candidates whose confirmations LoadGen calls INVALID;
    ``seconds`` each phase's time on the fake clock. Every trial's start, length and timeout are logged."""

    def __init__(
        self,
        figures: dict[tuple, float | list[float]],
        seconds: dict[str, float] | float = 5.0,
        invalid: frozenset[tuple] = frozenset(),
    ) -> None:
        self.seconds = seconds if isinstance(seconds, dict) else dict.fromkeys(("screen", "gate", "confirm"), seconds)
        self.invalid = invalid
        self.runs: dict[tuple, Iterator[float]] = {
            k: cycle(v if isinstance(v, list) else [v]) for k, v in figures.items()
        }
        self.now = 0.0
        self.log: list[tuple[str, tuple, float, float, float | None]] = []

    def clock(self) -> float:
        return self.now

    def __call__(self, entry: Entry) -> list[Result]:
        p = entry.params
        phase, key = phase_of(p), (p["backend"], p.get("channels_last", False), p["batch_size"], p["streams"])
        length = self.seconds[phase]
        if phase == "screen" and p["backend"] == "compile":  # a compile comes first
            length = self.seconds.get("compile", length)
        self.log.append((phase, key, self.now, length, entry.timeout))
        self.now += length
        if phase == "gate":
            m = Metric(value=1.0, unit="fp32 agreement", higher_is_better=True)
            metrics = {"fp32_agreement": m}
            return [Result(entry.benchmark, p, metrics=metrics, primary_metric="fp32_agreement", valid=True)]
        value = next(self.runs[key]) if key in self.runs else 10.0
        bad = phase == "confirm" and key in self.invalid
        m = Metric(value=value, unit="samples/s", higher_is_better=True)
        reason = "INVALID: the run ended before its minimum duration (the probe overestimated the rate)"
        return [
            Result(
                entry.benchmark,
                p,
                metrics={"throughput": m},
                primary_metric="throughput",
                valid=not bad,
                reason=reason if bad else None,
            )
        ]

    def confirms(self, key: tuple) -> int:
        return sum(1 for phase, k, *_ in self.log if phase == "confirm" and k == key)


def stored(record: Result) -> list[str]:
    """The schema's complaints about the summary as it is stored (none expected)."""
    full = record.to_dict() | {"run_id": "r", "system": {"fingerprint": "f", "profile": {}}}
    return schema_errors(json.loads(json.dumps(full)))


def outcome_text(record: Result) -> str:
    from accelbench.cli.commands_tune import _outcome_lines

    return "\n".join(_outcome_lines(record, "resnet18"))


# -- the speed-up ---------------------------------------------------------------------------------------------


def test_an_invalid_default_gives_no_speed_up() -> None:
    """The issue's case: the default's confirmation INVALID at 104.3 samples/s (its screening read 177.4)."""
    fake = Fake({DEFAULT: 177.4, ONNX: 215.0}, invalid=frozenset({DEFAULT}))
    fake.runs[DEFAULT] = iter([177.4] + [104.3] * 20)  # screened VALID, then confirmed INVALID
    search = Tuner(tune_params(backends="torch,onnxruntime", finalists=1), fake, clock=fake.clock).run()
    record = summary(search)
    assert record.status == "ok" and record.details["outcome"] == "winner" and stored(record) == []
    assert record.details["winner"]["backend"] == "onnxruntime"
    assert "speedup_over_default" not in record.metrics and "default" not in record.details
    assert "INVALID" in record.details["speedup_withheld"] and "no baseline" in record.details["speedup_withheld"]
    assert fake.confirms(DEFAULT) == 1  # an INVALID candidate leaves the rounds: it cannot be a baseline
    text = outcome_text(record)
    assert "best:" in text and "the default settings" not in text.split("\n")[0]
    assert "x the default" not in text and "no speed-up" in text


def search_of(trials: list[tuple[str, dict[str, Any], float | None, bool]], **params: Any) -> Search:
    """A search from (phase, settings, figure, valid) rows (figure None: the trial crashed), for outcomes no
    fake schedule reaches."""
    search = Search(tune_params(**params))
    for phase, settings, value, valid in trials:
        if value is None:
            r = Result("infer/loadgen", {}, status="failed", error="killed by SIGKILL: out of memory")
        else:
            m = Metric(value=value, unit="samples/s", higher_is_better=True)
            r = Result("infer/loadgen", {}, metrics={"throughput": m}, primary_metric="throughput", valid=valid)
        search.trials.append(Trial(phase, Candidate(settings), r, 5.0))
    return search


def test_a_default_confirmed_once_gives_no_speed_up() -> None:
    """The default's later confirmations crashed: the winner separated from the runner-up, but one run of the
    default is no baseline."""
    onnx, ov = INFER_DEFAULT | {"backend": "onnxruntime"}, INFER_DEFAULT | {"backend": "openvino", "streams": 2}
    rows = [("screen", c, v, True) for c, v in ((INFER_DEFAULT, 100.0), (onnx, 200.0), (ov, 150.0))]
    rows += [("gate", onnx, 1.0, True), ("gate", ov, 1.0, True)]
    for d, o, v in ((100.0, 200.0, 150.0), (None, 201.0, 151.0), (None, 199.0, 149.0)):
        rows += [("confirm", INFER_DEFAULT, d, True), ("confirm", onnx, o, True), ("confirm", ov, v, True)]
    record = summary(search_of(rows))
    assert record.details["outcome"] == "winner" and "speedup_over_default" not in record.metrics
    assert "confirmed 1 time(s)" in record.details["speedup_withheld"]
    assert "x the default" not in outcome_text(record)


def test_a_speed_up_needs_the_default_separated_from_the_winner() -> None:
    onnx = INFER_DEFAULT | {"backend": "onnxruntime"}
    rows = [("screen", INFER_DEFAULT, 100.0, True), ("screen", onnx, 110.0, True), ("gate", onnx, 1.0, True)]
    for d, o in ((100.0, 108.0), (112.0, 103.0), (104.0, 111.0)):  # interleaved rounds whose ranges overlap
        rows += [("confirm", INFER_DEFAULT, d, True), ("confirm", onnx, o, True)]
    search = search_of(rows)
    assert not apart(search, Candidate(onnx), Candidate(dict(INFER_DEFAULT))).separated
    record = summary(search)
    assert record.details["outcome"] == "equivalent" and "speedup_over_default" not in record.metrics


def test_a_separated_winner_states_its_speed_up_and_the_evidence() -> None:
    fake = Fake({DEFAULT: [100.0, 104.0, 98.0], ONNX: [200.0, 190.0, 210.0]})
    record = summary(Tuner(tune_params(backends="torch,onnxruntime", finalists=1), fake, clock=fake.clock).run())
    assert record.details["outcome"] == "winner"
    assert record.metrics["speedup_over_default"].value == pytest.approx(2.0)
    assert "ranges of 3 and 3 runs apart" in record.details["verdict"]
    assert "2.00x the default settings" in outcome_text(record)


# -- separation ---------------------------------------------------------------------------------------------


def test_equivalent_finalists_are_not_separated() -> None:
    """Two finalists whose runs overlap go on being confirmed, interleaved, until the rounds end; then both are
    listed as equivalent and neither is named best. The default, separated below them, leaves the rounds."""
    figures = {DEFAULT: 100.0, ONNX: [200.0, 190.0, 210.0, 205.0], OPENVINO: [205.0, 198.0, 192.0, 208.0]}
    fake = Fake(figures)
    params = tune_params(backends="torch,onnxruntime,openvino", finalists=2)
    search = Tuner(params, fake, clock=fake.clock).run()
    assert fake.confirms(ONNX) == fake.confirms(OPENVINO) == MAX_ROUNDS
    assert fake.confirms(DEFAULT) == params.repeats
    order = [k for phase, k, *_ in fake.log if phase == "confirm"]
    # interleaved, the best and the default first in each round
    assert order[:6] == [ONNX, DEFAULT, OPENVINO] * 2 or order[:6] == [OPENVINO, DEFAULT, ONNX] * 2
    record = summary(search)
    assert record.status == "ok" and record.details["outcome"] == "equivalent" and stored(record) == []
    assert record.details["verdict"].startswith("not separated: the top 2 are equivalent")
    assert "winner" not in record.details and "speedup_over_default" not in record.metrics
    assert {r.status for r in ranking(search)[:2]} == {"equivalent"}
    assert any("without separating the best" in s for s in search.stopped)
    text = outcome_text(record)
    assert "best:" not in text and "onnxruntime fp32 bs 8" in text and "openvino fp32 bs 8 x2 in flight" in text


def train_fake(window: dict[bool, list[float]]) -> Any:
    """Training trials with raw samples: seconds per window, by channels_last, cycled per run (a shift per run)."""
    runs = {k: cycle(v) for k, v in window.items()}

    def trial(entry: Entry) -> list[Result]:
        p = entry.params
        base = next(runs[p["channels_last"]])
        samples = [base * (1 + 0.02 * ((i * 7) % 5 - 2)) for i in range(p["num_batches"] // 2)]
        # the figure is derived from the windows, as train/throughput's record says (n)
        median = sorted(samples)[len(samples) // 2]
        m = Metric(value=64 / median, unit="images/s", higher_is_better=True, n=len(samples))
        r = Result(entry.benchmark, p, metrics={"throughput": m}, primary_metric="throughput", samples=samples)
        return [r]

    return trial


def test_training_windows_are_separated_by_mann_whitney() -> None:
    params = tune_params(task="train", batch_sizes="16", repeats=2)
    record = summary(Tuner(params, train_fake({False: [0.20, 0.21], True: [0.10, 0.11]})).run())
    assert record.details["outcome"] == "winner" and record.details["winner"]["channels_last"] is True
    assert "Mann-Whitney p = " in record.details["verdict"] and "of 2 and 2 runs" in record.details["verdict"]
    assert record.metrics["speedup_over_default"].value == pytest.approx(2.0, rel=0.1)
    same = summary(Tuner(params, train_fake({False: [0.20, 0.21], True: [0.21, 0.20]})).run())
    assert same.details["outcome"] == "equivalent" and "Mann-Whitney" in same.details["verdict"]


def test_samples_become_figures_in_the_metric_s_unit() -> None:
    """A window of 0.2 s where the median is 0.1 s is half the rate: batch sizes compare through their rates. Only
    samples the figure was derived from count (the record's ``n``), as in every verdict."""
    m = Metric(value=100.0, unit="samples/s", higher_is_better=True, n=3)
    r = Result("train/throughput", {}, metrics={"throughput": m}, primary_metric="throughput", samples=[0.1, 0.2, 0.1])
    assert sample_figures(r) == pytest.approx([100.0, 50.0, 100.0])
    r.samples = [0.1, 0.2, 0.1, 0.1]  # four samples behind a figure of three: not the figure's
    assert sample_figures(r) is None
    assert sample_figures(Result("infer/loadgen", {}, metrics={"throughput": m}, primary_metric="throughput")) is None


# -- the budget ---------------------------------------------------------------------------------------------

SLOW = [
    {"screen": 20.0, "gate": 45.0, "confirm": 35.0},
    {"screen": 10.0, "gate": 90.0, "confirm": 15.0},  # a gate six times a screening: the estimate misses
    {"screen": 25.0, "gate": 25.0, "confirm": 25.0},
    {"screen": 8.0, "gate": 12.0, "confirm": 60.0},  # a confirmation far longer than its first estimate
    {"screen": 150.0, "gate": 10.0, "confirm": 10.0},  # the first screening alone outlasts the budget
]


@pytest.mark.parametrize("seconds", SLOW)
def test_a_two_minute_budget_ends_within_one_trial_of_it(seconds: dict[str, float]) -> None:
    """`--budget 2m` took 217 s and 173 s: gates and the first confirmation round ignored it. Now no trial
    starts after the budget, every trial but the first is expected to fit, and each is killed at the end."""
    fake = Fake({DEFAULT: 100.0, ONNX: 200.0, OPENVINO: 300.0}, seconds=seconds)
    params = tune_params(backends="torch,onnxruntime,openvino", budget="2m")
    search = Tuner(params, fake, clock=fake.clock).run()
    assert all(start < 120 for _, _, start, _, _ in fake.log)
    _, _, start, length, _ = fake.log[-1]
    assert fake.now == start + length and fake.now <= 120 + length
    assert fake.now <= 120 + max(seconds.values())
    for _, _, start, _, timeout in fake.log:
        assert timeout is not None and timeout <= max(60.0, 120 - start) + 1e-9
    record = summary(search)
    assert search.elapsed == fake.now and record.details["elapsed_seconds"] == fake.now
    if search.not_tried or len(fake.log) < 3:
        assert search.stopped or search.no_search  # what was cut is said


def test_the_budget_counts_from_the_command_s_start() -> None:
    """Time spent before the search (the system profile) is the budget's too: `started` is the command's."""
    fake = Fake({DEFAULT: 100.0, ONNX: 200.0}, seconds=10.0)
    fake.now = 30.0
    lefts: list[float] = []
    tuner = Tuner(
        tune_params(backends="torch,onnxruntime", budget="2m"),
        fake,
        clock=fake.clock,
        progress=lambda message, left: lefts.append(left),
        started=0.0,
    )
    tuner.run()
    assert lefts[0] == 90.0 and lefts == sorted(lefts, reverse=True)
    assert fake.now <= 120 + 10


def test_progress_shows_the_budget_left() -> None:
    import time

    from accelbench.cli.commands_tune import _TuneObserver

    observer = _TuneObserver(120.0, quiet=True, started=time.monotonic() - 30.0)
    assert observer._eta() in ("budget: 90 s left", "budget: 89 s left")
    assert _TuneObserver(10.0, quiet=True, started=time.monotonic() - 30.0)._eta().startswith("over budget by 2")


# -- no search ----------------------------------------------------------------------------------------------


def test_only_the_default_screened_says_no_search() -> None:
    """The issue's case: a 2-minute budget screened 1 of 12 runtimes and printed "best: ..., 1.00x the default"."""
    fake = Fake({DEFAULT: 100.0}, seconds=40.0)
    search = Tuner(tune_params(backends="torch,onnxruntime,openvino", budget="2m"), fake, clock=fake.clock).run()
    assert [phase for phase, *_ in fake.log] == ["screen"] and fake.now == 40.0  # ends early: nothing to confirm
    assert search.no_search is not None and search.no_search.startswith("no search: raise --budget")
    assert "try --budget" in search.no_search
    record = summary(search)
    assert record.status == "skipped" and record.reason == search.no_search and stored(record) == []
    assert "winner" not in record.details and "reproduce" not in record.details and not record.metrics
    assert {r.status for r in ranking(search)} == {"screened"}
    text = outcome_text(record)
    assert "best" not in text and "x the default" not in text and "raise --budget" in text


def test_a_space_of_one_candidate_says_no_search_and_why() -> None:
    from accelbench.workloads import model_info

    base = model_info("ncf").default_batch["cpu"]  # ncf: no image input, so no memory format to try
    params = tune_params(model="ncf", task="train", batch_sizes=str(base), budget="10m")
    search = Tuner(params, train_fake({False: [0.2]})).run()
    assert search.no_search is not None and "leave one candidate" in search.no_search
    assert [t.phase for t in search.trials] == ["screen"]


def test_the_command_exits_0_on_no_search(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from accelbench.cli.main import main
    from accelbench.suite.runner import SuiteRunner
    from accelbench.workloads import model_info

    monkeypatch.setenv("ACCELBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr("accelbench.system.profile.collect_profile", lambda: {"fingerprint": "f"})
    monkeypatch.setattr(SuiteRunner, "_measure_idle", lambda self: None)
    monkeypatch.setattr(SuiteRunner, "run_entry", lambda self, session, entry: train_fake({False: [0.2]})(entry))
    args = ["tune", "ncf", "--scale", "tiny", "--task", "train", "--precisions", "fp32", "--no-compile"]
    args += ["--batch-sizes", str(model_info("ncf").default_batch["cpu"]), "--device", "cpu"]
    args += ["--out", str(tmp_path / "runs"), "--json"]
    assert main(args) == 0
    record = json.loads(capsys.readouterr().out)["summary"]
    assert record["status"] == "skipped" and record["reason"].startswith("no search")


def test_help_says_what_no_compile_does(capsys: pytest.CaptureFixture[str]) -> None:
    from accelbench.cli.main import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["tune", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--no-compile leave out torch.compile" in text and "also try torch.compile" not in text


def test_the_report_says_no_search_and_not_separated_without_a_best() -> None:
    from accelbench.report.build import ReportInput, build
    from accelbench.report.markdown import render

    short = Fake({DEFAULT: 100.0}, seconds=40.0)
    none = summary(Tuner(tune_params(backends="torch,onnxruntime", budget="2m"), short, clock=short.clock).run())
    tied = Fake({DEFAULT: 100.0, ONNX: [200.0, 190.0, 210.0], OPENVINO: [205.0, 198.0, 192.0]})
    params = tune_params(backends="torch,onnxruntime,openvino", finalists=2)
    equivalent = summary(Tuner(params, tied, clock=tied.clock).run())
    for i, record in enumerate((none, equivalent)):
        record.run_id, record.system = f"r{i}", {"fingerprint": "f", "profile": {}}
    text = render(build(ReportInput(records=[none, equivalent], title="t")), lambda chart: f"{chart.name}.png")
    assert "no search: raise --budget" in text and "not separated: the top 2 are equivalent" in text
    assert "x the default settings" not in text and "): best " not in text


def test_a_default_confirmed_alone_is_no_best_when_others_screened_faster() -> None:
    """The README's real 4-minute search: 13 runtimes screened, OpenVINO bf16 at 5x the default, the budget left
    room to confirm only the default. 'best: the default' would be a claim the search never tested."""
    onnx, ov = INFER_DEFAULT | {"backend": "onnxruntime"}, INFER_DEFAULT | {"backend": "openvino", "streams": 2}
    rows = [("screen", c, v, True) for c, v in ((INFER_DEFAULT, 287.6), (onnx, 541.9), (ov, 1275.0))]
    rows += [("confirm", INFER_DEFAULT, v, True) for v in (243.4, 246.6, 256.0)]
    search = search_of(rows)
    search.elapsed = 206.0
    record = summary(search)
    assert record.status == "skipped" and record.details["outcome"] == "not confirmed" and stored(record) == []
    assert "2 candidate(s) screened better" in record.reason and "openvino fp32 bs 8 x2 in flight" in record.reason
    assert "raise --budget" in record.reason and "best:" not in outcome_text(record)
    # a lone confirmed candidate that nothing screened above is still the winner
    lone = [("screen", INFER_DEFAULT, 200.0, True), ("screen", onnx, 541.9, True), ("gate", onnx, 1.0, True)]
    alone = summary(search_of(lone + [("confirm", onnx, v, True) for v in (540.0, 545.0, 538.0)]))
    assert alone.details["outcome"] == "winner"
    # the default confirmed alone is no winner: nothing was confirmed better than it, nothing was beaten either
    default = summary(search_of([("screen", INFER_DEFAULT, 287.6, True), ("screen", onnx, 200.0, True)] + rows[3:]))
    assert default.details["outcome"] == "no better" and "1 screened only" in (default.reason or "")


def test_a_small_budget_still_gates_and_confirms_the_best_screened() -> None:
    """The README's 4-minute search screened 14 runtimes, then found no room for a gate (slower than its
    estimate) and confirmed only the default. Now the first gate is expected to cost a few screenings, screening
    stops in time, and the best screened is gated and confirmed against the default."""
    fake = Fake({DEFAULT: 100.0, ONNX: 200.0, OPENVINO: 300.0}, seconds={"screen": 9.0, "gate": 30.0, "confirm": 12.0})
    params = tune_params(backends="torch,onnxruntime,int8,openvino", precisions="fp32,int8,bf16", budget="4m")
    search = Tuner(replace(params, emulated=True), fake, clock=fake.clock).run()
    gates = [key for phase, key, *_ in fake.log if phase == "gate"]
    assert gates[:1] == [OPENVINO], fake.log  # the best screened is gated first
    confirmed = {key for phase, key, *_ in fake.log if phase == "confirm"}
    assert {OPENVINO, DEFAULT} <= confirmed, fake.log
    assert summary(search).details["outcome"] == "winner", search.stopped
    assert fake.now <= 240


def test_compiled_screenings_are_expected_to_take_longer() -> None:
    """The README's real 4-minute search again: its compiled screenings took twice an eager one, the last one
    overran screening's end, and the gate the claim needed no longer fitted. A compiled screening is now
    expected to take twice an eager one until one has been timed."""
    seconds = {"screen": 9.0, "compile": 16.0, "gate": 29.0, "confirm": 15.0}
    fake = Fake({DEFAULT: 100.0, ONNX: 200.0, OPENVINO: 300.0}, seconds=seconds)
    backends, precisions = "torch,onnxruntime,int8,openvino,compile", "fp32,bf16,int8"
    params = tune_params(backends=backends, precisions=precisions, budget="4m", compile=True)
    search = Tuner(replace(params, emulated=True), fake, clock=fake.clock).run()
    assert [key for phase, key, *_ in fake.log if phase == "gate"][:1] == [OPENVINO], fake.log
    assert summary(search).details["outcome"] == "winner", search.stopped


def test_a_best_with_no_runner_up_says_the_others_were_only_screened():
    """A best confirmed alone (the budget cut the round) is the best of what was screened, not separated from the
    candidates that only had their screen: the verdict says how many, so "best" is not read as beating them."""
    from types import SimpleNamespace

    from accelbench.tune.outcome import _alone

    def row(status: str) -> SimpleNamespace:
        return SimpleNamespace(status=status)

    assert _alone([row("winner")]) == "the only candidate confirmed VALID (and through the gate) in its round"
    said = _alone([row("winner"), row("screened"), row("screened"), row("invalid")])
    assert said.endswith("; 2 other candidate(s) screened lower and were never confirmed, so it is best of what was "
                         "screened, not separated from them")  # fmt: skip


def test_a_cut_confirmation_round_keeps_as_many_candidates_as_it_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """Room for 3 of 4 candidates: the best, the default and the next one are kept (the best and the default
    are kept first, each once), and the line says 3 of 4."""
    from accelbench.tune.search import Tuner

    tuner = Tuner(tune_params(), lambda *a, **k: None, clock=lambda: 0.0)  # type: ignore[arg-type,return-value]
    default = tuner.search.default
    best, third, fourth = (default.with_(batch_size=b) for b in (64, 32, 16))
    monkeypatch.setattr(tuner, "_expected", lambda phase: 10.0)
    monkeypatch.setattr(tuner, "_runs_needed", lambda: 1)
    monkeypatch.setattr(tuner.time, "left", lambda: 35.0)
    kept = tuner._fit_round([best, default, third, fourth], 2)
    assert [c.key for c in kept] == [best.key, default.key, third.key]
    assert tuner.search.stopped[-1].startswith("confirmation round 2 holds 3 of 4 candidates")


# -- a new user's review: the round's pair, nothing better than the default, the headline, the command ---------


def test_a_round_whose_first_confirmation_ran_long_still_confirms_the_default_beside_the_best() -> None:
    """A confirmation far longer than its first estimate (80 s where a screening took 10): round 1 was planned to
    hold two of three candidates, then ran the best alone and stopped, a round that compares nothing. The best and
    the default run first in a round, and the second of them runs while any budget is left."""
    figures = {DEFAULT: [100.0, 104.0, 98.0], ONNX: [200.0, 190.0, 210.0], OPENVINO: [300.0, 310.0, 290.0]}
    fake = Fake(figures, seconds={"screen": 10.0, "gate": 10.0, "confirm": 80.0})
    params = tune_params(backends="torch,onnxruntime,openvino", finalists=2, batch_sizes="8", budget="200s")
    search = Tuner(params, fake, clock=fake.clock).run()
    assert "confirmation round 1 holds 2 of 3 candidates" in " ".join(search.stopped)
    assert [key for phase, key, *_ in fake.log if phase == "confirm"] == [OPENVINO, DEFAULT], fake.log
    assert all(start < 200 for _, _, start, _, _ in fake.log) and fake.now <= 200 + 80  # within one trial


def test_the_second_of_a_confirmation_pair_is_given_the_time_a_confirmation_takes() -> None:
    """The default's confirmation may start with seconds of the budget left; killed at the timeout floor (60 s)
    it would read as the default's failure and withhold the speed-up. It is given what a confirmation takes
    (PAIR_TIMEOUT_SHARE of the expected), and the search overruns by one confirmation at most."""
    from accelbench.tune.search import PAIR_TIMEOUT_SHARE

    figures = {DEFAULT: [100.0, 104.0, 98.0], ONNX: [200.0, 190.0, 210.0], OPENVINO: [300.0, 310.0, 290.0]}
    fake = Fake(figures, seconds={"screen": 10.0, "gate": 10.0, "confirm": 80.0})
    params = tune_params(backends="torch,onnxruntime,openvino", finalists=2, batch_sizes="8", budget="200s")
    Tuner(params, fake, clock=fake.clock).run()
    confirms = [(key, start, timeout) for phase, key, start, _, timeout in fake.log if phase == "confirm"]
    assert [key for key, _, _ in confirms] == [OPENVINO, DEFAULT]
    (_, _, first), (_, start, second) = confirms
    assert start >= 200 - 60 and second is not None and second >= 80.0  # 60 s left, still given a whole one
    assert second <= PAIR_TIMEOUT_SHARE * 80.0 + 1e-9 or second == first


def test_a_cut_round_runs_the_best_and_the_default_first() -> None:
    """The candidates a cut round keeps run in the order kept: the best and the default first."""
    tuner = Tuner(tune_params(), lambda *a, **k: None, clock=lambda: 0.0)  # type: ignore[arg-type,return-value]
    default = tuner.search.default
    best, third = default.with_(batch_size=64), default.with_(batch_size=32)
    assert [c.key for c in tuner._fit_round([best, third, default], 1)] == [best.key, default.key, third.key]


def _default_alone_rows() -> list[tuple[str, dict[str, Any], float | None, bool]]:
    """Two runtimes screened faster than the default, both failing the accuracy gate; the default confirmed as the
    baseline of a speed-up that no finalist was left to claim."""
    onnx, ov = INFER_DEFAULT | {"backend": "onnxruntime"}, INFER_DEFAULT | {"backend": "openvino", "streams": 2}
    rows = [("screen", c, v, True) for c, v in ((INFER_DEFAULT, 100.0), (onnx, 200.0), (ov, 300.0))]
    rows += [("gate", ov, 0.5, False), ("gate", onnx, 0.5, False)]
    return rows + [("confirm", INFER_DEFAULT, v, True) for v in (99.0, 101.0, 100.0)]


def test_a_default_confirmed_alone_is_no_winner_nothing_was_confirmed_better() -> None:
    record = summary(search_of(_default_alone_rows()))
    assert record.details["outcome"] == "no better" and record.status == "skipped" and stored(record) == []
    assert record.reason is not None
    assert record.reason.startswith("no setting was confirmed better than the default settings (torch fp32 bs 8)")
    assert "2 failed the accuracy gate (openvino fp32 bs 8 x2 in flight, onnxruntime fp32 bs 8)" in record.reason
    assert "winner" not in record.details and "reproduce" not in record.details
    rows = ranking(search_of(_default_alone_rows()))
    assert not any(r.status == "winner" for r in rows)
    assert next(r for r in rows if r.candidate.settings == INFER_DEFAULT).status == "confirmed"
    text = outcome_text(record)
    assert text.splitlines()[0] == f"[yellow]{record.reason}[/]" and "best" not in text


def test_the_command_exits_0_when_nothing_beat_the_default() -> None:
    from accelbench.tune.outcome import NO_CLAIM

    assert "no better" in NO_CLAIM  # cmd_tune's exit: a search that found nothing better is no failure


def test_the_headline_says_what_won_by_how_much_and_on_what_evidence_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from accelbench.cli.commands_tune import _print_outcome

    fake = Fake({DEFAULT: [100.0, 104.0, 98.0], ONNX: [200.0, 190.0, 210.0]})
    search = Tuner(tune_params(backends="torch,onnxruntime", finalists=1), fake, clock=fake.clock).run()
    record = summary(search)
    line = record.details["headline"]
    assert line == (
        "best: resnet18 onnxruntime fp32 bs 8, 2.00x the default settings (200.0 samples/s against 100.0; ranges of "
        "3 and 3 runs apart)"
    )
    assert outcome_text(record).splitlines()[0] == f"[bold green]{line}[/]"
    _print_outcome(record, search)
    printed = [x for x in capsys.readouterr().out.splitlines() if x.strip()]
    assert " ".join(printed[:3]).startswith("best: resnet18 onnxruntime fp32 bs 8, 2.00x the default")  # first
    assert sum(x.startswith("best:") for x in printed) == 1  # said once
    nothing = summary(search_of(_default_alone_rows()))
    assert nothing.details["headline"].startswith("no setting was confirmed better than the default")


def test_the_titles_name_the_figure_in_words_not_its_key(capsys: pytest.CaptureFixture[str]) -> None:
    from accelbench.cli.commands_tune import _print_outcome
    from accelbench.tune.outcome import metric_words

    assert metric_words("infer/llm", "tokens_per_second", "output tokens/s") == "output tokens/s"
    assert metric_words("infer/loadgen", "throughput", "samples/s") == "samples/s"
    assert metric_words("infer/loadgen", "latency_p90_seconds", "s") == "latency p90 (s)"
    assert metric_words("infer/llm", "tpot_p99_ms", "ms") == "TPOT p99 ms"  # the family's table's words
    fake = Fake({DEFAULT: [100.0, 104.0, 98.0], ONNX: [200.0, 190.0, 210.0]})
    search = Tuner(tune_params(backends="torch,onnxruntime", finalists=1), fake, clock=fake.clock).run()
    record = summary(search)
    assert record.details["figure_words"] == "samples/s"
    _print_outcome(record, search)
    out = capsys.readouterr().out
    assert "ranked by samples/s" in out and "throughput" not in out


@pytest.mark.parametrize(
    "values, length",
    [
        ({"backends": "torch,onnxruntime"}, ["--duration", "6.0"]),
        ({"backends": "torch,onnxruntime", "scenario": "server"}, ["--mode", "find-peak", "--duration", "2.0"]),
        ({"task": "train", "batch_sizes": "16"}, ["--warmup", "3", "--num-batches", "18", "--display-every", "2"]),
    ],
)
def test_the_reproduced_command_runs_the_confirmation_s_length(values: dict[str, Any], length: list[str]) -> None:
    """The printed command gives the figure the search ranked: a confirmation's settings and length, never the
    benchmark's own default length in silence (infer's is 2 s, shorter than a 6 s confirmation)."""
    import shlex

    from accelbench.tune.outcome import reproduce

    search = Search(tune_params(**values))
    words = shlex.split(reproduce(search, search.default.with_(batch_size=16)))
    flags = " ".join(words)
    assert all(f"{f} {v}" in flags for f, v in zip(length[::2], length[1::2], strict=True)), flags
    assert "--batch-size 16" in flags
    assert flags.endswith(" ".join(length[-2:]))  # the length after the settings: what a longer run drops
    trial = search.task.trial_of("confirm", dict(search.default.with_(batch_size=16).settings)).to_dict()
    for flag, value in zip(length[::2], length[1::2], strict=True):
        assert str(trial[flag[2:].replace("-", "_")]) == value  # the trial's own length, not another


def test_the_first_confirmation_is_expected_to_take_what_a_real_one_takes() -> None:
    """A LoadGen confirmation measured for real takes more than a screening plus its 4 s more of LoadGen: the
    probe's rate overestimates a longer run's and LoadGen issues the samples for it. docs/tune.md's 4-minute search
    (a 2-core Zen 5): screenings of 7.4 s and 5.2 s, confirmations of the same candidates 16.4 s and 12.1 s; a small
    real search on a shared 2-core host (tiny ResNet-18, torch and onnxruntime): screenings' median 13.6 s, the
    confirmations' 20.2 s. The estimate before the first confirmation must cover them, or a round planned to fit
    runs past the budget (a screening and 6 s: 13.4 s, 11.2 s, 19.6 s)."""
    from accelbench.tune.budget import Budget

    search = Search(tune_params(backends="torch,onnxruntime"))
    first = search.task.first_expected("confirm", lambda: None)
    for screen, confirm in ((7.4, 16.4), (5.2, 12.1), (13.6, 20.2)):
        trials = [Trial("screen", search.default, None, screen)]
        expected = Budget(600.0, lambda: 0.0, 0.0).expected("confirm", trials, first)
        assert expected is not None and confirm <= expected <= 1.5 * confirm, (screen, confirm, expected)


def test_a_default_that_screened_best_is_confirmed_beside_the_next_finalist() -> None:
    """--finalists counts candidates besides the default, which is confirmed in any case: a default that screened
    best used to fill the one finalist's place and be confirmed alone, each round comparing nothing."""
    fake = Fake({DEFAULT: [300.0, 310.0, 305.0], ONNX: [200.0, 190.0, 210.0]})
    params = tune_params(backends="torch,onnxruntime", finalists=1, batch_sizes="8")
    record = summary(Tuner(params, fake, clock=fake.clock).run())
    assert fake.confirms(DEFAULT) == fake.confirms(ONNX) == 3, fake.log
    assert record.details["outcome"] == "winner" and record.details["winner"] == INFER_DEFAULT
    assert record.details["headline"].startswith("the default settings are the best: resnet18 torch fp32 bs 8")
