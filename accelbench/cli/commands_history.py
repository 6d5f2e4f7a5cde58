"""``accelbench history``: one workload's figure across runs on each system, regressions flagged."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from accelbench.cli import args as a
from accelbench.cli.render import console
from accelbench.cli.render_trends import history_table
from accelbench.errors import UsageError
from accelbench.registry import default_params, describe_params, get
from accelbench.results.history import MAX_SPREAD, MIN_HISTORY, THRESHOLD, histories
from accelbench.results.judge import ALPHA
from accelbench.results.store import Store

#: Exit status of ``history --fail-on-regression`` when a regression is flagged (as a failed benchmark's).
EXIT_REGRESSION = 1


def register(sub: Any) -> None:
    hist = sub.add_parser(
        "history",
        help="a figure across runs on each system, with regressions and improvements flagged",
        description=(
            "One series per workload (the benchmark and the parameters that define it) and system fingerprint, "
            "oldest run first. Unlike compare, which pairs machines, a series keeps every setting that changes "
            "its figure (device and threads too) and ignores those that only change how long it was measured; "
            "series that would read alike are told apart by the settings that differ. A run is flagged when "
            f"its raw samples tell it apart from the earlier runs' (Mann-Whitney U, p < {ALPHA:g}; else the 95% "
            "intervals apart) and it differs from their median by more than their run-to-run spread and "
            f"--threshold, with at least {MIN_HISTORY} earlier runs since the last change; a series whose runs "
            f"scatter by more than {MAX_SPREAD:.0%} is reported unstable instead. Runs that were contended, noisy, "
            "INVALID or without an interval are shown with the reason, never judged and never part of another "
            "run's baseline."
        ),
    )
    hist.add_argument("benchmark", help="a benchmark name (see 'accelbench list'), e.g. kernels/gemm")
    a.add_pairs(hist, "--param", "only records with this parameter value (repeatable)")
    hist.add_argument("--metric", help="this metric instead of each record's primary one")
    hist.add_argument(
        "--threshold",
        type=float,
        default=THRESHOLD,
        metavar="F",
        help=f"smallest relative change flagged (default {THRESHOLD:g})",
    )
    hist.add_argument(
        "--fail-on-regression",
        action="store_true",
        help=f"exit {EXIT_REGRESSION} when a regression is flagged (for CI pipelines)",
    )
    hist.add_argument("--json", action="store_true", help="print the series as JSON")
    a.add_store_option(hist)
    hist.set_defaults(handler=cmd_history)


def cmd_history(ns: argparse.Namespace) -> int:
    get(ns.benchmark)  # an unknown name is one line with a suggestion
    if not 0 <= ns.threshold < 1:
        raise UsageError(f"--threshold is a fraction in [0, 1), got {ns.threshold:g}")
    wanted = dict(ns.param)
    store = Store(ns.db, readonly=True)
    records = [
        r
        for r in store.query(benchmark=ns.benchmark, status="ok")
        if all(str(r.params.get(k)) == v for k, v in wanted.items())
    ]
    if not records:
        where = f" with {', '.join(f'{k}={v}' for k, v in wanted.items())}" if wanted else ""
        raise UsageError(f"no ok results of {ns.benchmark}{where} in {store.path}; see 'accelbench results list'")
    series = histories(
        records, metric=ns.metric, describe=describe_params, threshold=ns.threshold, defaults=default_params
    )
    if ns.metric and not series:
        raise UsageError(f"no result of {ns.benchmark} has a metric {ns.metric!r}")
    if ns.json:
        sys.stdout.write(json.dumps([s.to_dict() for s in series], indent=2) + "\n")
    else:
        for s in series:
            console.print(history_table(s))
    regressed = any(s.regressions for s in series)
    return EXIT_REGRESSION if (regressed and ns.fail_on_regression) else 0
