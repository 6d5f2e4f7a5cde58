"""Render a Document to files: ``report.html`` (self-contained) and ``report.md`` with ``report_files/``."""

from __future__ import annotations

from pathlib import Path

import accelbench.report.charts as charts
import accelbench.report.html as html
import accelbench.report.markdown as markdown
from accelbench.errors import UsageError
from accelbench.report.model import Chart, Document

FORMATS = ("html", "md")


def parse_formats(text: str | tuple[str, ...]) -> tuple[str, ...]:
    """``"html,md"`` (or a tuple) as the formats to write; anything else is one line naming what is accepted."""
    formats = tuple(f.strip() for f in (text.split(",") if isinstance(text, str) else text) if f.strip())
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        shown = ", ".join(bad) or "(none)"
        raise UsageError(f"unknown report format {shown}: --format takes html and/or md, comma-separated")
    return formats


def check_writable(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".accelbench-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"cannot write the report to {out}: {exc.strerror or exc}; pick another -o DIR") from None


def write(doc: Document, out: str | Path, formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """The files written, HTML first. Each chart is drawn once, in the formats the files need."""
    formats = parse_formats(formats)
    out = Path(out)
    check_writable(out)
    written = []
    kinds = tuple(k for f, k in (("html", "svg"), ("md", "png")) if f in formats)
    drawn = dict(zip((c.name for c in doc.charts()), charts.render(doc.charts(), kinds), strict=True))
    if "html" in formats:
        path = out / "report.html"
        path.write_text(html.render(doc, lambda chart: drawn[chart.name]["svg"]), encoding="utf-8")
        written.append(path)
    if "md" in formats:
        files = out / "report_files"
        files.mkdir(exist_ok=True)

        def image(chart: Chart) -> str:
            (files / f"{chart.name}.png").write_bytes(drawn[chart.name]["png"])
            return f"report_files/{chart.name}.png"

        path = out / "report.md"
        path.write_text(markdown.render(doc, image), encoding="utf-8")
        written.append(path)
    return written
