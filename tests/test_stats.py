import math
import random

import pytest

from accelbench.measure.stats import Measurement, median_ci_ranks, quantile


def test_statistics_of_known_samples():
    m = Measurement(tuple(float(x) for x in [5, 1, 4, 2, 3, 10, 6, 7, 9, 8]))
    assert m.n == 10
    assert m.median == 5.5
    assert m.mean == 5.5
    assert m.min == 1 and m.max == 10
    assert m.std == pytest.approx(math.sqrt(sum((x - 5.5) ** 2 for x in range(1, 11)) / 9))
    # numpy-style linear interpolation: position (n-1)*q
    assert m.p90 == pytest.approx(9.1)
    assert m.p99 == pytest.approx(9.91)
    assert m.iqr == pytest.approx(7.75 - 3.25)
    assert m.cv == pytest.approx(m.std / 5.5)
    # n = 10: P(X <= 1) = 11/1024 <= 0.025 < P(X <= 2) = 56/1024, so the CI is [x(2), x(9)]
    assert m.ci95 == (2.0, 9.0)


def test_median_ci_ranks_small_and_large():
    assert median_ci_ranks(5) == (0, 4)  # 1/32 > 0.025: widest possible
    assert median_ci_ranks(6) == (0, 5)
    assert median_ci_ranks(10) == (1, 8)
    lo, hi = median_ci_ranks(5000)
    assert lo < 2500 < hi and (hi - lo) < 200


def test_median_ci_covers_the_true_median_about_95_percent():
    rng = random.Random(1)
    covered = 0
    trials = 400
    for _ in range(trials):
        samples = tuple(rng.expovariate(1.0) for _ in range(31))
        lo, hi = Measurement(samples).ci95
        covered += lo <= math.log(2) <= hi
    assert 0.92 <= covered / trials <= 0.995


def test_noise_warning_only_above_threshold():
    quiet = Measurement((1.0, 1.01, 0.99, 1.0, 1.02, 1.0))
    noisy = Measurement((1.0, 2.0, 0.5, 1.5, 1.0, 0.8))
    assert quiet.noise_warning() is None
    assert "noisy" in noisy.noise_warning()


def test_one_outlier_is_not_noise():
    """A CV is dominated by outliers; the spread of the middle half is not (the median reported is robust too)."""
    samples = (1.0,) * 200 + (1.001,) * 199 + (30.0,)
    m = Measurement(samples)
    assert m.cv > 0.10 and m.noise_warning() is None


def test_no_interval_and_a_warning_below_six_samples():
    """Order statistics give a 95% interval of the median from n = 6; with 5, [min, max] covers only 93.75%."""
    one, five, six = Measurement((1.0,)), Measurement((1.0, 1.1, 0.9, 1.0, 1.05)), Measurement((1.0,) * 6)
    assert one.ci95 is None and five.ci95 is None and six.ci95 == (1.0, 1.0)
    assert "few samples: 1" in one.noise_warning() and "few samples: 5" in five.noise_warning()
    assert "ci95_low" not in five.summary()


def test_unmet_min_reps_is_said():
    from accelbench.kit.metrics import warnings_of

    cut = Measurement((2.0,) * 7, meta={"min_reps": 10, "max_time": 10.0})
    assert any(w.startswith("min-reps not met: 7 of 10") for w in warnings_of(cut, {}))
    assert warnings_of(Measurement((2.0,) * 10, meta={"min_reps": 10, "max_time": 10.0}), {}) == []


def test_invalid_samples_rejected():
    with pytest.raises(ValueError):
        Measurement(())
    with pytest.raises(ValueError):
        Measurement((1.0, float("nan")))
    with pytest.raises(ValueError):
        quantile([1.0], 1.5)


def test_summary_has_every_statistic():
    s = Measurement((1.0, 2.0, 3.0, 4.0, 5.0, 6.0)).summary()
    assert set(s) == {"median", "mean", "std", "min", "max", "p90", "p99", "iqr", "cv", "ci95_low", "ci95_high"}


def test_mann_whitney_matches_scipy_and_tells_shifted_samples_apart():
    scipy_stats = pytest.importorskip("scipy.stats")
    from accelbench.measure.stats import mann_whitney_p

    rng = random.Random(7)
    for n1, n2, shift, digits in [(30, 50, 0.2, None), (40, 40, 0.0, 1), (100, 3, 0.1, 1), (7, 6, 1.0, None)]:
        a = [rng.gauss(0, 1) for _ in range(n1)]
        b = [rng.gauss(shift, 1) for _ in range(n2)]
        if digits is not None:
            a, b = [round(x, digits) for x in a], [round(x, digits) for x in b]
        method = "exact" if max(n1, n2) <= 20 and digits is None else "asymptotic"
        want = scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method=method).pvalue
        assert mann_whitney_p(a, b) == pytest.approx(want, rel=1e-9)
    quiet = [1.0 + 0.01 * rng.random() for _ in range(40)]
    assert mann_whitney_p(quiet, [x * 1.05 for x in quiet]) < 1e-6
    assert mann_whitney_p([2.0] * 10, [2.0] * 10) == 1.0
