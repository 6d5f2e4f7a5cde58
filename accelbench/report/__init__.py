"""Reports a person reads: one self-contained HTML page and a Markdown file with its charts.

A report is built from stored records only (never a family's code), so it can be rebuilt any time, on
another machine, from imported run folders. :func:`build` turns records into a format-neutral
:class:`~accelbench.report.model.Document`; :func:`write` renders it as HTML and/or Markdown.
"""

from accelbench.report.build import ReportInput, build
from accelbench.report.write import FORMATS, write

__all__ = ["FORMATS", "ReportInput", "build", "write"]
