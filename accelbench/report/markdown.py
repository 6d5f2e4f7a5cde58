"""The same content for a GitHub issue or pull request: tables, and charts as PNG files beside the text."""

from __future__ import annotations

from typing import Callable

from accelbench.report.model import Block, Bullets, Cell, Chart, Document, Section, Table, Text


def _md(text: str) -> str:
    """Text that Markdown shows as written: no HTML, no table breaks, no stray emphasis."""
    out = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")
    for ch in ("*", "_", "`", "["):
        out = out.replace(ch, "\\" + ch)
    return out.replace("\n", " ")


def _table(t: Table) -> str:
    def cell(c: str | Cell) -> str:
        text = _md(c.text if isinstance(c, Cell) else c)
        return f"**{text}**" if isinstance(c, Cell) and c.mark in ("good", "bad") and text else text

    lines = [
        "| " + " | ".join(_md(c) for c in t.columns) + " |",
        "|" + "|".join("---:" if i in t.numeric else "---" for i in range(len(t.columns))) + "|",
    ]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in t.rows]
    if t.caption:
        lines.append("")
        lines.append(f"_{_md(t.caption)}_")
    return "\n".join(lines)


def _block(b: Block, level: int, image: Callable[[Chart], str]) -> str:
    if isinstance(b, Section):
        return _section(b, level + 1, image)
    if isinstance(b, Table):
        return _table(b)
    if isinstance(b, Chart):
        return f"![{_md(b.alt)}]({image(b)})\n\n_{_md(b.title)}_"
    if isinstance(b, Bullets):
        return "\n".join(f"- {_md(i)}" for i in b.items)
    assert isinstance(b, Text)
    if b.kind == "pre":
        return "```\n" + b.text.replace("```", "'''") + "\n```"
    if b.kind == "warn":
        return f"**{_md(b.text)}**"
    if b.kind == "note":
        return f"> {_md(b.text)}"
    return _md(b.text)


def _section(s: Section, level: int, image: Callable[[Chart], str]) -> str:
    parts = [f"{'#' * level} {_md(s.title)}"] + [_block(b, level, image) for b in s.blocks]
    return "\n\n".join(parts)


def render(doc: Document, image: Callable[[Chart], str]) -> str:
    """The Markdown text; ``image`` writes a chart and returns its path relative to the file."""
    head = f"# {_md(doc.title)}\n\n{_md(doc.subtitle)}"
    body = "\n\n".join(_section(s, 2, image) for s in doc.sections)
    return f"{head}\n\n{body}\n\n---\n_Made by accelbench on {_md(doc.generated_at)} from stored records only._\n"
