"""One judge: every verdict (compare, history, the device-scaling table, a search's confirmations) follows the one
significance level, and every set-aside (reference rows included) follows the one policy, both in
``accelbench.results.judge``. Records are real runs (tests/data) or built from their raw samples the way each
family builds its record (a Measurement of the seconds, the figure derived from them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from accelbench.kit.metrics import concerns_of, rate, seconds
from accelbench.measure.stats import Measurement
from accelbench.params import build_params
from accelbench.reference.match import beside, matches
from accelbench.results import judge
from accelbench.results.compare import compare
from accelbench.results.history import histories
from accelbench.results.record import Concern, Result
from accelbench.results.scaling import scaling_rows
from accelbench.tune.candidate import Candidate
from accelbench.tune.space import TRAIN_DEFAULT
from accelbench.tune.specs import TuneParams
from accelbench.tune.trials import Search, Trial
from accelbench.tune.verdict import apart, decide

DATA = Path(__file__).parent / "data"
FLOPS = 2 * 1024**3  # the recorded GEMM: 1024x1024x1024


def _gemm_runs() -> dict[str, Result]:
    """Real runs of one GEMM on one machine (two quiet, one contended; see the fixture's 'about')."""
    doc = json.loads((DATA / "gemm_quiet_contended.json").read_text())
    return {r["tags"]["run"]: Result.from_dict(r) for r in doc["records"]}


def _ncf_runs() -> list[Result]:
    """Real train/throughput runs of ncf on one machine: two on one device, one on two (noisy, as measured)."""
    doc = json.loads((DATA / "report_store.json").read_text())
    runs = [Result.from_dict(r) for r in doc["records"]]
    return [r for r in runs if r.benchmark == "train/throughput" and r.params.get("model") == "ncf"]


def gemm_like(real: Result, run_id: str, factor: float, day: int, warnings: tuple[tuple[str, str], ...] = ()) -> Result:
    """``real``'s run with every call ``factor`` times as long, recorded as kernels/gemm records it; ``warnings``
    are (kind, words) the conditions monitor saw."""
    m = Measurement(tuple(s * factor for s in real.samples))
    seen = {
        "warnings": [text for _, text in warnings],
        "concerns": [{"kind": kind, "text": text, "data": {}} for kind, text in warnings],
        "contended": bool(warnings),
    }
    return Result(
        benchmark="kernels/gemm",
        params=dict(real.params),
        metrics={"tflops": rate(FLOPS, m, "TFLOPS", 1e12), "seconds": seconds(m)},
        primary_metric="tflops",
        concerns=concerns_of(m, seen),
        conditions=seen,
        samples=list(m.samples),
        run_id=run_id,
        started_at=f"2026-11-{day:02d}T00:00:00.000+00:00",
        system=dict(real.system),
    )


def train_like(
    real: Result, nproc: int, factor: float, run_id: str = "t", windows: list[float] | None = None
) -> Result:
    """``real``'s training windows (or ``windows``), each ``factor`` times as long, on ``nproc`` devices at the same
    batch per device, recorded as train/throughput records them (the global batch's samples per median window)."""
    m = Measurement(tuple(s * factor for s in (windows or real.samples)))
    batch = int(real.params["batch_size"]) * nproc
    return Result(
        benchmark="train/throughput",
        params=dict(real.params) | {"nproc": nproc, "global_batch_size": batch},
        metrics={"throughput": rate(batch, m, real.metrics["throughput"].unit)},
        primary_metric="throughput",
        concerns=concerns_of(m, {}),
        samples=list(m.samples),
        run_id=run_id,
        started_at=real.started_at,
        system=dict(real.system),
    )


def around(p: float | None) -> tuple[float, float]:
    """A level just under ``p`` (the same evidence no longer tells the sides apart) and one just over it."""
    assert p is not None and 0 < p < 0.5
    return p / 2, p * 2


# -- the one significance level -----------------------------------------------------------------------------


def test_compare_follows_the_one_alpha(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = _gemm_runs()
    base, cand = runs["quiet1"], gemm_like(runs["quiet2"], "fast", 0.5, 24)  # every call half as long
    [row] = compare([base], [cand]).rows
    assert row.verdict == "faster" and row.judgement.evidence.startswith("Mann-Whitney")
    under, over = around(row.judgement.p_value)
    monkeypatch.setattr(judge, "ALPHA", under)
    [row] = compare([base], [cand]).rows
    assert row.verdict == "no difference" and row.judged
    monkeypatch.setattr(judge, "ALPHA", over)
    assert compare([base], [cand]).rows[0].verdict == "faster"


def test_history_follows_the_one_alpha(monkeypatch: pytest.MonkeyPatch) -> None:
    """Four real training runs, then one whose every window is 10% longer: a regression, as long as the rank test
    on the windows clears the one level."""
    a, b = (r for r in _ncf_runs() if r.params["nproc"] == 1)
    earlier = [train_like(r, 1, 1.0, f"r{i}") for i, r in enumerate((a, b, a, b))]
    slow = train_like(a, 1, 1.1, "slow")
    for day, r in enumerate((*earlier, slow), 1):
        r.started_at = f"2026-11-{day:02d}T00:00:00.000+00:00"
    [s] = histories([*earlier, slow])
    assert [(c.index, c.kind) for c in s.changes] == [(4, "regression")]
    test = judge.significance(earlier, [slow], "throughput")
    assert test.basis == "samples"
    under, over = around(test.p_value)
    monkeypatch.setattr(judge, "ALPHA", under)
    [s] = histories([*earlier, slow])
    assert s.changes == [] and s.unstable is None
    monkeypatch.setattr(judge, "ALPHA", over)
    assert [c.kind for c in histories([*earlier, slow])[0].changes] == ["regression"]


def test_the_scaling_table_follows_the_one_alpha(monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = (r for r in _ncf_runs() if r.params["nproc"] == 1)
    # the two real runs' windows as one run of 12 (six a side could never reach the level: 0.0022 at best)
    one = train_like(first, 1, 1.0, "one", first.samples + second.samples)
    two = train_like(first, 2, 1.9, "two", first.samples + second.samples)  # 1.05x: close to the noise
    test = judge.significance([one], [two], "throughput")
    assert test.basis == "samples"
    under, over = around(test.p_value)
    monkeypatch.setattr(judge, "ALPHA", under)
    [_, row] = scaling_rows([one, two])
    assert row.speedup == pytest.approx(2 / 1.9, rel=0.05) and row.note.startswith("within noise: Mann-Whitney p=")
    monkeypatch.setattr(judge, "ALPHA", over)
    [_, row] = scaling_rows([one, two])
    assert row.note == ""


def _search(figures: dict[Candidate, list[Result]]) -> Search:
    params = build_params(TuneParams, {"model": "ncf", "task": "train", "scale": "tiny", "budget": "10m"}, "tune")
    search = Search(params)
    for c, results in figures.items():
        search.trials.append(Trial("screen", c, results[0], 1.0))
    for i in range(2):  # interleaved rounds, as the search confirms
        for c, results in figures.items():
            search.trials.append(Trial("confirm", c, results[i], 1.0))
    return search


def test_a_search_s_confirmations_follow_the_one_alpha(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two confirmations each of the default and of a candidate whose windows are 4% shorter: the verdict that
    names a winner (and its speed-up) is the judge's, at the judge's level."""
    real = [r for r in _ncf_runs() if r.params["nproc"] == 1]
    default = Candidate(dict(TRAIN_DEFAULT))
    other = Candidate(dict(TRAIN_DEFAULT) | {"channels_last": True})
    search = _search({default: real, other: [train_like(r, 1, 0.96, f"c{i}") for i, r in enumerate(real)]})
    p = judge.significance(real, [t.result for t in search.of(other, "confirm")], "throughput").p_value  # type: ignore[misc]
    under, over = around(p)
    monkeypatch.setattr(judge, "ALPHA", under)
    verdict = apart(search, other, default)
    assert not verdict.separated and verdict.evidence.startswith("Mann-Whitney p = ")
    assert "of 2 and 2 runs" in verdict.evidence and [c.key for c in decide(search).open] == [default.key]
    monkeypatch.setattr(judge, "ALPHA", over)
    assert apart(search, other, default).separated and decide(search).open == []


# -- the one set-aside policy -------------------------------------------------------------------------------


def test_every_verdict_and_the_reference_rows_follow_the_one_set_aside_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A warning the policy does not name is judged everywhere; once the policy names it, every caller sets the
    record aside, reference rows included (which ask only for an unbiased figure)."""
    runs = _gemm_runs()
    warned = "throttled: the clocks fell to 60% of base"
    base = [gemm_like(runs["quiet1"], f"r{i}", 1.0, i + 1) for i in range(3)]
    odd = gemm_like(runs["quiet2"], "odd", 0.5, 5, warnings=(("throttled", warned),))
    ncf = next(r for r in _ncf_runs() if r.params["nproc"] == 1)
    ncf.set_concerns([Concern("throttled", warned)])
    # the same windows as a full-size resnet50's training record, to meet the published rows of its task
    resnet = train_like(ncf, 1, 1.0)
    resnet.params |= {"model": "resnet50", "scale": "full", "batch_size": 32, "global_batch_size": 32}
    resnet.set_concerns([Concern("throttled", warned)])
    [ref, *_] = [m.reference for m in matches(resnet) if m.like]
    two = train_like(ncf, 2, 1.0)

    def verdicts() -> tuple[bool, bool, bool, bool]:
        [row] = compare([base[0]], [odd]).rows
        [s] = histories([*base, odd])
        [_, scaled] = scaling_rows([ncf, two])
        match = beside(resnet, ref)
        assert match is not None
        return row.judged, s.points[-1].set_aside == (), scaled.speedup is not None, match.like

    assert judge.unfit(odd, "tflops") is None and verdicts() == (True, True, True, True)
    monkeypatch.setattr(judge, "BIASED", (*judge.BIASED, "throttled"))
    assert judge.unfit(odd, "tflops") == warned
    assert verdicts() == (False, False, False, False)
    assert beside(resnet, ref).unlike == ("throttled run",)  # type: ignore[union-attr]


def test_a_reference_row_sets_aside_a_biased_figure_not_an_imprecise_one() -> None:
    """A ratio to a published figure tests nothing, so a noisy record still has one; a contended one has none."""
    ncf = next(r for r in _ncf_runs() if r.params["nproc"] == 2)  # noisy, as measured
    assert judge.unfit(ncf, "throughput", imprecise=False) is None and judge.unfit(ncf, "throughput")
    ncf.concern("contended", "contended: other processes used 50% of the CPUs")
    assert judge.unfit(ncf, imprecise=False) == "contended: other processes used 50% of the CPUs"


# -- the device-scaling table -------------------------------------------------------------------------------


def test_a_device_scaling_table_renders_with_clean_intervals_and_real_samples() -> None:
    """The scaling table of real ncf runs: one device against two (clean intervals, each a (low, high) pair as
    records hold it, with and without the raw samples behind them), and the measured noisy two-device run
    withheld with its reason."""
    from accelbench.cli.render_trends import scaling_table

    one, noisy = (next(r for r in _ncf_runs() if r.params["nproc"] == n) for n in (1, 2))
    two = train_like(one, 2, 1.05, "two")
    assert all(isinstance(r.metrics["throughput"].ci95, tuple) for r in (one, two))
    [_, row] = scaling_rows([one, two])
    assert row.speedup == pytest.approx(2 / 1.05, rel=0.05) and row.efficiency == pytest.approx(row.speedup / 2)
    assert row.note == ""  # told apart on the raw samples
    bare = [Result.from_dict(r.to_dict() | {"samples": []}) for r in (one, train_like(one, 2, 1.95, "close"))]
    [_, close] = scaling_rows(bare)
    assert close.note == "within noise: the 95% intervals overlap"  # no samples: the intervals decide
    [_, withheld] = scaling_rows([one, noisy])
    assert withheld.speedup is None and withheld.note == "not computed: noisy at 2 devices"
    console = Console(width=200, record=True)
    for rows in (scaling_rows([one, two]), scaling_rows(bare), scaling_rows([one, noisy])):
        console.print(scaling_table(rows))
    text = console.export_text()
    assert "1.90x" in text and "95%" in text and "within noise: the 95% intervals overlap" in text
    assert "not computed: noisy at 2 devices" in text
