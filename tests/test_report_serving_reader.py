"""The report's language-model section as a reader sees it, in a real browser at 1,280 and 1,920 px: every figure
of its tables without a sideways scroll, rows no taller than their words, workloads named by what sets them apart
(the whole name a tooltip), chart panels whose titles and labels fit, a turn chart that claims a trend only where
its turns show one, and an endpoint's run set beside published systems as the server that served it.

The records are real: the token runs of tests/data/tokens_runs.json (priced and metered as the runner derives it,
tests/test_report_tokens.py), every LLM fixture of tests/data/records, and the conversation fixture's record as an
endpoint run of 6 users whose first turn was the burst of their first requests (the turns a `transformers serve`
of a tiny model gave: turn 1's median 412 ms, the later turns flat near 150 ms). The page is built once by
``accelbench report --all`` and measured from its element boxes (DevTools' Runtime.evaluate).
"""

from __future__ import annotations

import base64
import copy
import json
import re
from html import unescape
from pathlib import Path

import pytest
from browser import Browser, chromium
from test_report_tokens import token_records

from accelbench.cli.main import main
from accelbench.reference.match import matches
from accelbench.report.charts_tokens import Turn
from accelbench.report.published import differs, serving_system
from accelbench.report.tokens_names import shorten
from accelbench.report.tokens_sources import growth, later_slope
from accelbench.results.record import Result, new_id
from accelbench.results.store import RunInfo, Store

RECORDS = Path(__file__).parent / "data" / "records"
CONVERSATIONS = json.loads((RECORDS / "llm_conversations.json").read_text())["records"][0]
#: the served model's folder as `transformers serve` names it: a full local path
SERVED = "/home/user/models/tiny-llama-wordlevel"
URL = "http://127.0.0.1:8000/v1"
#: (turn, mean prompt tokens, TTFT p50 ms, TTFT p99 ms): all 6 users' first requests at once, then flat
BURST = ((1, 32, 412.0, 640.0), (2, 72, 151.0, 210.0), (3, 112, 150.0, 220.0), (4, 152, 153.0, 230.0),
         (5, 192, 149.0, 228.0), (6, 232, 152.0, 240.0))  # fmt: skip
#: the widths a reader's screen has (a laptop, a desktop)
WIDTHS = (1280, 1920)
SECTION = "#inference-tokens"


def endpoint_run(server: str = "") -> Result:
    """The conversation fixture's record as a 6-user endpoint run against a local server of ``SERVED``, its turns
    :data:`BURST` and its record's own slope over every turn (the first's fall included), as the driver writes it."""
    d = copy.deepcopy(CONVERSATIONS)
    d["params"] |= {"engine": "endpoint", "url": URL, "served_model": SERVED, "precision": "unstated",
                    "device": "server", "tokenizer": SERVED, "turns": 6}  # fmt: skip
    d["details"]["turns"] = [
        {"turn": t, "requests": 38, "prompt_tokens_mean": tokens, "ttft_p50_ms": p50, "ttft_p99_ms": p99}
        for t, tokens, p50, p99 in BURST
    ]
    d["details"]["driver"] |= {"users": 6}
    d["details"]["engine"] = {"engine": "endpoint", "url": URL, "served_model": SERVED, "api": "chat"}
    if server:
        d["details"]["engine"]["server"] = server
    d["metrics"]["ttft_growth_ms_per_turn"]["value"] = -35.2  # over all six turns: the burst's fall
    d["id"], d["run_id"], d["tags"] = new_id(), "20261203-000100-0001", {}
    return Result.from_dict(d)


def records() -> list[Result]:
    out = list(token_records().values())
    for path in sorted(RECORDS.glob("llm_*.json")):
        for d in json.loads(path.read_text())["records"]:
            d["tags"] = {}
            out.append(Result.from_dict(d))
    return [*out, endpoint_run()]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("reader")
    recs = records()
    with Store(tmp / "store.db") as store:
        for run in sorted({r.run_id for r in recs}):
            r = next(r for r in recs if r.run_id == run)
            store.add_run(RunInfo(run, r.started_at[:19], "fixture", {}, r.fingerprint, {}))
        store.add_many(recs)
    assert main(["report", "--all", "--db", str(tmp / "store.db"), "-o", str(tmp / "r")]) == 0
    return tmp / "r" / "report.html"


#: per table of the section: its wrapper's scroll and client widths, and each row's height over the line height
TABLES = f"""[...document.querySelectorAll('{SECTION} .tablewrap')].map(w => {{
  const line = parseFloat(getComputedStyle(w.querySelector('td')).lineHeight);
  const right = w.getBoundingClientRect().right;
  return {{head: [...w.querySelectorAll('th')].map(th => th.innerText.trim()),
    scroll: w.scrollWidth, client: w.clientWidth,
    past: [...w.querySelectorAll('td')].filter(td => td.getBoundingClientRect().right > right + 0.5)
      .map(td => td.innerText),
    lines: [...w.querySelectorAll('tbody tr')].map(tr => tr.getBoundingClientRect().height / line),
    workloads: [...w.querySelectorAll('td[title]')].map(td => [td.innerText, td.title,
      td.getBoundingClientRect().height / line])}};
}})"""


@pytest.mark.skipif(chromium() is None, reason="no chromium here (.ci/run installs Debian's chromium)")
def test_every_serving_figure_shows_without_a_sideways_scroll(page: Path, tmp_path: Path) -> None:
    for width in WIDTHS:
        with Browser(chromium(), width=width, height=1000) as browser:  # type: ignore[arg-type]
            tab = browser.open(page.as_uri())
            tables = browser.evaluate(tab, TABLES)
            shot = browser.screenshot(tab)
            assert browser.errors() == []
        (tmp_path / f"report-{width}.png").write_bytes(shot)
        assert shot[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(shot[16:20], "big") == width
        head = tables[0]["head"]
        assert head == [
            "system",
            "workload",
            "verdict",
            "output tokens/s",
            "TTFT p99 / limit",
            "TPOT p99 / limit",
            "note",
        ]
        for t in tables:
            assert t["scroll"] <= t["client"], (width, t["head"], t["scroll"], t["client"])
            assert t["past"] == [], (width, t["head"])
            # a row is as tall as its longest cell's words: no cell pads it to a tall empty block
            assert max(t["lines"]) < 3.6, (width, t["head"], t["lines"])
            for text, _, lines in t["workloads"]:
                assert lines < 2.6, (width, text)  # a workload reads in two lines at most
                assert SERVED not in text and "unstated" not in text  # the whole name is the tooltip
        assert len(tables) >= 4, [t["head"] for t in tables]  # the headline, its figures (2), the sources'
        [endpoint] = [w for w in tables[0]["workloads"] if "tiny-llama-wordlevel" in w[0]]
        assert SERVED in endpoint[1] and endpoint[0].startswith("llama3.1-8b server endpoint serving tiny-llama")


def _svgs(page: Path) -> dict[str, str]:
    """The section's charts: each one's name and SVG."""
    html = page.read_text()
    part = html[html.index('id="inference-tokens"') : html.index('id="published"')]
    found = re.findall(r'<figure id="chart-([^"]+)"><img src="data:image/svg\+xml;base64,([^"]+)"', part)
    return {name: base64.b64decode(data).decode() for name, data in found}


#: every string matplotlib drew (the comment before its glyphs) and its box as rendered, in the SVG's own units
TEXTS = """(() => { const out = []; const w = document.createTreeWalker(document, NodeFilter.SHOW_COMMENT);
  const svg = document.documentElement.getBoundingClientRect();
  while (w.nextNode()) { const g = w.currentNode.parentNode; if (!g.getBoundingClientRect) continue;
    const r = g.getBoundingClientRect(); if (!r.width) continue;
    out.push([w.currentNode.nodeValue.trim(), r.left - svg.left, r.top - svg.top, r.right - svg.left,
              r.bottom - svg.top]); }
  return [svg.width, svg.height, out]; })()"""


def _intersect(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@pytest.mark.skipif(chromium() is None, reason="no chromium here (.ci/run installs Debian's chromium)")
def test_chart_panel_titles_apart_and_every_label_inside_its_chart(page: Path, tmp_path: Path) -> None:
    svgs = _svgs(page)
    assert any(n.startswith("tokens-latency-served") for n in svgs) and {"tokens-turns-0", "tokens-turns-1"} <= set(
        svgs
    )
    with Browser(chromium(), width=1280, height=1000) as browser:  # type: ignore[arg-type]
        for name, svg in svgs.items():
            (tmp_path / f"{name}.svg").write_text(svg)
            tab = browser.open((tmp_path / f"{name}.svg").as_uri())
            width, height, texts = browser.evaluate(tab, TEXTS)
            assert texts, name
            for text, *box in texts:  # nothing cut off at an edge: a row label, a title, a legend entry
                assert box[0] >= -0.5 and box[1] >= -0.5 and box[2] <= width + 0.5 and box[3] <= height + 0.5, (
                    name,
                    text,
                    box,
                    (width, height),
                )
            titles = [box for text, *box in texts if text in ("TTFT", "TPOT")]
            if name.startswith("tokens-latency"):
                assert titles and not any(_intersect(a, b) for i, a in enumerate(titles) for b in titles[i + 1 :])


def _caption(page: Path, title: str) -> str:
    """The caption of the one turn chart whose title starts with ``title``."""
    found = re.findall(r'<figure id="chart-tokens-turns-\d">.*?<figcaption>(.*?)</figcaption>', page.read_text())
    [caption] = [c for c in map(unescape, found) if c.startswith(f"TTFT turn by turn: {title}")]
    return caption


def test_the_turn_chart_claims_a_trend_only_over_the_turns_after_the_burst(page: Path) -> None:
    caption = _caption(page, "llama3.1-8b server endpoint serving tiny-llama-wordlevel conversations of 6 turns")
    assert "Turn 1 (median 412 ms) is left out of the trend: the 6 users' first requests are sent at once" in caption
    assert "Over turns 2 to 6 the median TTFT shows no trend" in caption
    assert "falls" not in caption and "keeps it flat" not in caption and "prefix cache" not in caption
    # the 3-turn fixture: two turns after the first, through which any line fits
    short = _caption(page, "llama3.1-8b server static conversations of 3 turns")
    assert "No trend is stated: 2 turn(s) after the first, and a slope takes 3" in short and "grows" not in short


def test_a_trend_is_stated_where_the_later_turns_show_one() -> None:
    r = endpoint_run()
    rising = [Turn(1, 6, 32.0, 412.0, 640.0)] + [Turn(t, 6, 32.0 + 40 * t, 100.0 + 20 * t, 300.0) for t in (2, 3, 4)]
    slope, half, n = later_slope(rising) or (0.0, 0.0, 0)
    assert (slope, n) == (pytest.approx(20.0), 3) and half == pytest.approx(0.0, abs=1e-9)
    words = growth(r, rising)
    assert "Over turns 2 to 4 the median TTFT grows 20.0 ms a turn" in words and "from 112 to 192 tokens" in words
    assert "prefix cache that holds the history would save" in words
    falling = [Turn(t, 6, 32.0 * t, 500.0 - 30 * t + (t % 2), 600.0) for t in (1, 2, 3, 4, 5)]
    assert "falls" in growth(r, falling) and "prefix cache" not in growth(r, falling)
    noisy = [Turn(t, 6, 32.0 * t, v, 300.0) for t, v in ((1, 400.0), (2, 150.0), (3, 170.0), (4, 140.0), (5, 165.0))]
    assert "shows no trend" in growth(r, noisy)
    assert later_slope(rising[:3]) is None


def test_labels_lose_what_every_run_shares_never_half_a_phrase() -> None:
    names = [
        f"llama3.1-8b server endpoint serving {SERVED} conversations of 6 turns 72/8 tokens bs<=4 unstated quick tiny",
        "llama3.1-8b server static conversations of 3 turns 72/8 tokens bs<=4 fp32 quick tiny",
    ]
    shared, own, whole = shorten(names)
    assert shared == "llama3.1-8b server 72/8 tokens bs<=4 quick tiny"
    assert own == [
        "endpoint serving tiny-llama-wordlevel conversations of 6 turns",
        "static conversations of 3 turns fp32",
    ]
    assert whole == {"tiny-llama-wordlevel": SERVED}
    assert shorten(names[:1])[1] == [names[0].replace(SERVED, "tiny-llama-wordlevel").replace(" unstated", "")]


def test_an_endpoint_run_is_set_beside_published_systems_as_its_server(page: Path) -> None:
    for server, named in (
        ("", "the server at 127.0.0.1:8000"),
        ("transformers serve", "transformers serve at 127.0.0.1:8000"),
    ):
        r = endpoint_run(server)
        assert serving_system(r) == named
        found = matches(r)
        assert found
        for m in found:
            said = differs(m)
            assert said.startswith(f"{m.reference.framework} vs {named}") and "accelbench's" not in said.split(";")[0]
    html = unescape(page.read_text())
    part = html[html.index('id="published"') :]
    assert "served by the server at 127.0.0.1:8000, client on" in part
    assert "vs the server at 127.0.0.1:8000;" in part
    static = next(r for r in records() if r.params.get("engine") == "static")
    assert serving_system(static) == ""  # accelbench's own engine: its harness is the system
