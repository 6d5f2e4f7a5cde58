"""History across runs: a real step is flagged, noise is called unstable, untrustworthy points are not judged."""

import pytest
from helpers import make_result

from accelbench.results.history import histories


def _series(values, half_width=0.01, valid=None):
    out = []
    for day, v in enumerate(values, 1):
        r = make_result(
            run_id=f"run-{day:02d}",
            value=v,
            ci=(v * (1 - half_width), v * (1 + half_width)),
            started_at=f"2026-01-{day:02d}T00:00:00.000+00:00",
        )
        r.valid = valid
        out.append(r)
    return out


def test_a_run_20_percent_slower_with_tight_intervals_is_a_regression():
    [s] = histories(_series([1.00, 1.01, 0.99, 1.00, 0.80, 0.80, 0.81]))
    assert [(c.index, c.kind) for c in s.regressions] == [(4, "regression")]
    assert s.regressions[0].ratio == pytest.approx(0.8, abs=0.01) and s.unstable is None
    # the new level is the baseline afterwards: 0.80 and 0.81 are not flagged again


def test_an_improvement_is_not_a_regression():
    [s] = histories(_series([1.0, 1.0, 1.0, 1.3]))
    assert [c.kind for c in s.changes] == ["improvement"] and not s.regressions


def test_a_noisy_series_is_unstable_not_regressed():
    [s] = histories(_series([1.0, 1.4, 0.7, 1.2, 0.8], half_width=0.02))
    assert not s.changes and "scatter" in s.unstable


def test_too_little_history_small_shifts_and_invalid_points_are_not_judged():
    assert not histories(_series([1.0, 1.0, 0.5]))[0].changes  # two earlier runs: too few
    assert not histories(_series([1.0, 1.0, 1.0, 0.97], half_width=0.001))[0].changes  # 3% < threshold
    invalid = _series([1.0, 1.0, 1.0, 0.5])
    invalid[-1].valid = False
    assert not histories(invalid)[0].changes


def test_systems_and_workloads_are_separate_series():
    a = _series([1.0, 1.0, 1.0, 0.5])
    other = make_result(run_id="x", value=9.0, params={"m": 8, "precision": "fp32"})
    other.system = {"fingerprint": "another", "profile": {}}
    assert len(histories([*a, other])) == 2


def test_history_command_flags_and_fails_on_request(cli_env, tmp_path):
    from conftest import run_cli

    from accelbench.results.store import Store

    db = tmp_path / "h.db"
    store = Store(db)
    for r in _series([1.0, 1.0, 1.01, 0.99, 0.8]):
        store.add(r)
    store.close()
    shown = run_cli(["history", "kernels/gemm", "--db", str(db)], cli_env, tmp_path)
    assert shown.returncode == 0 and "regression" in shown.stdout and "0.80x" in shown.stdout, shown.stdout
    gate = run_cli(["history", "kernels/gemm", "--fail-on-regression", "--db", str(db)], cli_env, tmp_path)
    assert gate.returncode == 1
    none = run_cli(["history", "kernels/gemm", "--param", "m=4096", "--db", str(db)], cli_env, tmp_path)
    assert none.returncode == 2 and "no ok results of kernels/gemm with m=4096" in none.stderr


def test_an_older_record_missing_a_setting_stays_in_its_series_given_the_defaults():
    """As compare pairs it: a record made before a setting existed counts at the default the caller gives."""
    runs = _series([1.0, 1.0, 1.0, 1.0])
    for r in runs[2:]:
        r.params = {**r.params, "graph": False}
    assert len(histories(runs)) == 2  # no defaults: two series
    defaults = {"kernels/gemm": {"graph": False}}
    [s] = histories(runs, defaults=lambda benchmark: defaults.get(benchmark, {}))
    assert len(s.points) == 4 and s.settings["graph"] is False
