"""The default suites (headline on a GPU, quick on a CPU, standard the long one asked for) and the sampled check of a
plan's estimates (``accelbench run SUITE --sample N --seed S``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli
from test_plan import _fake_h100

from accelbench.cli.commands_measure import sampled
from accelbench.errors import UsageError
from accelbench.suite.suites import BUILTIN, DEFAULT_ACCELERATOR, DEFAULT_CPU, builtin_suite


def test_headline_is_quicks_gpu_work_and_llama_served_at_full_size() -> None:
    quick, headline = builtin_suite("quick"), builtin_suite("headline")
    assert "headline" in BUILTIN and (DEFAULT_CPU, DEFAULT_ACCELERATOR) == ("quick", "headline")
    gpu, quick_gpu = headline.on("accelerator").entries, quick.on("accelerator").entries
    assert len(quick_gpu) == 14 and gpu[: len(quick_gpu)] == quick_gpu  # quick's kernels and models, unchanged
    served = gpu[len(quick_gpu) :]
    assert [e.benchmark for e in served] == ["infer/llm", "infer/llm"]
    assert [e.params["scenario"] for e in served] == ["offline", "server"]
    for e in served:  # full size, at MLPerf's limits (no own TTFT/TPOT), the quick profile
        assert (e.params["model"], e.params["scale"], e.params["profile"]) == ("llama3.1-8b", "full", "quick")
        assert e.params["ttft_ms"] == e.params["tpot_ms"] == 0.0
    assert headline.on("cpu").entries == quick.on("cpu").entries  # on a CPU, quick's CPU entries alone
    assert len(builtin_suite("standard").entries) == 391  # the long suite, unchanged


def test_a_suite_file_includes_a_builtin_suite_and_a_wrong_include_is_one_line(tmp_path: Path) -> None:
    from accelbench.suite.suites import load_suite_file

    more = tmp_path / "more.toml"
    more.write_text('include = "quick"\n[[benchmark]]\nname = "selftest/ok"\n')
    suite = load_suite_file(more)
    assert suite.entries[:-1] == builtin_suite("quick").entries and suite.entries[-1].benchmark == "selftest/ok"
    bad = tmp_path / "bad.toml"
    bad.write_text('include = "quik"\n')
    with pytest.raises(UsageError, match="include names built-in suites .*, not 'quik'"):
        load_suite_file(bad)


def test_the_gpu_default_is_headline_in_minutes_not_standard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a (fake) H100, ``accelbench run`` plans headline: 16 entries, each estimated."""
    from accelbench.cli.main import main

    _fake_h100(monkeypatch)
    assert main(["run", "--dry-run", "--device", "cuda", "--db", str(tmp_path / "s.db"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 16 and rows[-1]["benchmark"] == "infer/llm" and rows[-1]["params"]["scale"] == "full"
    assert all(r["estimate"]["source"] == "model" for r in rows)


def test_a_sample_is_drawn_across_kinds_the_same_for_a_seed() -> None:
    standard = builtin_suite("standard")
    one, again, other = (sampled(standard, 8, seed) for seed in (3, 3, 4))
    assert one.entries == again.entries and one.entries != other.entries
    kinds = {e.benchmark.split("/")[0] for e in one.entries}
    assert kinds == {"kernels", "train", "infer", "tta"}  # 8 draws over 4 kinds: every kind, though 375 are kernels
    order = [standard.entries.index(e) for e in one.entries]
    assert order == sorted(order)  # run in the suite's order
    quick = builtin_suite("quick").on("cpu")
    assert len({e.benchmark.split("/")[0] for e in sampled(quick, 3, 1).entries}) == 3
    assert sampled(quick, len(quick.entries), 0).entries == quick.entries
    for n in (0, -1, len(quick.entries) + 1):
        with pytest.raises(UsageError, match=f"--sample takes 1 to {len(quick.entries)} .*not {n}"):
            sampled(quick, n, 0)


@pytest.mark.parametrize("args", [["--sample", "0"], ["--sample", "21"], ["--seed", "3"]])
def test_a_bad_sample_is_one_line_exit_2(tmp_path: Path, cli_env: dict[str, str], args: list[str]) -> None:
    proc = run_cli(["run", "quick", "--device", "cpu", *args], cli_env, tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert "--sample" in proc.stderr


def test_a_sampled_run_prints_each_estimate_beside_its_time(tmp_path: Path, cli_env: dict[str, str]) -> None:
    """Three of quick's CPU entries of three kinds run; each one's estimate is set beside the time it took, and the
    error over the sample is said (no figure is asserted: a busy 2-core host makes any time)."""
    picked = sampled(builtin_suite("quick").on("cpu"), 3, 0).entries
    env = {**cli_env, "COLUMNS": "200"}
    proc = run_cli(["run", "quick", "--sample", "3", "--seed", "0", "--out", str(tmp_path / "runs")], env, tmp_path)
    assert proc.returncode in (0, 3), proc.stderr
    assert "a sample of 3 entries of quick (seed 0)" in proc.stdout
    table = proc.stdout.split("the plan's estimates against the run")[1]
    for e in picked:
        assert e.label in table
    rows = [line for line in table.splitlines() if "│ model" in line or "│ here before" in line]
    assert len(rows) == 3 and all(line.rstrip(" │").endswith("%") for line in rows)
    assert "estimate's error over 3 entries: median" in table and "worst" in table
    runs = json.loads(run_cli(["results", "runs", "--json"], cli_env, tmp_path).stdout)
    assert runs[0]["counts"] and sum(runs[0]["counts"].values()) == 3  # only the sample ran
