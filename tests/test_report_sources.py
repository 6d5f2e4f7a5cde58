"""The report on what a token run's prompt source adds: a conversation run's TTFT turn by turn (a chart per run,
the growth the record states in its caption), the prefix cache's hit rate sent beside the one the server reported
('not reported' for an engine that counts none), a trace's offered load; and none of it for records without them.

The records are the llm_server fixture's real record (tests/data/records) with the details and metrics a
conversation, a prefix-sharing and a trace run carry, as the runner writes them (accelbench.serve.run and
replay); the report is rendered through ``accelbench report`` on a store and its HTML read, as
tests/test_report_llm.py reads it.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from accelbench.cli.main import main
from accelbench.registry import describe_params
from accelbench.report.build import build
from accelbench.report.charts_tokens import Turn
from accelbench.report.common import ReportInput
from accelbench.report.model import Section, Table
from accelbench.report.tokens_names import shorten
from accelbench.results.record import Metric, Result, new_id
from accelbench.results.store import RunInfo, Store

BASE = json.loads((Path(__file__).parent / "data" / "records" / "llm_server.json").read_text())["records"][0]
URL = "http://10.0.0.1:8000/v1"
#: (turn, mean prompt tokens, TTFT p50 ms, TTFT p99 ms): the history grows by 8 answer and 64 new tokens a turn
TURNS = ((1, 64.0, 8.2, 15.0), (2, 136.0, 11.4, 19.5), (3, 208.0, 14.9, 24.1), (4, 280.0, 17.6, 30.2))
#: the least-squares slope of the medians over the turns, as accelbench.serve.figures.ttft_growth gives it
GROWTH = 3.17
METHOD = "prompt tokens in whole blocks of 16 that an earlier request sent after the same beginning"
SERVED = "the server's usage.prompt_tokens_details.cached_tokens"
TRANSFORMERS = "not reported: the transformers engine reports no cached tokens"


def record(when: int, params: dict[str, Any], details: dict[str, Any], metrics: dict[str, tuple[float, str]]) -> Result:
    """The fixture's record as another run: its own run id and time, ``params`` and ``details`` over the
    fixture's, and ``metrics`` (name: value, unit) beside its own."""
    d = copy.deepcopy(BASE)
    d["params"] |= params
    d["details"] |= details
    d["id"], d["run_id"] = new_id(), f"20261203-{when:06d}-{when:04x}"
    d["started_at"] = f"2026-12-03T00:{when:02d}:00.000+00:00"
    d["ended_at"] = f"2026-12-03T00:{when:02d}:30.000+00:00"
    d["tags"] = {}
    r = Result.from_dict(d)
    for name, (value, unit) in metrics.items():
        r.metrics[name] = Metric(value=value, unit=unit, higher_is_better=not unit.startswith("ms"))
    return r


def sent(hit_rate: float) -> dict[str, Any]:
    """The prefix ledger's report (accelbench.serve.sources.prefix) of 1,000 prompt tokens sent."""
    return {"hit_rate": hit_rate, "cached_tokens": round(1000 * hit_rate), "prompt_tokens": 1000, "requests": 64,
            "block_tokens": 16, "method": METHOD}  # fmt: skip


def conversation() -> Result:
    """4-turn synthetic conversations through an endpoint whose server counts its cached tokens."""
    turns = [{"turn": t, "requests": 64, "prompt_tokens_mean": tokens, "ttft_p50_ms": p50, "ttft_p99_ms": p99}
             for t, tokens, p50, p99 in TURNS]  # fmt: skip
    served = {"hit_rate": 0.6051, "cached_tokens": 605, "prompt_tokens": 1000, "source": SERVED}
    return record(
        1,
        {"engine": "endpoint", "url": URL, "source": "conversations", "turns": 4, "input_tokens": 64},
        {
            "turns": turns,
            "driver": {"name": "accelbench replay", "users": 4, "think_ms": 0.0, "late_ms": 10.0, "late_requests": 0},
            "prompts": {"source": "conversations", "conversations": 64, "turns": 256},
            "prefix_cache": {"sent": sent(0.6214), "served": served},
        },
        {"ttft_growth_ms_per_turn": (GROWTH, "ms of median TTFT a turn")},
    )


def shared_prefix() -> Result:
    """Random prompts sharing a 512-token prefix, served by transformers, which counts no cached tokens."""
    return record(
        2,
        {"engine": "transformers", "source": "random", "prefix_tokens": 512, "input_tokens": 1024},
        {"prefix_cache": {"sent": sent(0.4402), "served": TRANSFORMERS}},
        {},
    )


def trace() -> Result:
    """A 60-row trace replayed at its timestamps: the load it offered, the driver's lateness."""
    return record(
        3,
        {"engine": "transformers", "source": "trace", "trace": "/data/arrivals.jsonl"},
        {
            "driver": {"name": "accelbench replay", "late_ms": 10.0, "late_requests": 2},
            "requests": 60,
            "prompts": {"source": "trace", "rows": 60},
            "prefix_cache": {"sent": sent(0.0), "served": TRANSFORMERS},
        },
        {
            "offered_requests_per_second": (29.81, "requests/s the trace offered"),
            "requests_per_second": (28.64, "requests/s answered"),
            "issue_late_p99_ms": (11.9, "ms"),
            "issue_late_max_ms": (13.2, "ms"),
        },
    )


def report(tmp: Path, recs: list[Result]) -> str:
    """``accelbench report --all`` on a store of ``recs``: the HTML page."""
    with Store(tmp / "store.db") as store:
        for r in recs:
            store.add_run(RunInfo(r.run_id, r.started_at[:19], "fixture", {}, r.fingerprint, {}))
        store.add_many(recs)
    assert main(["report", "--all", "--db", str(tmp / "store.db"), "-o", str(tmp / "r")]) == 0
    return (tmp / "r" / "report.html").read_text()


@pytest.fixture(scope="module")
def html(tmp_path_factory: pytest.TempPathFactory) -> str:
    return report(tmp_path_factory.mktemp("sources"), [conversation(), shared_prefix(), trace()])


def figure(page: str, name: str) -> tuple[str, list[str]]:
    """A chart's caption in the page, and the strings matplotlib drew in it (its SVG's text comments)."""
    found = re.findall(rf'<figure id="chart-{re.escape(name)}"><img src="data:image/svg\+xml;base64,([^"]+)".*?'
                       r"<figcaption>(.*?)</figcaption>", page)  # fmt: skip
    assert len(found) == 1, f"{name}: {len(found)} figures"
    svg = base64.b64decode(found[0][0]).decode()
    return unescape(found[0][1]), [unescape(t.strip()) for t in re.findall(r"<!-- (.*?) -->", svg, re.S)]


def table(page: str, header: str) -> list[dict[str, str]]:
    """The rows of the page's table with a column ``header``, each by its columns' names."""
    tables = [t for t in re.findall(r"<table>(.*?)</table>", page, re.S) if f"<th>{header}</th>" in t]
    assert len(tables) == 1, f"{header}: {len(tables)} tables"
    cols = [unescape(c) for c in re.findall(r"<th>(.*?)</th>", tables[0])]
    body = re.findall(r"<tr>(.*?)</tr>", tables[0].split("<tbody>")[1], re.S)
    cells = [[unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)] for row in body]
    return [dict(zip(cols, row, strict=True)) for row in cells]


def name(r: Result) -> str:
    return describe_params(r.benchmark, r.params)


def label(r: Result) -> str:
    """``r``'s workload as the report's tables and charts name it beside the other two sources' runs: what sets it
    apart (the words all three share said once, in the caption)."""
    names = [name(x) for x in (conversation(), shared_prefix(), trace())]
    return shorten(names)[1][names.index(name(r))]


def test_a_conversation_run_has_its_ttft_drawn_turn_by_turn_with_the_growth_it_records(html: str) -> None:
    caption, drawn = figure(html, "tokens-turns-0")
    assert caption.startswith(f"TTFT turn by turn: {label(conversation())}") and name(conversation()) in caption
    assert "of each of the 4 turns" in caption and "256 requests answered; 4 users, 0 ms think time" in caption
    # the slope over the turns after the first (the record's own, over every turn, is GROWTH)
    assert "Over turns 2 to 4 the median TTFT grows 3.10 ms a turn" in caption
    assert "as the history grows from 136 to 280 tokens" in caption and "prefix cache" in caption
    assert {"TTFT p50", "TTFT p99", "TTFT (ms)"} <= set(drawn)
    assert [t for t in drawn if t in {str(p50) for _, _, p50, _ in TURNS}] == ["8.2", "11.4", "14.9", "17.6"]
    # each turn's number, and under it its mean prompt tokens (a tick label's lines are drawn one by one)
    assert [t for t in drawn if t.endswith(" tok")] == [f"{tokens:,.0f} tok" for _, tokens, _, _ in TURNS]
    assert {str(turn) for turn, _, _, _ in TURNS} <= set(drawn)
    assert html.count('<figure id="chart-tokens-turns-') == 1  # the other runs have no turns


def test_the_prefix_cache_table_shows_the_hit_rate_sent_and_the_one_the_server_reported(html: str) -> None:
    rows = {row["workload"]: row for row in table(html, "hit rate sent")}
    assert set(rows) == {label(conversation()), label(shared_prefix()), label(trace())}
    talk = rows[label(conversation())]
    assert talk["source"] == "conversations" and talk["hit rate sent"] == "62.1%"
    assert talk["hit rate the server reported"] == "60.5%" and talk["reported - sent (points)"] == "-1.6"
    silent = rows[label(shared_prefix())]
    assert silent["source"] == "random" and silent["hit rate sent"] == "44.0%"
    assert silent["hit rate the server reported"] == "not reported" and silent["reported - sent (points)"] == ""
    assert rows[label(trace())]["hit rate sent"] == "0.0%"
    caption = re.search(r"<caption>([^<]*)</caption><thead><tr><th>workload</th><th>source</th>", html)
    assert caption is not None
    words = unescape(caption[1])
    assert METHOD in words and SERVED in words
    assert "Not reported: the transformers engine reports no cached tokens." in words  # why, said once


def test_a_trace_run_shows_the_load_it_offered_and_how_late_the_driver_sent_it(html: str) -> None:
    [row] = table(html, "offered requests/s")
    assert row["workload"] == label(trace()) and "trace arrivals.jsonl" in row["workload"]
    assert row["offered requests/s"] == "29.81" and row["served requests/s"] == "28.64"
    assert row["issue late p99"] == "11.9 ms" and row["issue late max"] == "13.2 ms"
    assert row["late requests"] == "2 of 60"
    assert "sent late (over 10 ms)" in html


def test_the_sources_have_a_sub_section_of_their_own_beside_the_token_runs_one_table() -> None:
    """The token runs' table stays the one table of their section (what the sources add is under it, apart)."""
    recs = [conversation(), shared_prefix(), trace()]
    doc = build(ReportInput(recs, describe=describe_params))
    [inference] = [s for s in doc.sections if s.id == "serving"]
    [tokens] = [b for b in inference.blocks if isinstance(b, Section) and b.id == "inference-tokens"]
    own_tables = [b for b in tokens.blocks if isinstance(b, Table)]  # the runs' headline and figures
    assert own_tables[0].columns[:2] == ["workload", "verdict"]
    assert not {"hit rate sent", "offered requests/s"} & {c for t in own_tables for c in t.columns}
    [own] = [b for b in tokens.blocks if isinstance(b, Section) and b.id == "inference-tokens-sources"]
    assert [len(t.rows) for t in own.blocks if isinstance(t, Table)] == [3, 1]  # the prefix cache's, the trace's
    [chart] = own.charts()
    assert chart.draw.keywords["turns"] == [  # type: ignore[attr-defined]
        Turn(turn, 64, tokens, p50, p99) for turn, tokens, p50, p99 in TURNS
    ]


def test_records_without_turns_or_a_prefix_cache_hit_add_neither(tmp_path: Path) -> None:
    """The fixture's record as it is, and one whose cache had nothing to serve and whose engine reported nothing:
    no chart, and no table of 0% and 'not reported'."""
    plain = record(4, {}, {}, {})
    nothing = record(5, {"engine": "transformers"}, {"prefix_cache": {"sent": sent(0.0), "served": TRANSFORMERS}}, {})
    page = report(tmp_path, [plain, nothing])
    assert 'id="inference-tokens-sources"' not in page
    assert "tokens-turns" not in page and "TTFT turn by turn" not in page
    assert "hit rate sent" not in page and "offered requests/s" not in page
    assert "<th>TTFT p99 / limit</th>" in page  # the token runs' own table is there
