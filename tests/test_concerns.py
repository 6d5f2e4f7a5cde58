"""Typed concerns: a record's warnings carry a kind that code decides by, the words being for the reader only.

A real run's record carries them (a GEMM measured on too few samples for an interval), an older record without
them gets them from its words once, on reading (tests/data holds real runs of schema v2), and every consumer (the
judge's set-aside policy, the reference rows, the rerun plan) asks for a kind, never for how the words begin.
"""

from __future__ import annotations

import json
from pathlib import Path

from accelbench.kit.metrics import concerns_of
from accelbench.loadgen import replan
from accelbench.measure.conditions import Conditions
from accelbench.measure.stats import MIN_CI_SAMPLES, Measurement
from accelbench.results import judge
from accelbench.results.record import KINDS, SCHEMA_VERSION, Concern, Metric, Result, schema_errors
from accelbench.results.upgrade import concerns_from_warnings, upgrade

DATA = Path(__file__).parent / "data"
CONTENDED = "contended: other processes used 50% of the CPUs (python[23533] 50%)"


def _fixture(name: str) -> list[dict]:
    return json.loads((DATA / name).read_text())["records"]


def test_a_real_run_carries_typed_concerns_and_its_words(tmp_path: Path, store, profile) -> None:
    """kernels/gemm run in its own process as the runner runs it, on 3 samples: the record says 'few samples' as
    before, and carries it typed, with the figures behind it, through the store and back."""
    from accelbench.suite.runner import RunOptions, run_suite
    from accelbench.suite.suites import Suite, make_entry

    params = {"m": 64, "n": 64, "k": 64, "device": "cpu", "threads": 1, "min_reps": 3, "min_time": 0.0}
    suite = Suite("t", [make_entry("kernels/gemm", params)])
    [r] = run_suite(suite, store, RunOptions(out_dir=tmp_path), profile=profile).results
    assert r.status == "ok", r.error
    [few] = r.of_kind("few-samples")
    assert few.text.startswith("few samples: 3, too few for a 95% interval")
    assert few.data == {"n": 3, "needed": MIN_CI_SAMPLES}
    assert r.warnings == [c.text for c in r.concerns] and all(c.kind in KINDS for c in r.concerns)
    d = r.to_dict()
    assert schema_errors(d) == [] and d["concerns"][0] == {"kind": "few-samples", "text": few.text, "data": few.data}
    [back] = store.query()
    assert back.concerns == r.concerns and back.concerns[0].data == few.data
    assert few.text in judge.concerns(back, "tflops")  # set aside by its kind, in its words (this machine may be busy)


def test_an_older_record_reads_with_its_concerns_derived_from_its_words() -> None:
    """Real v2 records (no concerns): the contended GEMM and its conditions are typed on reading; a quiet one has
    none; the quick profile's LoadGen run is non-compliant. The words stay exactly as stored."""
    records = {r["tags"]["run"]: r for r in _fixture("gemm_quiet_contended.json")}
    assert all(r["schema_version"] == 2 and "concerns" not in r for r in records.values())
    busy = Result.from_dict(records["contended"])
    assert busy.concerns == [Concern("contended", CONTENDED)] and busy.warnings == [CONTENDED]
    assert busy.conditions["concerns"] == [{"kind": "contended", "text": CONTENDED, "data": {}}]
    assert busy.has("contended") and not busy.has("noisy")
    assert Result.from_dict(records["quiet1"]).concerns == []
    served = [Result.from_dict(r) for r in _fixture("report_store.json") if r["benchmark"] == "infer/loadgen"]
    assert served and all(r.has("non-compliant") for r in served if r.params.get("mode") == "performance")
    for r in served:
        assert [c.text for c in r.concerns] == r.warnings
    # the upgrade leaves a record that has concerns alone (their figures are the producer's, not the words')
    typed = busy.to_dict() | {"concerns": [{"kind": "contended", "text": CONTENDED, "data": {"share": 0.5}}]}
    assert upgrade(typed, SCHEMA_VERSION)["concerns"][0]["data"] == {"share": 0.5}
    assert schema_errors(upgrade(records["contended"], SCHEMA_VERSION)) == []


def test_the_prose_of_every_kind_an_older_version_wrote_reads_as_its_kind() -> None:
    said = {
        "INVALID: min duration not met: LoadGen ran out of planned queries": "invalid",
        CONTENDED: "contended",
        "contended: the hypervisor stole 12% of CPU time": "contended",
        "client-limited: the client's CPU; the figures describe the client": "client-limited",
        "recompiled: 2 graph(s) compiled inside the measured windows": "recompiled",
        "noisy: the middle half of the 40 samples spans 20% of the median (> 10%)": "noisy",
        "few samples: 3, too few for a 95% interval (at least 6); measure longer": "few-samples",
        "min-reps not met: 4 of 10 samples before --max-time 1 s; raise --max-time": "min-reps",
        "GPU throttled: the power limit held the clocks down 30% of the time": "throttled",
        "GPU throttled at the end of the measurement: thermal": "throttled",
        "non-compliant: the quick profile is shorter than MLPerf's rules": "non-compliant",
        "rerun: the first run disagreed with its plan (x); reported: run 2": "rerun",
        "over the latency bound: the 99th-percentile query latency is 30 ms": "over-bound",
        "uninformative: random weights; serve real weights": "uninformative",
        "no verdict: the server's weights have no FP32 run here to set the bar": "no-verdict",
        "stopped early: interrupted": "stopped-early",
        "cache-resident: each array (1M) is under 4x the 32 MiB last-level cache": "cache-resident",
        "CUDA graph capture failed: operation not permitted": "graph-failed",
        "1 run did not reach the target; it was dropped as the slowest": "not-converged",
        "something a later version says": "other",
    }
    derived = concerns_from_warnings(list(said))
    assert [c["kind"] for c in derived] == list(said.values()) and [c["text"] for c in derived] == list(said)
    assert set(said.values()) <= set(KINDS)


def test_the_judge_sets_aside_by_kind_not_by_the_words() -> None:
    """Words that begin like a set-aside reason decide nothing; a kind does, whatever its words say."""
    metric = Metric(value=1.0, unit="TFLOPS", higher_is_better=True, ci95=(0.9, 1.1), n=20)
    fresh = lambda: Result("kernels/gemm", {"m": 8}, metrics={"tflops": metric}, primary_metric="tflops")  # noqa: E731
    worded = fresh()
    worded.concern("other", "contended: words a producer wrote without naming the kind")
    assert judge.unfit(worded, "tflops") is None
    busy = fresh()
    busy.concern("contended", "a neighbour took half the CPUs", share=0.5)
    assert judge.concerns(busy, "tflops") == ["a neighbour took half the CPUs"]
    assert [c.kind for c in judge.set_aside_by(busy, "tflops")] == ["contended"]
    noisy = fresh()
    noisy.concern("noisy", "noisy: the middle half spans 20%")
    assert judge.unfit(noisy, "tflops") and judge.unfit(noisy, "tflops", imprecise=False) is None
    assert set(judge.SET_ASIDE) <= set(KINDS) and "few-samples" in judge.IMPRECISE
    # the conditions' own concerns count where the record did not copy them
    seen = fresh()
    seen.conditions = {"warnings": [CONTENDED], "concerns": [{"kind": "contended", "text": CONTENDED, "data": {}}]}
    assert judge.concerns(seen, "tflops") == [CONTENDED]


def test_the_conditions_and_the_measurement_give_kinds_with_their_figures() -> None:
    """The monitor's concerns (serialised: measure/ stands below results/) reach the record typed, after the
    measurement's own; a rerun's plan reads contention by kind."""
    c = Conditions(threads=2, cpu_count=2)
    c.flag("contended", CONTENDED, first=True, share=0.5)
    c.flag("throttled", "GPU throttled: the power limit held the clocks down 30% of the time", limit="power", share=0.3)
    conditions = c.to_dict()
    assert conditions["warnings"] == [x["text"] for x in conditions["concerns"]]
    m = Measurement((1.0, 1.1, 1.2))
    got = concerns_of(m, conditions)
    assert [x.kind for x in got] == ["few-samples", "contended", "throttled"]
    assert got[1].data == {"share": 0.5} and got[2].data == {"limit": "power", "share": 0.3}
    assert [x["text"] for x in replan.contention(conditions)] == [CONTENDED]
    assert replan.rerun(replan.Disagreement(replan.Probe(1.0, 1.0), "x"), replan.Probe(1.0, 1.0),
                        replan.Probe(1.0, 1.0), "logs", conditions)["contended"] == CONTENDED  # fmt: skip
    # words with no kind are kept, as "other", and decide nothing
    assert [x.kind for x in concerns_of(None, {"warnings": [CONTENDED]})] == ["other"]


def test_the_schema_takes_concerns_and_refuses_a_malformed_one() -> None:
    r = Result.from_dict(_fixture("gemm_quiet_contended.json")[2])
    d = r.to_dict()
    assert d["schema_version"] == SCHEMA_VERSION and schema_errors(d) == []
    assert schema_errors({k: v for k, v in d.items() if k != "concerns"}) == []  # optional
    bad = d | {"concerns": [{"text": "no kind"}]}
    assert any("kind" in e for e in schema_errors(bad))
    assert schema_errors(d | {"concerns": [{"kind": "Contended!", "text": "x"}]})
