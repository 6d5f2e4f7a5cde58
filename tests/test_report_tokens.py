"""The report on language-model serving runs: their own table (never mixed into samples/s columns), with what a
reader of LLM serving results weighs, in the HTML page (in a real browser) and the Markdown beside it.

The records are real runs (tests/data/tokens_runs.json, see its 'about'); the per-dollar and per-joule figures are
derived onto them here as the runner derives them (cost.figures), with a metered 40 W window where this VM can
read no energy counter.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from browser import Browser, chromium

from accelbench.cli.main import main
from accelbench.cost import figures
from accelbench.cost.price import Price
from accelbench.registry import describe_params
from accelbench.report.build import build
from accelbench.report.common import ReportInput
from accelbench.report.markdown import render
from accelbench.report.model import Bullets, Section, Table
from accelbench.report.tokens import headline, is_token_run
from accelbench.report.tokens_names import limits
from accelbench.results.record import Result
from accelbench.results.store import RunInfo, Store

DATA = Path(__file__).parent / "data"
#: the runner's basis for an inference record's per-dollar and per-joule figures, tokens/s included
BASIS = ("throughput", "queries_per_second", "tokens_per_second")
WATTS = 40.0


def token_records() -> dict[str, Result]:
    """The real token runs, each priced (its own system.price) and metered as the runner would."""
    doc = json.loads((DATA / "tokens_runs.json").read_text())
    out = {}
    for name, d in doc["records"].items():
        r = Result.from_dict(d)
        r.tags = {}  # the fixture's names: not tag groups for the report to compare
        if r.status == "ok":
            seconds = float(r.conditions["wall_seconds"])
            r.conditions["energy"] = {"joules": WATTS * seconds, "seconds": seconds}
            r.metrics |= figures.energy(r, BASIS)
            r.metrics |= figures.priced(r, BASIS, Price.from_dict(r.system["price"]))
        out[name] = r
    return out


def samples_record() -> Result:
    """A samples/s record (resnet18 Offline) from the report's own fixture, as if measured on the token runs'
    machine: it must stay in its own table."""
    doc = json.loads((DATA / "report_store.json").read_text())
    d = next(
        d for d in doc["records"] if d["params"].get("scenario") == "offline" and d["benchmark"].startswith("infer")
    )
    d["system"] = json.loads((DATA / "tokens_runs.json").read_text())["records"]["offline"]["system"]
    d["tags"] = {}
    return Result.from_dict(d)


def _rows(section: Section) -> list[list[str]]:
    return [[str(getattr(c, "text", c)) for c in row] for b in section.blocks if isinstance(b, Table) for row in b.rows]


def _table(t: Table) -> list[dict[str, str]]:
    """Each row of ``t`` by its columns' names."""
    return [dict(zip(t.columns, row, strict=True)) for row in _rows(Section("", "", [t]))]


def _find(sections: list, sid: str) -> Section:
    for s in sections:
        if isinstance(s, Section):
            if s.id == sid:
                return s
            found = _find(s.blocks, sid)
            if found is not None:
                return found
    return None  # type: ignore[return-value]


def test_token_runs_have_their_own_table_with_what_an_llm_serving_reader_weighs() -> None:
    recs = token_records()
    doc = build(ReportInput([*recs.values(), samples_record()], describe=describe_params))
    tokens = _find(doc.sections, "inference-tokens")
    head, serving, machine, submission = [b for b in tokens.blocks if isinstance(b, Table)]
    assert submission.columns[-4:] == ["profile", "round", "LoadGen", "submission"]
    # at a glance: the rate, the p99 latencies against their limits, the verdict; each run's notes numbered under it
    assert head.columns == ["workload", "verdict", "output tokens/s", "TTFT p99 / limit", "TPOT p99 / limit", "note"]
    assert serving.columns == ["workload", "requests/s", "tokens/s per user", "ITL p99", "goodput tokens/s"]
    assert machine.columns == ["workload", "USD per 1M output tokens", "USD per 1M input tokens", "J per output token"]
    rows = _table(head)
    assert len(rows) == len(recs)  # every token run, the skipped one too, and nothing else
    server = recs["server"]
    at = next(i for i, v in enumerate(rows) if v["TTFT p99 / limit"] == "11.5 s / 2,000 ms")
    row = rows[at]
    assert (
        row["verdict"] == "INVALID"
        and row["output tokens/s"] == "117.3"
        and row["TPOT p99 / limit"] == "368 ms / 100 ms"
    )
    assert [c.mark for c in head.rows[at][3:5]] == ["bad", "bad"]  # over its limits: marked so
    notes = next(b for b in tokens.blocks if isinstance(b, Bullets)).items
    first = int(row["note"].split()[0].strip("[]"))
    assert notes[first - 1].startswith(f"[{first}] TTFT constraint not met (LoadGen)")  # LoadGen's verdict in its words
    label = row["workload"]  # the figures' tables name the run as the headline table does
    figures = next(v for v in _table(serving) if v["workload"] == label)
    assert figures["tokens/s per user"] == "35.87" and figures["ITL p99"] == "381 ms"
    assert figures["goodput tokens/s"] == "47.32" and figures["requests/s"] == "19.60"
    costs = next(v for v in _table(machine) if v["workload"] == label)
    tps = server.metrics["tokens_per_second"].value
    assert costs["USD per 1M output tokens"] == f"${2.5 / 3600 / tps * 1e6:.3g}"
    inputs = tps * server.details["input_tokens"] / server.details["output_tokens"]
    assert costs["USD per 1M input tokens"] == f"${2.5 / 3600 / inputs * 1e6:.3g}"
    assert costs["J per output token"] == f"{WATTS / tps:.3g} at 40.0 W"
    tight = next(v for v in rows if v["TTFT p99 / limit"] == "46.7 ms / 5 ms")
    assert tight["TPOT p99 / limit"] == "4.08 ms / 0.5 ms" and tight["verdict"] == "INVALID"
    skipped = next(v for v in rows if "405b" in v["workload"])
    assert skipped["verdict"] == "skipped" and skipped["output tokens/s"] == ""
    assert any("needs 1511.9 GiB" in n for n in notes)  # why it was skipped: its note
    assert (
        "2,000 / 100 ms (mlperf.conf llama3_1-8b Server)" in head.caption and "--ttft-ms and --tpot-ms" in head.caption
    )
    assert "Priced at $2.5/h (--price-per-hour 2.5)" in machine.caption and "not wall power" in machine.caption
    # the samples/s tables hold the samples record only
    offline = _find(doc.sections, "inference-offline")
    assert [r[0] for r in _rows(offline)] == [describe_params("infer/loadgen", samples_record().params)]
    assert _find(doc.sections, "inference-server") is None and _find(doc.sections, "inference-other") is None
    assert any(b.name == "tokens-tradeoff" for b in tokens.blocks if hasattr(b, "name"))
    summary = render(doc, lambda chart: chart.name)
    # the VALID Offline runs headline the summary; these real runs shared the VM, which the line says
    assert "output tokens/s, VALID (contended: read with care)." in summary


def test_a_token_run_is_told_by_its_family_and_mode() -> None:
    """A language model's serving runs are the serving family's, whatever their figures (the skipped one has none)
    and however old (an infer/loadgen record of a decoder is upgraded to infer/llm on read); an image model's are
    inference's. Of the family's, those with a rate to read are the token table's."""
    from accelbench.families import family_of
    from accelbench.families.builtin import INFER, SERVE

    recs = token_records()
    assert all(family_of(r.benchmark) is SERVE and is_token_run(r) for r in recs.values())
    assert family_of(samples_record().benchmark) is INFER
    accuracy = recs["offline"]
    accuracy.params = accuracy.params | {"mode": "accuracy"}  # a quality, not a rate: in its scenario's table
    assert not is_token_run(accuracy)
    assert limits(recs["offline"]) == ("", "")  # Offline: LoadGen holds no token latency
    assert headline(recs["server"]) == ", TTFT p99 11.5 s, TPOT p99 368 ms" and headline(recs["offline"]) == ""
    assert limits(recs["interactive"]) == ("500 / 30 ms", "mlperf.conf llama3_1-8b-interactive Server")


@pytest.fixture(scope="module")
def token_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``accelbench report --all`` on a store of the token runs and one samples/s run; two Server runs of one
    workload tagged box=a and box=b, for the report to compare."""
    tmp = tmp_path_factory.mktemp("tokens")
    runs = token_records()
    runs["server"].tags, runs["server_again"].tags = {"box": "a"}, {"box": "b"}
    recs = [*runs.values(), samples_record()]
    with Store(tmp / "store.db") as store:
        for run in sorted({r.run_id for r in recs}):
            fp = next(r.fingerprint for r in recs if r.run_id == run)
            store.add_run(RunInfo(run, "2026-11-24T04:20:00", "fixture", {}, fp, {}))
        store.add_many(recs)
    out = tmp / "r"
    assert main(["report", "--all", "--db", str(tmp / "store.db"), "-o", str(out)]) == 0
    return out


@pytest.mark.skipif(chromium() is None, reason="no chromium here (.ci/run installs Debian's chromium)")
def test_the_html_report_shows_the_token_table_and_its_chart_in_a_browser(token_report: Path) -> None:
    with Browser(chromium()) as browser:  # type: ignore[arg-type]
        tab = browser.open((token_report / "report.html").as_uri())
        head = browser.evaluate(
            tab, "[...document.querySelectorAll('#inference-tokens th')].map(th => th.innerText.trim())"
        )
        cells = browser.evaluate(
            tab, "[...document.querySelectorAll('#inference-tokens td')].map(td => td.innerText.trim())"
        )
        compared = browser.evaluate(
            tab, "[...document.querySelectorAll('#comparisons th')].map(th => th.innerText.trim())"
        )
        images = browser.evaluate(
            tab,
            "[...document.querySelectorAll('#inference-tokens img')].map(i => [i.complete, i.naturalWidth, "
            "i.getBoundingClientRect().width])",
        )
        assert browser.errors() == []
        assert [u for u in browser.requests() if not u.startswith(("file:", "data:"))] == []
    assert head[:6] == ["workload", "verdict", "output tokens/s", "TTFT p99 / limit", "TPOT p99 / limit", "note"]
    assert {"requests/s", "tokens/s per user", "J per output token", "USD per 1M input tokens"} <= set(head)
    assert "11.5 s / 2,000 ms" in cells and "178 ms / 30 ms" in cells and "INVALID" in cells
    assert compared[:3] == ["workload", "metric", "box=a"] and "TTFT p99 (box=a -> box=b)" in compared
    assert images and all(done and natural > 0 and width > 0 for done, natural, width in images)


def test_the_markdown_report_has_the_token_table(token_report: Path) -> None:
    md = (token_report / "report.md").read_text()
    assert "### Language models" in md
    start = "| workload | verdict | output tokens/s"
    header = next(line for line in md.splitlines() if line.startswith(start))
    assert "| TTFT p99 / limit | TPOT p99 / limit | note |" in header
    tokens_part = md[md.index("### Language models") :]
    assert re.search(r"\| \*\*11\.5 s / 2,000 ms\*\* \|", tokens_part) and "| USD per 1M input tokens |" in tokens_part
    compared = md[md.index("## Comparisons") :]
    assert "| 11.5 s -&gt; 11.1 s |" in compared and "| 368 ms -&gt; 278 ms |" in compared  # TTFT, TPOT beside
    assert "not judged: unlike loads; baseline INVALID" in compared  # each Server run chose its own load
    images = re.findall(r"!\[[^\]]*\]\(([^)]+tokens-tradeoff[^)]*)\)", md)
    assert images and (token_report / images[0]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _sent_short(r: Result) -> Result:
    """``r`` again, as a run that sent shorter prompts and answers than it asked (its lengths-differ concern)."""
    short = Result.from_dict(r.to_dict())
    short.id, short.run_id = r.id + "x", r.run_id + "x"
    asked_in, asked_out = r.params["input_tokens"], r.params["output_tokens"]
    short.concern(
        "lengths-differ",
        f"lengths differ: asked {asked_in}/{asked_out} tokens, sent answers of 30.2 tokens on average",
        asked_in=asked_in, asked_out=asked_out, mean_in=113.4, mean_out=30.2, ignore_eos=False,
    )
    return short


def test_a_run_that_sent_other_lengths_stands_apart_in_the_summary_and_the_charts() -> None:
    """Two VALID runs of one label, one of which sent shorter prompts and answers than asked: the summary states
    both, the short one saying what it sent, and the trade-off chart draws two such runs as two series."""
    from accelbench.families.builtin import SERVE
    from accelbench.report.common import hook
    from accelbench.report.tokens_charts import tradeoff

    exact = token_records()["offline"]
    short = _sent_short(exact)
    assert SERVE.headline is not None
    lines = hook(SERVE.headline)(ReportInput([exact, short], describe=describe_params), [exact, short])
    assert len(lines) == 2, lines  # pooled, they would be one line "of 2 runs"
    assert all(line.startswith("Language-model serving, ") for line in lines)  # the family's own words
    assert sum("(sent 113/30.2 tokens a request)" in line for line in lines) == 1
    assert not any("of 2 runs" in line for line in lines)
    server = token_records()["server"]
    chart = tradeoff([server, _sent_short(server)], {})
    assert chart is not None and "2 runs of 2 series" in chart.alt, chart and chart.alt
