"""``accelbench report``: the stored records as an HTML page and a Markdown file a person can hand on."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from accelbench.cli import args as a
from accelbench.registry import default_params, describe_params
from accelbench.results.store import Store


def register(sub: Any) -> None:
    rep = sub.add_parser(
        "report",
        help="an HTML page and a Markdown file with charts, from stored results",
        description=description(),
    )
    rep.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="runs to cover (any unique part of the id)")
    a.add_pairs(rep, "--tag", "only records with this tag (repeatable); alone, searches every run")
    rep.add_argument("--last", type=a.positive_int, metavar="N", help="the last N runs")
    rep.add_argument("--all", action="store_true", help="every record in the store")
    rep.add_argument(
        "-o",
        "--out",
        default="accelbench-report",
        metavar="DIR",
        help="folder to write into (default ./accelbench-report)",
    )
    rep.add_argument(
        "--format", default="html,md", metavar="html,md", help="which files: html, md or both (default html,md)"
    )
    rep.add_argument("--title", default="accelbench report", help="the report's heading")
    a.add_store_option(rep)
    rep.set_defaults(handler=cmd_report)


def description() -> str:
    """The report's sections in ``--help``: each known family's with a section (a registered family's too) by its
    title, in the report's order, so a new family's section is never missing from the list."""
    from accelbench.families import families

    own = ", ".join(f.title for f in families() if f.report is not None)
    return (
        "Builds report.html (one self-contained file: charts inlined, no network needed) and report.md "
        "(charts as PNG files in report_files/) from stored records only. Sections appear when there is "
        f"data for them: summary, machines, one for each kind of benchmark ({own}), published systems beside "
        "yours, comparisons between systems or tag groups, and history. Without RUN_ID, --last or --all: the "
        "latest run."
    )


def cmd_report(ns: argparse.Namespace) -> int:
    from accelbench.report import build, write
    from accelbench.report.select import from_store
    from accelbench.report.write import check_writable, parse_formats

    formats = parse_formats(ns.format)  # before anything is read: bad input is one line, at once
    store = Store(ns.db, readonly=True)
    inp = from_store(
        store,
        ns.run_ids,
        tags=dict(ns.tag),
        last=ns.last,
        everything=ns.all,
        describe=describe_params,
        title=ns.title,
        defaults=default_params,
    )
    check_writable(Path(ns.out))  # before drawing: a bad folder is one line, at once
    sys.stderr.write(f"report: {len(inp.records)} records, drawing charts ...\n")
    doc = build(inp, defaults=default_params)
    for path in write(doc, ns.out, formats):
        sys.stdout.write(f"{path}\n")
    return 0
