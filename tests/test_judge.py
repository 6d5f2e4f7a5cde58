"""Comparisons judge only comparable, trustworthy sides, on the raw samples and the run-to-run spread."""

from __future__ import annotations

import json
import random

import pytest

from accelbench.kit.metrics import concerns_of, rate, seconds
from accelbench.measure.stats import Measurement
from accelbench.results.compare import compare
from accelbench.results.history import histories
from accelbench.results.judge import concerns, metric_samples
from accelbench.results.record import Result

FLOPS = 2 * 256**3
CONTENDED = "contended: other processes used 50% of the CPUs (stress-ng 48%)"


def watched(warnings: tuple[str, ...]) -> dict:
    """The conditions a monitor records when it saw ``warnings`` (each a contention)."""
    typed = [{"kind": "contended", "text": w, "data": {}} for w in warnings]
    return {"warnings": list(warnings), "concerns": typed, "contended": bool(warnings)}


def gemm(
    run_id: str,
    times: list[float],
    *,
    started: str = "2026-11-01T00:00:00.000+00:00",
    warnings: tuple[str, ...] = (),
    params: dict | None = None,
    fingerprint: str = "zen4",
) -> Result:
    """A GEMM record as kernels/gemm makes it: figures from a Measurement of ``times``."""
    m = Measurement(tuple(times))
    return Result(
        benchmark="kernels/gemm",
        params=params or {"m": 256, "n": 256, "k": 256, "precision": "fp32", "device": "cpu", "threads": 2},
        metrics={"tflops": rate(FLOPS, m, "TFLOPS", 1e12), "seconds": seconds(m)},
        primary_metric="tflops",
        concerns=concerns_of(m, watched(warnings)),
        conditions=watched(warnings),
        samples=list(times),
        run_id=run_id,
        started_at=started,
        system={"fingerprint": fingerprint, "profile": {"cpu": {"model": "test cpu"}, "accelerators": []}},
    )


def times(median: float, n: int = 40, spread: float = 0.01, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [median * (1 + spread * (rng.random() - 0.5)) for _ in range(n)]


def test_a_contended_side_is_shown_not_judged_and_left_out_of_the_mean():
    quiet = gemm("a", times(1e-3))
    # the 24x of the issue: a neighbour held one core, every 2-thread call waited a slice (16 ms), tightly
    busy = gemm("b", times(24e-3, seed=1), warnings=(CONTENDED,))
    c = compare([quiet], [busy])
    [row] = c.rows
    assert row.verdict.startswith("not judged: candidate contended: other processes used 50%")
    assert "stress-ng" in row.verdict and not row.judged and row.brief == "not judged: candidate contended"
    assert c.geometric_mean() is None and c.set_aside() == {"contended": 1}
    assert c.footer() == "1 of 1 pairs not judged (1 contended): shown, left out of the geometric mean"
    d = c.to_dict()
    assert d["rows"][0]["candidate_set_aside"] == [CONTENDED] and d["judged"] == 0


def _recorded() -> dict[str, Result]:
    """Real runs of one GEMM on one machine: two quiet, one with a neighbour holding a core (see 'about')."""
    from pathlib import Path

    doc = json.loads((Path(__file__).parent / "data" / "gemm_quiet_contended.json").read_text())
    return {r["tags"]["run"]: Result.from_dict(r) for r in doc["records"]}


def test_recorded_runs_the_same_machine_never_reads_faster_than_itself():
    runs = _recorded()
    quiet1, quiet2, busy = runs["quiet1"], runs["quiet2"], runs["contended"]
    [same] = compare([quiet1], [quiet2]).rows
    assert same.verdict == "no difference" and same.judged  # 6% apart: one run a side cannot call that
    [row] = compare([quiet1], [busy]).rows  # 2.9x slower, each interval tight: the neighbour, not the machine
    assert row.speedup < 0.5 and not row.judged and row.brief == "not judged: candidate contended"
    assert "python[" in row.verdict  # who took the core
    [s] = histories([quiet1, quiet2, busy])
    assert s.changes == [] and s.points[-1].set_aside and not s.points[0].set_aside


def test_two_quiet_runs_of_one_machine_are_no_difference():
    # two runs minutes apart differ by 3% in their medians, each tight within itself: the rank test separates
    # them, but one run a side says nothing about how runs vary, and 3% is under the 10% a single run needs
    a, b = gemm("a", times(1.00e-3, seed=2)), gemm("b", times(1.03e-3, seed=3))
    [row] = compare([a], [b]).rows
    assert row.judgement.p_value < 1e-6
    assert row.verdict == "no difference" and "one run a side" in row.judgement.evidence


def test_a_large_difference_is_called_and_the_evidence_named():
    [row] = compare([gemm("a", times(1e-3, seed=4))], [gemm("b", times(0.5e-3, seed=5))]).rows
    assert row.verdict == "faster" and row.speedup == pytest.approx(2.0, rel=0.02)
    assert row.judgement.evidence.startswith("Mann-Whitney p<1e-12 on 40+40 samples")


def test_noisy_repeats_are_pooled_not_dropped_for_the_odd_steady_one():
    """A reviewer's case: two noisy repeats that agreed were set aside and the odd steady third judged alone."""
    rng = random.Random(90)
    noisy = [[t * (1 + 0.3 * rng.random()) for t in times(m, seed=91 + i)] for i, m in enumerate((1e-3, 1.05e-3))]
    base = [gemm(f"a{i}", s, started=f"2026-11-01T00:0{i}:00.000+00:00") for i, s in enumerate(noisy)]
    base.append(gemm("a2", times(2e-3, seed=95), started="2026-11-01T00:03:00.000+00:00"))  # odd, steady
    assert all(r.has("noisy") for r in base[:2])
    [row] = compare(base, [gemm("b", times(0.5e-3, seed=96))]).rows
    assert row.baseline_runs == 3 and row.baseline_set_aside == ()  # all three pooled
    assert row.baseline.value == pytest.approx(base[1].metrics["tflops"].value)  # the median of the runs
    # a single noisy run is still set aside: one run's noise is all there is to judge it by
    [alone] = compare([base[0]], [gemm("b", times(0.5e-3, seed=96))]).rows
    assert alone.verdict.startswith("not judged: baseline noisy")


def test_where_each_side_ran_is_said_when_it_differs():
    params = {"m": 256, "n": 256, "k": 256, "precision": "fp32", "device": "cpu"}
    [row] = compare(
        [gemm("a", times(1e-3), params=params | {"threads": 2})],
        [gemm("b", times(2e-3, seed=1), params=params | {"threads": 1})],
    ).rows
    assert row.workload.endswith("(threads 2 -> 1)")


def test_repeats_measure_the_run_to_run_spread():
    # three runs a side, each within 1% of the others: a 5% change exceeds that spread and is called
    base = [
        gemm(f"a{i}", times(1e-3 * (1 + 0.005 * i), seed=10 + i), started=f"2026-11-01T00:0{i}:00.000+00:00")
        for i in range(3)
    ]
    cand = [
        gemm(f"b{i}", times(0.95e-3 * (1 + 0.005 * i), seed=20 + i), started=f"2026-11-02T00:0{i}:00.000+00:00")
        for i in range(3)
    ]
    [row] = compare(base, cand).rows
    assert row.baseline_runs == 3 and row.candidate_runs == 3
    assert row.verdict == "faster" and "over 3 runs" in row.judgement.evidence
    # the same 5% against runs that scatter by 12% is no difference
    wide = [
        gemm(f"w{i}", times(1e-3 * (0.94 + 0.06 * i), seed=30 + i), started=f"2026-11-03T00:0{i}:00.000+00:00")
        for i in range(3)
    ]
    [row] = compare(wide, cand).rows
    assert row.verdict == "no difference" and row.judgement.threshold > 0.1


def test_earlier_runs_in_the_store_are_evidence_for_single_runs():
    earlier = [
        gemm(f"e{i}", times(1e-3 * (1 + 0.004 * i), seed=40 + i), started=f"2026-10-0{i + 1}T00:00:00.000+00:00")
        for i in range(4)
    ]
    a, b = gemm("a", times(1e-3, seed=50)), gemm("b", times(0.94e-3, seed=51))
    [alone] = compare([a], [b]).rows
    assert alone.verdict == "no difference"  # 6%: under the single-run 10%
    [row] = compare([a], [b], earlier=[*earlier, a, b]).rows
    assert row.verdict == "faster" and "over 4 runs" in row.judgement.evidence


def test_a_repeat_that_was_contended_is_dropped_and_the_rest_judged():
    runs = [gemm("a1", times(1e-3, seed=60)), gemm("a2", times(5e-3, seed=61), warnings=(CONTENDED,))]
    [row] = compare(runs, [gemm("b", times(0.5e-3, seed=62))]).rows
    assert row.baseline_runs == 1 and row.baseline_set_aside == (CONTENDED,)
    assert row.verdict == "faster" and row.baseline.value == pytest.approx(runs[0].metrics["tflops"].value)
    d = compare(runs, [gemm("b", times(0.5e-3, seed=62))]).to_dict()
    assert d["set_aside"] == {} and d["runs_set_aside"] == {"contended": 1}  # a judged pair that left a run out
    from accelbench.cli.render_trends import compare_table

    caption = str(compare_table(compare(runs, [gemm("b", times(0.5e-3, seed=62))]), "a", "b").caption)
    assert f"baseline {row.workload}: {CONTENDED}" in caption  # which side the reason belongs to


def test_noisy_and_few_samples_are_set_aside():
    noisy = gemm("a", [1e-3, 2e-3] * 10)
    assert any(w.startswith("noisy") for w in concerns(noisy, "tflops"))
    few = gemm("b", times(1e-3, n=4))
    assert concerns(few, "tflops")[0].startswith("few samples")
    [row] = compare([noisy], [few]).rows
    assert row.verdict.startswith("not judged: baseline noisy") and "candidate few samples" in row.verdict


def test_samples_map_to_the_figure_whichever_way_it_runs():
    r = gemm("a", [1e-3, 2e-3, 4e-3, 2e-3, 2e-3, 2e-3])
    tf = metric_samples(r, "tflops")
    assert tf is not None and sorted(tf)[len(tf) // 2] == pytest.approx(r.metrics["tflops"].value)
    assert max(tf) == pytest.approx(FLOPS / 1e-3 / 1e12)  # the fastest call gives the highest rate
    assert metric_samples(r, "seconds") == pytest.approx([1e-3, 2e-3, 4e-3, 2e-3, 2e-3, 2e-3])


def test_history_sets_contended_runs_aside_and_never_flags_them():
    pts = [gemm(f"r{i}", times(1e-3, seed=70 + i), started=f"2026-11-0{i + 1}T00:00:00.000+00:00") for i in range(4)]
    pts.append(gemm("slow", times(24e-3, seed=80), started="2026-11-06T00:00:00.000+00:00", warnings=(CONTENDED,)))
    [s] = histories(pts)
    assert s.changes == [] and s.points[-1].set_aside == (CONTENDED,)


def test_history_keys_keep_threads_and_drop_the_measurement_length():
    base = {"m": 256, "n": 256, "k": 256, "precision": "fp32", "device": "cpu"}
    recs = [
        gemm("t1", times(2e-3), params=base | {"threads": 1}),
        gemm("t2", times(1e-3), params=base | {"threads": 2}),
        gemm("t2b", times(1e-3), params=base | {"threads": 2, "min_time": 5.0, "warmup_time": 1.0}),
    ]
    series = histories(recs)
    assert len(series) == 2
    names = sorted(s.workload for s in series)
    assert names == ["m=256 n=256 k=256 precision=fp32 (threads=1)", "m=256 n=256 k=256 precision=fp32 (threads=2)"]
    assert sorted(len(s.points) for s in series) == [1, 2]
    assert json.dumps(series[0].to_dict())  # serialisable with its settings


def test_repeat_runs_each_entry_in_rounds_and_compare_pools_them(cli_env, tmp_path):
    from conftest import run_cli

    db = str(tmp_path / "r.db")
    gemm_args = ["kernels", "gemm", "--m", "64,96", "--n", "64", "--k", "64", "--min-time", "0.05", "--min-reps", "6"]
    runs = []
    for box in ("a", "b"):
        p = run_cli([*gemm_args, "--repeat", "2", "--db", db, "--tag", f"box={box}", "--json"], cli_env, tmp_path)
        assert p.returncode == 0, p.stderr
        out = json.loads(p.stdout)
        runs.append(out["run_id"])
        # rounds: m=64, m=96, m=64, m=96 (drift over the run hits both alike)
        assert [r["params"]["m"] for r in out["results"]] == [64, 96, 64, 96]
    p = run_cli(["compare", *runs, "--db", db, "--json"], cli_env, tmp_path)
    rows = json.loads(p.stdout)["rows"]
    assert len(rows) == 2
    for r in rows:  # both repeats pooled, or the ones set aside named (a shared machine may contend a run)
        for name in ("baseline", "candidate"):
            assert r[f"{name}_runs"] == 2 or r[f"{name}_set_aside"]
        if r["judged"]:
            assert "over 2 runs" in r["evidence"] or "one run a side" in r["evidence"]
    resumed = run_cli(["run", "--resume", runs[0], "--repeat", "2", "--db", db], cli_env, tmp_path)
    assert resumed.returncode == 2 and "--repeat applies to a new run" in resumed.stderr


def test_a_json_export_carries_its_runs_and_an_import_keeps_the_command_line(tmp_path):
    from accelbench.results.exchange import export, import_path
    from accelbench.results.store import RunInfo, Store

    src = Store(tmp_path / "src.db")
    cmd = "accelbench kernels gemm --m 256 --n 256 --k 256 --tag box=a"
    src.add_run(RunInfo("20261101-000000-aaaa", "2026-11-01T00:00:00.000+00:00", cmd, {"name": "gemm"}, "zen4"))
    rec = gemm("20261101-000000-aaaa", times(1e-3))
    src.add(rec)
    doc = export([rec], "json", runs=[src.get_run("20261101-000000-aaaa")])
    assert json.loads(doc)["runs"][0]["command"] == cmd
    path = tmp_path / "export.json"
    path.write_text(doc)
    dst = Store(tmp_path / "dst.db")
    assert import_path(dst, path)[0] == 1
    run = dst.get_run("20261101-000000-aaaa")
    assert run.command == cmd and run.suite == {"name": "gemm"}
    src.close()
    dst.close()


def test_the_report_shows_a_contended_pair_not_judged_and_says_why():
    from accelbench.report.common import ReportInput
    from accelbench.report.model import Bullets, Table
    from accelbench.report.overview import summary
    from accelbench.report.trends import comparisons, history

    def on(system: str, r: Result) -> Result:
        r.system = {"fingerprint": system, "profile": {"cpu": {"model": f"CPU {system}"}, "accelerators": []}}
        return r

    quiet = on("sys-a", gemm("a", times(1e-3)))
    busy = on("sys-b", gemm("b", times(24e-3, seed=1), warnings=(CONTENDED,)))
    inp = ReportInput([quiet, busy])
    section = comparisons(inp)
    assert section is not None
    [sub] = [b for b in section.blocks if hasattr(b, "blocks")]
    [table] = [b for b in sub.blocks if isinstance(b, Table)]
    [row] = table.rows
    assert row[7].text == "not judged: candidate contended" and row[6] == "-"  # no ratio for a set-aside pair
    assert "1 of 1 pairs not judged" in table.caption and "stress-ng 48%" in table.caption
    assert not any(getattr(b, "name", "").startswith("ratios-") for b in sub.blocks)  # no bar for it
    care = [i for b in summary(inp).blocks if isinstance(b, Bullets) for i in b.items]
    assert any(i.startswith("Contended: kernels/gemm") and "stress-ng" in i for i in care)
    runs = [on("sys-a", gemm(f"r{i}", times(1e-3), started=f"2026-11-0{i + 1}T00:00:00.000+00:00")) for i in range(4)]
    runs.append(on("sys-a", gemm("slow", times(24e-3), started="2026-11-06T00:00:00.000+00:00", warnings=(CONTENDED,))))
    hist = history(ReportInput(runs))
    [htable] = [b for b in hist.blocks if isinstance(b, Table)]
    assert htable.rows[0][5].text == "" and htable.rows[0][6].text == "1 of 5 runs: contended (1)"


def test_two_definitions_of_one_model_name_are_not_judged():
    """A model is its definition: ``ssd`` was torchvision's VGG-16 SSD300 and is now MLPerf's ResNet-34 one, so a
    record of each pairs by name but is set aside with both definitions said; the same definition is judged."""
    vgg, r34 = gemm("a", times(1e-3)), gemm("b", times(0.5e-3, seed=1))
    vgg.details["source"] = "torchvision.models.detection.ssd300_vgg16 (SSD300, as MLPerf v0.5)"
    r34.details["source"] = "SSD300 with MLPerf v0.5's ResNet-34 backbone"
    [row] = compare([vgg], [r34]).rows
    assert not row.judged and row.unlike == (f"unlike models: {vgg.details['source']} vs {r34.details['source']}",)
    r34.details["source"] = vgg.details["source"]
    [same] = compare([vgg], [r34]).rows
    assert same.judged and same.unlike == ()


def test_unpaired_runs_are_told_which_settings_differ(tmp_path, capsys):
    """Two runs with no workload in common: the message names the settings the nearest records differ in and the
    --ignore flags that pair them (a bare "--ignore PARAM" left the user guessing, and ignoring one of two
    differing settings still paired nothing); with those flags the pair is judged."""
    from accelbench.cli.main import main
    from accelbench.results.store import RunInfo, Store

    base = gemm("run-a", times(1e-3))
    cand = gemm("run-b", times(1e-3, seed=1), params={**base.params, "m": 512, "precision": "amp_bf16"})
    db = tmp_path / "s.db"
    with Store(db) as store:
        for r in (base, cand):
            store.add_run(RunInfo(r.run_id, r.started_at, "fixture", {}, "zen4", {}))
        store.add_many([base, cand])
    assert main(["compare", "run-a", "run-b", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "the nearest records differ in m, precision (--ignore m --ignore precision pairs them)" in err
    assert main(["compare", "run-a", "run-b", "--ignore", "m", "--ignore", "precision", "--db", str(db)]) == 0


def test_the_report_compares_each_tag_key_s_values_across_the_setting_they_name():
    """A user tags what they vary (p=fp32 / p=bf16 across precision, c=quiet / c=busy): the report compares each
    key's values with its first, paired across the one setting the groups differ in, and never one key's group
    with another's (c=busy against p=fp32 answers nothing)."""
    from accelbench.report.common import ReportInput
    from accelbench.report.model import Table
    from accelbench.report.trends import comparisons

    base = {"m": 256, "n": 256, "k": 256, "batch": 1, "precision": "fp32", "device": "cpu", "threads": 2}
    fp32 = gemm("a", times(1e-3), params=base)
    bf16 = gemm(
        "b", times(0.5e-3, seed=1), params=base | {"precision": "bf16"}, started="2026-11-02T00:00:00.000+00:00"
    )
    quiet = gemm("c", times(1e-3, seed=2), params=base | {"m": 512}, started="2026-11-03T00:00:00.000+00:00")
    busy = gemm("d", times(3e-3, seed=3), params=base | {"m": 512}, started="2026-11-04T00:00:00.000+00:00")
    for r, tags in ((fp32, {"p": "fp32"}), (bf16, {"p": "bf16"}), (quiet, {"c": "quiet"}), (busy, {"c": "busy"})):
        r.tags = tags
    section = comparisons(ReportInput([fp32, bf16, quiet, busy]))
    assert section is not None
    subs = [b for b in section.blocks if hasattr(b, "blocks")]
    assert [s.title for s in subs] == ["p=bf16 against p=fp32 (paired across precision)", "c=busy against c=quiet"]
    for sub in subs:
        [table] = [b for b in sub.blocks if isinstance(b, Table)]
        assert len(table.rows) == 1
    [p_table] = [b for b in subs[0].blocks if isinstance(b, Table)]
    assert p_table.rows[0][7].text == "faster" and p_table.rows[0][0].endswith("(precision fp32 -> bf16)")


def test_two_runs_that_agree_do_not_lower_the_bar_below_one_runs():
    """Two runs a side 0.5% apart and a 4% change: with fewer than 3 runs their spread may raise the bar but not
    lower it under the single-run 10% ("no difference"); three runs a side as steady measure it ("faster")."""

    def side(name: str, median: float, n: int, seed: int) -> list[Result]:
        day = "2026-11-0{}T00:00:00.000+00:00"
        return [gemm(f"{name}{i}", times(median * (1 + 0.005 * (i % 2)), seed=seed + i), started=day.format(i + 1))
                for i in range(n)]  # fmt: skip

    [two] = compare(side("a", 1e-3, 2, 10), side("b", 0.96e-3, 2, 20)).rows
    assert two.verdict == "no difference", two.judgement.evidence
    assert "(fewer than 3: a change over 10% is called)" in two.judgement.evidence
    [three] = compare(side("a", 1e-3, 3, 10), side("b", 0.96e-3, 3, 20)).rows
    assert three.verdict == "faster" and "fewer than" not in three.judgement.evidence, three.judgement.evidence
