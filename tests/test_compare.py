import pytest
from helpers import make_result

from accelbench.errors import UsageError
from accelbench.results.compare import compare, geometric_mean, nearest_difference, workload_key
from accelbench.results.store import select


def test_verdicts_follow_the_confidence_intervals():
    base = [make_result(value=1.0, ci=(0.95, 1.05))]
    faster = compare(base, [make_result(run_id="b", value=2.0, ci=(1.9, 2.1))]).rows
    assert faster[0].ratio == pytest.approx(2.0) and faster[0].verdict == "faster"
    slower = compare(base, [make_result(run_id="b", value=0.5, ci=(0.45, 0.55))]).rows
    assert slower[0].verdict == "slower" and slower[0].speedup == pytest.approx(0.5)
    noisy = compare(base, [make_result(run_id="b", value=1.3, ci=(0.9, 1.7))]).rows
    assert noisy[0].verdict == "no difference"  # 1.3x, but the intervals overlap
    # without intervals a ratio is not a verdict: the same configuration minutes apart read "1.11x faster"
    no_ci = compare([make_result(value=1.0, ci=None)], [make_result(run_id="b", value=1.11, ci=None)]).rows
    assert no_ci[0].verdict == "not judged: baseline no interval and candidate no interval"


def test_an_invalid_side_is_shown_and_not_judged():
    base = make_result(value=1.0)
    bad = make_result(run_id="b", value=3.0, ci=(2.9, 3.1))
    bad.valid = False
    [row] = compare([base], [bad]).rows
    assert row.verdict == "not judged: candidate INVALID" and row.candidate_valid is False


def test_unpaired_repeated_and_unknown_metrics_are_said():
    a = make_result(params={"m": 8, "precision": "fp32"})
    a2 = make_result(params={"m": 8, "precision": "fp32"}, started_at="2026-03-01T00:00:00.000+00:00")
    only_a = make_result(params={"m": 16, "precision": "fp32"})
    b = make_result(run_id="b", params={"m": 8, "precision": "fp32"})
    only_b = make_result(run_id="b", params={"m": 32, "precision": "fp32"})
    c = compare([a, a2, only_a], [b, only_b])
    assert len(c.rows) == 1 and len(c.only_baseline) == 1 and len(c.only_candidate) == 1
    assert "m=16" in c.only_baseline[0] and "m=32" in c.only_candidate[0] and len(c.repeated) == 1
    with pytest.raises(UsageError, match="no result here has a metric 'latency'"):
        compare([a], [b], metric="latency")


def test_pairing_by_workload_and_ignore():
    fp32 = make_result(params={"m": 8, "precision": "fp32", "device": "cpu", "threads": 2})
    fp16 = make_result(run_id="b", value=3.0, params={"m": 8, "precision": "fp16", "device": "cuda:0", "threads": 8})
    assert compare([fp32], [fp16]).rows == []
    rows = compare([fp32], [fp16], ignore=["precision"]).rows
    assert len(rows) == 1 and rows[0].ratio == pytest.approx(3.0)


def test_seeds_and_validity_do_not_split_a_pair():
    """Two time-to-accuracy sets draw different random seeds; a VALID and an INVALID run are still one workload."""
    a = make_result(params={"workload": "digits", "seeds_used": [1, 2, 3], "seed": -1})
    b = make_result(run_id="b", value=2.0, params={"workload": "digits", "seeds_used": [7, 8, 9], "seed": -1})
    assert len(compare([a], [b]).rows) == 1


def test_repeats_on_a_side_are_pooled():
    old = make_result(value=1.0, started_at="2026-01-01T00:00:00.000+00:00")
    new = make_result(value=2.0, started_at="2026-02-01T00:00:00.000+00:00")
    c = compare([new, old], [make_result(run_id="b", value=2.0)])
    [row] = c.rows
    assert row.baseline.value == 1.5 and row.baseline_runs == 2 and len(c.repeated) == 1
    # one run of the baseline is twice the other: a 1.33x change is within what its runs vary by
    assert row.verdict == "no difference" and "run-to-run spread 100.0% over 2 runs" in row.judgement.evidence
    # judged, with a ratio in the geometric mean, but not told apart from noise: the summary counts it so
    assert c.geometric_mean() == pytest.approx(2.0 / 1.5) and len(c.judged) == 1 and c.separated == []


def test_selectors(store):
    store.add(make_result(run_id="20260101-a", tags={"gpu": "t4"}))
    store.add(make_result(run_id="20260102-b", tags={"gpu": "v100"}))
    assert len(select(store, "tag:gpu=t4")) == 1
    assert len(select(store, "20260102")) == 1
    with pytest.raises(UsageError, match="unknown run id"):
        select(store, "1999")
    with pytest.raises(UsageError, match="no results carry"):
        select(store, "tag:gpu=a100")
    with pytest.raises(UsageError, match="bad selector"):
        select(store, "tag:gpu")


def test_geometric_mean():
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert geometric_mean([]) is None


def test_scaling_of_a_lower_is_better_figure():
    from accelbench.results.record import Metric
    from accelbench.results.scaling import scaling_rows

    def tta(nproc: int, seconds: float, seeds: list[int]):
        r = make_result(params={"workload": "digits", "nproc": nproc, "seeds_used": seeds})
        r.metrics = {"time_to_target_seconds": Metric(value=seconds, unit="s", higher_is_better=False, n=3)}
        r.primary_metric = "time_to_target_seconds"
        return r

    rows = scaling_rows([tta(1, 8.0, [1, 2, 3]), tta(4, 2.5, [9, 10, 11])], metric="time_to_target_seconds")
    assert [(r.devices, r.speedup, r.efficiency) for r in rows] == [(1, 1.0, 1.0), (4, 3.2, 0.8)]


def test_scaling_gives_no_speedup_from_a_noisy_or_contended_point_and_says_overlap():
    """A noisy 2-device run gave "0.79x, 40%" beside a 1-device figure it could not be told from. Now: no
    speedup where either figure is set aside (the reason said), a fit later run of a count stands for it, and
    overlapping intervals are said to be within noise."""
    from accelbench.results.record import Metric
    from accelbench.results.scaling import scaling_rows

    def train(nproc: int, value: float, half: float, warn: tuple[str, str] | None = None, at: int = 1):
        r = make_result(params={"model": "llama3.1-8b", "nproc": nproc}, started_at=f"2026-01-0{at}T00:00:00.000+00:00")
        ci95 = (value - half, value + half)  # as records hold it: (low, high)
        r.metrics = {"throughput": Metric(value=value, unit="tokens/s", higher_is_better=True, ci95=ci95, n=20)}
        if warn:
            r.concern(*warn)
        return r

    one = train(1, 46600.0, 7270.0)
    noisy = train(2, 36900.0, 8630.0, ("noisy", "noisy: the 95% interval is 23.4% of the median"))
    rows = scaling_rows([one, noisy])
    assert [(r.devices, r.speedup, r.note) for r in rows] == [
        (1, 1.0, ""),
        (2, None, "not computed: noisy at 2 devices"),
    ]
    # a fit run of 2 devices stands for the count, whenever it ran; its interval overlaps the one-device figure's
    fit = train(2, 52000.0, 6000.0, at=2)
    for order in ([one, fit, noisy], [one, noisy, fit]):
        [_, two] = scaling_rows(order)
        assert two.speedup == pytest.approx(52000 / 46600) and two.note == "within noise: the 95% intervals overlap"
    busy = train(1, 46600.0, 100.0, ("contended", "contended: other processes used 50% of the CPUs"))
    [base, _] = scaling_rows([busy, fit])
    assert base.speedup is None and base.note == "not computed: contended at 1 device"
    [_, far] = scaling_rows([one, train(2, 90000.0, 1000.0)])
    assert far.speedup == pytest.approx(90000 / 46600) and far.note == ""


def test_a_record_on_both_sides_and_an_ignore_naming_nothing_are_refused():
    a = make_result(params={"m": 8, "precision": "fp32"})
    b = make_result(run_id="b", params={"m": 8, "precision": "fp16"})
    with pytest.raises(UsageError, match="the baseline and the candidate share 1 record"):
        compare([a], [a, b])
    with pytest.raises(UsageError, match="--ignore precison: no record here has a setting of that name; did you mean"):
        compare([a], [b], ignore=["precison"])
    assert len(compare([a], [b], ignore=["precision"]).rows) == 1


def test_another_scale_is_another_model_whatever_ignore_pairs():
    tiny = make_result(params={"model": "ncf", "scale": "tiny"}, ci=(0.95, 1.05))
    full = make_result(run_id="b", value=0.03, params={"model": "ncf", "scale": "full"}, ci=(0.02, 0.04))
    [row] = compare([tiny], [full], ignore=["scale"]).rows
    assert not row.judged and row.unlike == ("unlike models: scale tiny vs full",)


def test_a_side_whose_runs_were_all_set_aside_shows_their_median_as_it_says():
    runs = [
        make_result(value=v, started_at=f"2026-01-0{i + 1}T00:00:00.000+00:00") for i, v in enumerate((3.0, 1.0, 2.0))
    ]
    for r in runs:
        r.concern("contended", "contended: other processes used 40% of the CPUs")
    [row] = compare(runs, [make_result(run_id="b", value=2.0)]).rows
    # '2 (3 runs)': the median of the three, not the latest run's 2.0 by accident nor its 3.0
    assert not row.judged and row.baseline_runs == 3 and row.baseline.value == 2.0
    runs[2].metrics["tflops"].value = 5.0
    [row] = compare(runs, [make_result(run_id="b", value=2.0)]).rows
    assert row.baseline.value == 3.0


def test_a_noisy_result_names_the_option_its_own_command_measures_longer_with():
    from accelbench.cli.render import results_table

    gemm = make_result()
    gemm.concern("noisy", "noisy: the middle half of the 40 samples spans 20% of the median (> 10%)")
    train = make_result()
    train.benchmark = "train/throughput"
    train.set_concerns(gemm.concerns)
    caption = lambda rs: results_table(rs).caption  # noqa: E731
    assert caption([gemm]).endswith("noisy results: re-run on a quieter machine, or measure longer (--min-time)")
    assert "measure longer (--num-batches)" in caption([train])
    assert "measure longer (--min-time, --num-batches)" in caption([gemm, train])


def test_another_model_is_never_judged_even_when_ignore_pairs_it():
    r18 = make_result(params={"model": "resnet18", "scale": "full"}, ci=(0.95, 1.05))
    r50 = make_result(run_id="b", value=0.3, params={"model": "resnet50", "scale": "full"}, ci=(0.29, 0.31))
    [row] = compare([r18], [r50], ignore=["model"]).rows
    assert not row.judged and row.unlike == ("unlike models: model resnet18 vs resnet50",)


def _gemm_defaults(benchmark: str) -> dict:
    """A benchmark's defaults as the registry gives them: here a setting (``graph``) added after old records."""
    gemm = {"m": 64, "n": 64, "k": 64, "batch": 1, "precision": "fp32", "graph": False}
    return gemm if benchmark == "kernels/gemm" else {}


def test_an_older_record_missing_a_setting_is_paired_as_having_its_default():
    """The caller passes the defaults (the CLI: the registry's); without them a record reads as it was stored."""
    old = make_result(params={"m": 64, "n": 64, "k": 64, "batch": 1, "precision": "fp32"})
    new = make_result(
        run_id="b", value=2.0, params={"m": 64, "n": 64, "k": 64, "batch": 1, "precision": "fp32", "graph": False}
    )
    assert compare([old], [new]).rows == []  # no defaults: 'graph' tells them apart
    assert nearest_difference([old], [new]) == ["graph"]
    [row] = compare([old], [new], defaults=_gemm_defaults).rows
    assert row.ratio == pytest.approx(2.0)
    assert nearest_difference([old], [new], defaults=_gemm_defaults) == []
    assert workload_key(old, defaults=_gemm_defaults) == workload_key(new, defaults=_gemm_defaults)
    graphed = make_result(run_id="c", params={**new.params, "graph": True})
    assert compare([old], [graphed], defaults=_gemm_defaults).rows == []  # a setting away from its default is not


def test_the_registry_s_defaults_pair_an_older_record():
    from accelbench.registry import default_params

    full = default_params("kernels/gemm")
    older = {k: v for k, v in full.items() if k != "graph"}
    old = make_result(params=older)
    new = make_result(run_id="b", value=2.0, params=full)
    assert len(compare([old], [new], defaults=default_params).rows) == 1
