"""One HTML file that opens anywhere: no script, no font, no request; charts are inlined SVG images."""

from __future__ import annotations

import base64
from html import escape
from typing import Callable

from accelbench import __version__
from accelbench.report.model import Block, Bullets, Cell, Chart, Document, Section, Table, Text

CSS = """
:root { --fg: #1b1f24; --muted: #5b6470; --line: #d8dde3; --good: #0a7d55; --bad: #b3261e; --warn: #8a5a00; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       margin: 0 auto; max-width: 1180px; padding: 1.2rem 1.5rem 3rem; }
h1 { font-size: 1.6rem; margin: 0 0 .2rem; } h2 { font-size: 1.25rem; margin: 2rem 0 .5rem;
  border-bottom: 2px solid var(--line); padding-bottom: .2rem; } h3 { font-size: 1.05rem; margin: 1.3rem 0 .4rem; }
.subtitle, .note, caption { color: var(--muted); } .note { font-size: .92em; }
.warn { color: var(--warn); font-weight: 600; }
nav { margin: .8rem 0 1rem; font-size: .95em; } nav a { margin-right: .9rem; }
.tablewrap { overflow-x: auto; margin: .5rem 0 1rem; }
table { border-collapse: collapse; font-size: .9em; min-width: 40%; }
caption { caption-side: bottom; text-align: left; font-size: .9em; padding-top: .3rem; }
th, td { border-bottom: 1px solid var(--line); padding: .28rem .6rem; text-align: left; vertical-align: top; }
th { background: #f3f5f7; white-space: nowrap; } td.num { text-align: right; white-space: nowrap; }
td.good { color: var(--good); font-weight: 600; } td.bad { color: var(--bad); font-weight: 600; }
td.warn { color: var(--warn); } td:first-child { min-width: 12em; } td.long { min-width: 24em; }
figure { margin: .8rem 0 1.2rem; break-inside: avoid; } figure img { max-width: 100%; height: auto; }
figcaption { color: var(--muted); font-size: .9em; }
pre { background: #f6f8fa; padding: .6rem; overflow-x: auto; font-size: .85em; }
#inference-tokens th { white-space: normal; vertical-align: bottom; min-width: 4.5em; }
#inference-tokens td:first-child { min-width: 8em; } #inference-tokens td.long { min-width: 16em; }
#inference-tokens td[title] { text-decoration: underline dotted var(--muted); cursor: help; }
#inference-tokens ul.note { color: var(--muted); font-size: .88em; margin: -.6rem 0 1rem; padding-left: 1.2rem; }
footer { margin-top: 2.5rem; color: var(--muted); font-size: .85em; }
@media print { body { max-width: none; padding: 0; font-size: 11px; } nav { display: none; }
  h2 { break-after: avoid; } table, figure { break-inside: avoid; } }
"""


_NUMERIC_START = set("0123456789+-±$.")
#: a text cell this long keeps a readable width: a wide table scrolls sideways rather than squeeze it to a word
#: a line (a column of reasons beside a dozen figures)
LONG_CELL = 60


def _cell(c: str | Cell, numeric: bool) -> str:
    """A cell; one that shows a short label carries the whole as its tooltip (a ``title`` of its own)."""
    text, mark = (c.text, c.mark) if isinstance(c, Cell) else (c, "")
    numeric = numeric and text[:1] in _NUMERIC_START  # a reason in a figure's column reads as text
    long = not numeric and len(text) > LONG_CELL
    cls = " ".join(x for x in (mark, "num" if numeric else "", "long" if long else "") if x)
    title = str(getattr(c, "title", "") or "") if isinstance(c, Cell) else ""
    attrs = (f' class="{cls}"' if cls else "") + (f' title="{escape(title)}"' if title and title != text else "")
    return f"<td{attrs}>{escape(text)}</td>"


def _table(t: Table) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in t.columns)
    body = "".join("<tr>" + "".join(_cell(c, i in t.numeric) for i, c in enumerate(row)) + "</tr>" for row in t.rows)
    caption = f"<caption>{escape(t.caption)}</caption>" if t.caption else ""
    return f'<div class="tablewrap"><table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _block(b: Block, level: int, image: Callable[[Chart], bytes]) -> str:
    if isinstance(b, Section):
        return _section(b, level + 1, image)
    if isinstance(b, Table):
        return _table(b)
    if isinstance(b, Chart):
        data = base64.b64encode(image(b)).decode("ascii")
        return (
            f'<figure id="chart-{escape(b.name)}"><img src="data:image/svg+xml;base64,{data}" '
            f'alt="{escape(b.alt)}" width="{int(b.size[0] * 96)}" height="{int(b.size[1] * 96)}">'
            f"<figcaption>{escape(b.title)}: {escape(b.alt)}</figcaption></figure>"
        )
    if isinstance(b, Bullets):
        return f'<ul class="{b.kind}">' + "".join(f"<li>{escape(i)}</li>" for i in b.items) + "</ul>"
    assert isinstance(b, Text)
    if b.kind == "pre":
        return f"<pre>{escape(b.text)}</pre>"
    return f'<p class="{b.kind}">{escape(b.text)}</p>'


def _section(s: Section, level: int, image: Callable[[Chart], bytes]) -> str:
    inner = "".join(_block(b, level, image) for b in s.blocks)
    return f'<section id="{escape(s.id)}"><h{level}>{escape(s.title)}</h{level}>{inner}</section>'


def render(doc: Document, image: Callable[[Chart], bytes]) -> str:
    """The page; ``image`` renders a chart as SVG bytes (injected, so tests can count or fake drawing)."""
    nav = "".join(f'<a href="#{escape(s.id)}">{escape(s.title)}</a>' for s in doc.sections)
    body = "".join(_section(s, 2, image) for s in doc.sections)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; img-src data:; '
        "style-src 'unsafe-inline'\">"
        f"<title>{escape(doc.title)}</title><style>{CSS}</style></head><body>"
        f'<header><h1>{escape(doc.title)}</h1><div class="subtitle">{escape(doc.subtitle)}</div></header>'
        f"<nav>{nav}</nav><main>{body}</main>"
        f"<footer>Made by accelbench {escape(__version__)} on {escape(doc.generated_at)} from stored records "
        "only; rebuild it any time with 'accelbench report'.</footer></body></html>\n"
    )
