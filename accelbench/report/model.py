"""The report as plain data, whatever it is rendered to: sections of text, tables and charts.

Section builders produce these and never format HTML or Markdown themselves, so that both renderers show
the same content and escaping lives in one place per format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence, Union

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class Cell:
    """A table cell with a judgement a reader should see at a glance (``good``, ``bad``, ``warn``)."""

    text: str
    mark: str = ""


@dataclass
class Table:
    columns: list[str]
    rows: Sequence[Sequence[str | Cell]]
    caption: str = ""
    #: columns holding numbers: right-aligned
    numeric: frozenset[int] = frozenset()


@dataclass
class Chart:
    """A figure drawn on demand: ``draw`` fills a matplotlib Figure from data captured at build time."""

    name: str  # a file stem, unique within the report
    title: str
    alt: str  # what the chart shows, in words (the image's alt text)
    draw: Callable[["Figure"], None]
    size: tuple[float, float] = (7.0, 3.6)


@dataclass
class Text:
    text: str
    #: "p", or "note" (method and sources), or "warn" (what a reader must not miss)
    kind: str = "p"


@dataclass
class Bullets:
    items: list[str]
    kind: str = "p"


Block = Union[Text, Bullets, Table, Chart, "Section"]


@dataclass
class Section:
    id: str
    title: str
    blocks: list[Block] = field(default_factory=list)

    def charts(self) -> list[Chart]:
        out: list[Chart] = []
        for b in self.blocks:
            if isinstance(b, Chart):
                out.append(b)
            elif isinstance(b, Section):
                out.extend(b.charts())
        return out


@dataclass
class Document:
    title: str
    subtitle: str
    generated_at: str
    sections: list[Section]

    def charts(self) -> list[Chart]:
        return [c for s in self.sections for c in s.charts()]
