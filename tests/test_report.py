"""accelbench report: the HTML page in a real browser, the Markdown beside it, selection and bad input."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from browser import Browser, chromium

from accelbench.cli.main import main
from accelbench.results.record import Concern, Result, new_id
from accelbench.results.store import RunInfo, Store

DATA = Path(__file__).parent / "data" / "report_store.json"
INJECTED = "<script>alert(1)</script>"
OTHER = "b0b0b0b0b0b0b0b0"


def _other_system(r: Result) -> Result:
    """The same record as if measured on a second machine, 20% slower: the fixture's second system."""
    c = Result.from_dict(copy.deepcopy(r.to_dict()))
    c.id, c.run_id = new_id(), "20261101-000000-b0b0"
    c.system["fingerprint"] = OTHER
    c.system["profile"] = c.system["profile"] | {"fingerprint": OTHER, "hostname": "fixture-b"}
    c.system["profile"]["cpu"] = c.system["profile"]["cpu"] | {"model": "Fixture CPU B"}
    for m in c.metrics.values():
        factor = 0.8 if m.higher_is_better else 1.25
        m.value *= factor
        if m.ci95:
            m.ci95 = (m.ci95[0] * factor, m.ci95[1] * factor)
    return c


def _earlier(r: Result, i: int) -> Result:
    """An earlier run of ``r`` that was 25% faster, with a tight interval: the fixture's run then regressed."""
    c = Result.from_dict(copy.deepcopy(r.to_dict()))
    c.id, c.run_id = new_id(), f"20261001-00000{i}-hist"
    c.started_at = c.ended_at = f"2026-10-0{i + 1}T00:00:00.000+00:00"
    m = c.metrics[c.primary_metric]  # type: ignore[index]
    m.value *= 1.25
    m.ci95 = (m.value * 0.995, m.value * 1.005)
    return c


@pytest.fixture(scope="module")
def fixture_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real records of every family (kernels, train with scaling, tta, infer with find-peak), a second system,
    and a history in which the latest gemm run is 20% slower."""
    data = json.loads(DATA.read_text())
    records = [Result.from_dict(d) for d in data["records"]]
    path = tmp_path_factory.mktemp("report") / "store.db"
    with Store(path) as store:
        for run in data["runs"]:
            store.add_run(RunInfo(**run))
        store.add_many(records)
        gemm = next(r for r in records if r.benchmark == "kernels/gemm" and r.status == "ok")
        store.add_many(_earlier(gemm, i) for i in range(4))
        store.add_many(_other_system(r) for r in records if r.status == "ok" and r.benchmark != "tta/time_to_target")
        store.add_run(RunInfo("20261101-000000-b0b0", "2026-11-01T00:00:00", "fixture", {}, OTHER, {}))
    return path


@pytest.fixture(scope="module")
def report(fixture_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("out") / "r"
    assert main(["report", "--all", "--db", str(fixture_store), "-o", str(out)]) == 0
    return out


SECTIONS = (
    "summary",
    "machines",
    "kernels",
    "kernels-gemm",
    "training",
    "scaling",
    "tta",
    "inference",
    "inference-server",
    "inference-offline",
    "inference-multistream",
    "comparisons",
    "history",
)


@pytest.mark.skipif(chromium() is None, reason="no chromium here (.ci/run installs Debian's chromium)")
def test_the_html_report_loads_offline_with_every_section_and_chart(report: Path) -> None:
    with Browser(chromium()) as browser:  # type: ignore[arg-type]
        tab = browser.open((report / "report.html").as_uri())
        ids = browser.evaluate(tab, "[...document.querySelectorAll('section')].map(s => s.id)")
        sizes = browser.evaluate(
            tab,
            "[...document.images].map(i => [i.complete, i.naturalWidth, i.getBoundingClientRect().width, "
            "i.getBoundingClientRect().height])",
        )
        scripts = browser.evaluate(tab, "document.scripts.length")
        text = browser.evaluate(tab, "document.body.innerText")
        assert browser.errors() == []
        leaving = [u for u in browser.requests() if not u.startswith(("file:", "data:"))]
        assert leaving == []
    assert set(SECTIONS) <= set(ids), set(SECTIONS) - set(ids)
    assert len(sizes) >= 8
    assert all(done and natural > 0 and w > 0 and h > 0 for done, natural, w, h in sizes), sizes
    assert scripts == 0 and INJECTED in text  # the tag is shown as text, never run
    assert "regression" in text and "Fixture CPU B" in text


def test_the_report_says_what_a_reader_must_not_miss(report: Path) -> None:
    page = (report / "report.html").read_text()
    assert INJECTED not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "https://" not in page and "http://" not in page.replace("http://www.w3.org", "")
    text = re.sub(r"<[^>]+>", " ", page)
    assert "Failed: infer/loadgen" in text and "no peak" in text  # a failed find-peak, with its reason
    assert "fp16 arithmetic" in text  # skipped, with the reason
    assert "Above the peak" in text  # the CPU estimate was beaten: % of peak is no ceiling here
    assert "Geometric mean of the judged speedups" in text


def test_the_markdown_report_has_the_tables_and_charts_as_files(report: Path) -> None:
    md = (report / "report.md").read_text()
    for heading in (
        "## Summary",
        "## Machines",
        "## Kernels",
        "## Training throughput",
        "## Time to accuracy",
        "## Inference",
        "## Comparisons",
        "## History",
    ):
        assert heading in md
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert len(images) >= 8
    for rel in images:
        assert (report / rel).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert INJECTED not in md and "&lt;script&gt;" in md


def test_report_of_the_latest_run_by_default(fixture_store: Path, tmp_path: Path, capsys) -> None:
    assert main(["report", "--db", str(fixture_store), "-o", str(tmp_path), "--format", "md"]) == 0
    md = (tmp_path / "report.md").read_text()
    assert not (tmp_path / "report.html").exists()
    assert md.count("\n## ") >= 2 and "1 records from 1 run" in md


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["nosuchrun"], "unknown run id"),
        (["--tag", "gpu=none"], "no records with gpu=none"),
        (["--all", "--last", "2"], "pick runs one way"),
        (["--all", "--format", "pdf"], "--format takes html and/or md"),
    ],
)
def test_bad_selections_are_one_line_and_exit_2(fixture_store, tmp_path, capsys, argv, message) -> None:
    assert main(["report", "--db", str(fixture_store), "-o", str(tmp_path / "r"), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_an_unwritable_output_folder_is_one_line(fixture_store, tmp_path, capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["report", "--all", "--db", str(fixture_store), "-o", str(blocker / "r")]) == 2
    err = capsys.readouterr().err
    assert "cannot write the report" in err and err.count("\n") == 1


def test_an_empty_store_is_one_line(tmp_path, capsys) -> None:
    Store(tmp_path / "empty.db").close()
    assert main(["report", "--db", str(tmp_path / "empty.db"), "-o", str(tmp_path / "r")]) == 2
    assert "no runs" in capsys.readouterr().err


def test_the_summary_never_states_a_contended_figure_plain_nor_calls_it_the_best():
    from helpers import make_result

    from accelbench.report.common import ReportInput
    from accelbench.report.perf import training_headlines

    quiet, busy = make_result(value=10.0), make_result(value=30.0)
    for r in (quiet, busy):
        r.benchmark, r.params = "train/throughput", {"model": "ncf", "precision": "fp32"}
    busy.concern("contended", "contended: other processes used 42% of the CPUs (stress[7] 40%)")
    [line] = training_headlines(ReportInput([quiet, busy]), [quiet, busy])
    assert line.startswith("Training ncf: 10.00 ") and "read with care" not in line
    [line] = training_headlines(ReportInput([busy]), [busy])
    assert line.startswith("Training ncf: 30.00 ") and line.endswith("(contended: read with care).")


def test_the_training_summary_names_the_best_of_like_workloads_only():
    """A tiny preset's 103,100 tokens/s at 0.25% MFU was called the best over the full-width slice's 45,610 at 46%:
    each size and depth of a model has its own best."""
    from helpers import make_result

    from accelbench.report.common import ReportInput
    from accelbench.report.perf import training_headlines

    tiny, full, full_better = make_result(value=103100.0), make_result(value=45610.0), make_result(value=46000.0)
    fp32 = make_result(value=9000.0)
    for r, scale, layers, precision in (
        (tiny, "tiny", 0, "amp_bf16"), (full, "full", 4, "amp_bf16"), (full_better, "full", 4, "amp_bf16"),
        (fp32, "full", 4, "fp32"),
    ):  # fmt: skip
        r.benchmark = "train/llm"
        r.params = {"model": "llama3.1-8b", "scale": scale, "layers": layers, "precision": precision}
    lines = training_headlines(ReportInput([tiny, full, full_better, fp32]), [tiny, full, full_better, fp32])
    assert len(lines) == 3  # one line per workload: size and depth, and precision
    assert any(line.startswith("Training llama3.1-8b: 103,100 ") for line in lines)
    assert any(line.startswith("Training llama3.1-8b: 46,000 ") for line in lines)
    assert any(line.startswith("Training llama3.1-8b: 9,000 ") for line in lines)


def test_the_summary_states_each_workload_once_by_its_newest_fit_run():
    """Three VALID runs of one workload (the newest two contended) and one of another: two lines, the first the
    fit run's figure with how many runs it stands for; a one-seed time to accuracy is not called an olympic mean."""
    from accelbench.report.common import ReportInput
    from accelbench.report.inference import headlines
    from accelbench.report.tta import headlines as tta_headlines
    from accelbench.results.record import Metric, Result

    def served(value: float, day: int, model: str = "resnet18", contended: bool = False) -> Result:
        r = Result(
            "infer/loadgen",
            {"model": model, "scenario": "offline"},
            metrics={"throughput": Metric(value=value, unit="samples/s", higher_is_better=True)},
            primary_metric="throughput",
            valid=True,
            started_at=f"2026-11-0{day}T00:00:00.000+00:00",
            concerns=[Concern("contended", "contended: other processes used 50% of the CPUs")] if contended else [],
        )
        r.system = {"fingerprint": "sys-a", "profile": {"cpu": {"model": "CPU"}, "accelerators": []}}
        return r

    recs = [served(100.0, 1), served(3.0, 2, contended=True), served(4.0, 3, contended=True), served(50.0, 1, "bert")]
    inp = ReportInput(recs)
    lines = headlines(inp, recs)
    assert len(lines) == 2, lines
    assert ": 100.0 samples/s, VALID" in lines[0] and lines[0].endswith("(the newest fit to compare of 3 runs).")
    assert "contended" not in lines[0] and "of 3 runs" not in lines[1]
    one = Result("tta/time_to_target", {"workload": "digits"}, primary_metric="time_to_target_seconds",
                 metrics={"time_to_target_seconds": Metric(value=0.551, unit="s", higher_is_better=False)},
                 details={"score": {"runs": 1}})  # fmt: skip
    one.system = recs[0].system
    [line] = tta_headlines(ReportInput([one]), [one])
    assert "(one seed)" in line and "olympic" not in line
