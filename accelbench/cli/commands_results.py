"""Commands that read results: ``results list|show|runs|export|import|requests`` and ``compare``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.markup import escape

from accelbench import families
from accelbench.cli import args as a
from accelbench.cli.commands_reference import print_beside_references, print_published_ratios
from accelbench.cli.render import console, results_table
from accelbench.cli.render_trends import compare_table
from accelbench.errors import UsageError
from accelbench.registry import default_params, describe_params
from accelbench.results.compare import compare, nearest_difference
from accelbench.results.exchange import FORMATS, export, import_path
from accelbench.results.judge import ALPHA, IDENTITY_PARAMS, MIN_EFFECT_SINGLE, MIN_RUNS_BARE, MIN_SPREAD_RUNS
from accelbench.results.record import STATUSES
from accelbench.results.store import Store, select


def register(sub: Any) -> None:
    res = sub.add_parser(
        "results", help="list, show, export and import stored results", description="Read the results store."
    )
    res.set_defaults(help_parser=res)
    rsub = res.add_subparsers(dest="results_command", metavar="ACTION", parser_class=a.Parser)
    for add in (_add_list, _add_show, _add_runs, _add_export, _add_requests, _add_import):
        add(rsub)
    _add_compare(sub)


def _add_list(rsub: Any) -> None:
    ls = rsub.add_parser("list", help="one line per stored result", description="List stored results, oldest first.")
    _add_filters(ls)
    ls.add_argument("--limit", type=a.positive_int, metavar="N", help="only the N most recent")
    ls.add_argument("--json", action="store_true", help="print the records in full as a JSON array")
    ls.set_defaults(handler=cmd_list)


def _add_show(rsub: Any) -> None:
    show = rsub.add_parser(
        "show", help="one result in full (JSON)", description="Print one record, found by id or unique id prefix."
    )
    show.add_argument("id", help="result id or its unique prefix (see 'results list')")
    a.add_store_option(show)
    show.set_defaults(handler=cmd_show)


def _add_runs(rsub: Any) -> None:
    runs = rsub.add_parser("runs", help="the stored runs", description="List runs: id, when, command, result counts.")
    runs.add_argument("--json", action="store_true", help="print the runs as a JSON array")
    a.add_store_option(runs)
    runs.set_defaults(handler=cmd_runs)


def _add_export(rsub: Any) -> None:
    exp = rsub.add_parser(
        "export", help="write results as JSON, CSV or Markdown", description="Export results (all, or filtered)."
    )
    _add_filters(exp)
    exp.add_argument("--format", choices=FORMATS, default="json", help="output format (default json)")
    exp.add_argument("-o", "--output", type=Path, metavar="FILE", help="write to FILE instead of standard output")
    exp.set_defaults(handler=cmd_export)


def _add_requests(rsub: Any) -> None:
    req = rsub.add_parser(
        "requests",
        help="a language-model serving run's requests, one row each",
        description=(
            "Print the requests of a language-model serving record (infer/llm): when each was due and sent, its "
            "first token, TTFT and TPOT, its prompt and output tokens, and its status; under the table, the "
            "throughput and TTFT/TPOT/ITL percentiles computed again from the rows. Times are seconds from the "
            "run's start. RUN is a run id (or its unique prefix) or a run folder; a run of several such records "
            "needs --entry N."
        ),
    )
    req.add_argument("run", metavar="RUN", help="run id, its unique prefix, or a run folder")
    req.add_argument(
        "--entry", type=a.positive_int, metavar="N", help="the run's N-th language-model serving record (from 1)"
    )
    req.add_argument("--limit", type=a.positive_int, metavar="N", help="only the first N requests in the table")
    shape = req.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="print the meta, the recomputed figures and every row")
    shape.add_argument("--csv", action="store_true", help="print one CSV line a request (its gaps space-separated)")
    a.add_store_option(req)
    req.set_defaults(handler=cmd_requests)


def _add_import(rsub: Any) -> None:
    imp = rsub.add_parser(
        "import",
        help="merge a run folder or results file from another machine",
        description="Merge records made elsewhere into the local store; importing the same records twice adds nothing.",
    )
    imp.add_argument("path", type=Path, help="a run folder, a results.jsonl, or a JSON export")
    a.add_store_option(imp)
    imp.set_defaults(handler=cmd_import)


def _add_compare(sub: Any) -> None:
    cmp_ = sub.add_parser(
        "compare",
        help="ratios between two runs or tagged sets, with a noise-aware verdict",
        description=(
            "Pair the results of BASELINE and CANDIDATE by benchmark and workload parameters (where they ran, "
            "--device and --threads, and how long they measured are not part of the pairing; the workload says "
            "'(threads 2 -> 1)' where they differ), show each side's metric, the speedup (above 1: the candidate "
            "is better, for times as for rates) and a verdict.\n\n"
            "'not judged: REASON' when a side was contended (other processes or the hypervisor took CPU), "
            "noisy, INVALID, or too short for an interval, or when the two measured unlike things (other "
            "latency limits, request lengths, model definitions, or Server loads each chosen from its own probe): "
            "shown, never counted. 'faster'/'slower' "
            "('better'/'worse') when the raw samples of the two sides tell them apart (Mann-Whitney U, "
            f"p < {ALPHA:g}; the 95% intervals apart where records keep no samples; a figure with no interval "
            f"within a run, as LoadGen's, only with {MIN_RUNS_BARE} or more runs a side, all apart) AND the change "
            "exceeds the run-to-run spread of that workload on that system (repeats in the selection, e.g. from "
            f"'--repeat {MIN_SPREAD_RUNS}', or other runs in the store); where fewer than {MIN_SPREAD_RUNS} runs "
            f"measure that spread, a change must exceed {MIN_EFFECT_SINGLE:.0%} (asv's default). Otherwise "
            "'no difference'. The geometric mean counts judged pairs "
            "only; --json gives each row's evidence. Workloads measured more than once on a side are pooled "
            "as repeats; results without a partner are listed below the table.\n\nSelectors: a run id (or any "
            "unique part of it), or tag:KEY=VALUE (e.g. tag:gpu=v100; several as tag:a=1,b=2)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmp_.add_argument("baseline", help="run id or tag:KEY=VALUE")
    cmp_.add_argument("candidate", nargs="?", help="run id or tag:KEY=VALUE (not with --reference)")
    cmp_.add_argument(
        "--reference",
        action="store_true",
        help="put BASELINE's results beside the published ones of the same task and model (accelbench reference), "
        "per system, per device and per USD/h, with what differs in words",
    )
    cmp_.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="PARAM",
        help="also pair records that differ in PARAM (e.g. --ignore precision to compare fp16 with fp32)",
    )
    cmp_.add_argument("--metric", help="compare this metric instead of each benchmark's primary one (e.g. seconds)")
    cmp_.add_argument("--json", action="store_true", help="print the comparison as JSON")
    a.add_store_option(cmp_)
    cmp_.set_defaults(handler=cmd_compare)


def _add_filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", metavar="RUN_ID", help="only this run (id or unique prefix)")
    p.add_argument("--benchmark", metavar="NAME", help="only this benchmark, or a group such as 'kernels'")
    p.add_argument("--status", choices=STATUSES, help="only records with this status")
    a.add_pairs(p, "--tag", "only records with this tag (repeatable)")
    a.add_store_option(p)


def _store(ns: argparse.Namespace) -> Store:
    return Store(ns.db, readonly=True)


def _filtered(ns: argparse.Namespace) -> list[Any]:
    store = _store(ns)
    run_id = None
    if ns.run:
        run_id = store.resolve_run_id(ns.run)
        if run_id is None:
            raise UsageError(f"unknown run id {ns.run!r}; see 'accelbench results runs'")
    return store.query(run_id=run_id, benchmark=ns.benchmark, status=ns.status, tags=dict(ns.tag) or None)


def cmd_list(ns: argparse.Namespace) -> int:
    results = _filtered(ns)
    if ns.limit:
        results = results[-ns.limit :]
    if ns.json:
        sys.stdout.write(json.dumps([r.to_dict() for r in results], indent=2, sort_keys=True) + "\n")
        return 0
    if not results:
        console.print("no results match")
        return 0
    console.print(results_table(results, show_ids=True))
    return 0


def cmd_show(ns: argparse.Namespace) -> int:
    record = _store(ns).get(ns.id)
    sys.stdout.write(json.dumps(record.to_dict(), indent=2, sort_keys=True) + "\n")
    return 0


def cmd_runs(ns: argparse.Namespace) -> int:
    from rich.table import Table

    store = _store(ns)
    rows = []
    for run in store.runs():
        res = store.query(run_id=run.run_id)
        counts = {s: n for s in ("ok", "failed", "skipped") if (n := sum(r.status == s for r in res))}
        rows.append((run, counts))
    if ns.json:
        out = [
            {
                "run_id": run.run_id,
                "created_at": run.created_at,
                "command": run.command,
                "tags": run.tags,
                "fingerprint": run.fingerprint,
                "run_dir": run.run_dir,
                "counts": counts,
            }
            for run, counts in rows
        ]
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    table = Table()
    table.add_column("run", no_wrap=True)
    table.add_column("created", no_wrap=True)
    table.add_column("system", no_wrap=True)
    table.add_column("results", no_wrap=True)
    table.add_column("tags")
    table.add_column("command", overflow="fold")
    for run, counts in rows:
        text = ", ".join(f"{n} {s}" for s, n in counts.items())
        tags = " ".join(f"{k}={v}" for k, v in run.tags.items())
        command = run.command.removeprefix("accelbench ")
        table.add_row(
            run.run_id,
            run.created_at[:16].replace("T", " "),
            run.fingerprint[:8],
            text or "none",
            escape(tags),
            escape(command),
        )
    console.print(table)
    return 0


def cmd_export(ns: argparse.Namespace) -> int:
    results = _filtered(ns)
    runs = None
    if ns.format == "json":  # the runs travel with their records: an import keeps their command lines
        store = _store(ns)
        runs = [run for run_id in sorted({r.run_id for r in results}) if (run := store.get_run(run_id)) is not None]
    text = export(results, ns.format, describe_params, runs)
    if ns.output:
        try:
            ns.output.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {ns.output}: {exc.strerror}") from None
    else:
        sys.stdout.write(text)
    return 0


def cmd_import(ns: argparse.Namespace) -> int:
    store = Store(ns.db)
    new, present, notes = import_path(store, ns.path)
    for note in notes:
        print(note)
    print(f"imported {new} new result(s), {present} already present, into {store.path}")
    return 0


def _run_records(ns: argparse.Namespace) -> tuple[str, list[Any], Path | None]:
    """The run ``ns.run`` names (a run folder, else a stored run id): its name, its records, its folder."""
    from accelbench.results.record import Result

    folder = Path(ns.run).expanduser()
    if (folder / "results.jsonl").is_file():
        try:
            lines = (folder / "results.jsonl").read_text(encoding="utf-8").splitlines()
            records = [Result.from_json(line) for line in lines if line.strip()]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"cannot read {folder / 'results.jsonl'}: {exc}") from None
        return str(folder), records, folder
    if folder.is_dir():
        raise UsageError(f"{folder} is not a run folder (it has no results.jsonl)")
    store = _store(ns)
    run_id = store.resolve_run_id(ns.run)
    if run_id is None:
        raise UsageError(f"unknown run {ns.run!r}: give a run id (see 'accelbench results runs') or a run folder")
    info = store.get_run(run_id)
    run_dir = Path(info.run_dir) if info is not None and info.run_dir else None
    return run_id, store.query(run_id=run_id), run_dir


def cmd_requests(ns: argparse.Namespace) -> int:
    import csv

    from rich.table import Table

    from accelbench.cli.render_requests import summary_line, table_rows
    from accelbench.results.details import request_log_of
    from accelbench.serve import figures
    from accelbench.serve import requests as rq
    from accelbench.serve.limits import Limits

    name, records, run_dir = _run_records(ns)
    serve = families.builtin.SERVE
    served = [r for r in records if families.family_of(r.benchmark) is serve or "request_log" in r.details]
    if not served:
        raise UsageError(f"run {name} has no language-model serving record: no requests to show")
    if ns.entry is None and len(served) > 1:
        listed = ", ".join(f"--entry {n} ({describe_params(r.benchmark, r.params)})" for n, r in enumerate(served, 1))
        raise UsageError(f"run {name} has {len(served)} language-model serving records: {listed}")
    if ns.entry is not None and ns.entry > len(served):
        raise UsageError(f"run {name} has {len(served)} language-model serving record(s); --entry {ns.entry} is none")
    record = served[(ns.entry or 1) - 1]
    path = rq.located(request_log_of(record), run_dir)
    if path is None:
        why = f"its failure came before any request ({record.error})" if record.status == "failed" else (
            "it was recorded before accelbench kept requests"
        )  # fmt: skip
        raise UsageError(f"the record {record.id[:8]} of run {name} keeps no requests: {why}")
    log = rq.read(path)
    held = Limits.of(record)
    ttft_ms, tpot_ms = (held.ttft_p99_ms, held.tpot_p99_ms) if held is not None else (None, None)
    if ns.json:
        out = {
            "record": record.id,
            "request_log": request_log_of(record),
            "meta": log.meta,
            "figures": figures.recompute(log, ttft_ms, tpot_ms),
            "rows": [r.to_dict() for r in log.rows],
        }
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    flat = table_rows(log)
    if ns.csv:
        writer = csv.DictWriter(sys.stdout, fieldnames=list(flat[0]) if flat else ["id"], lineterminator="\n")
        writer.writeheader()
        writer.writerows(flat)
        return 0
    talks = any(r.session is not None for r in log.rows)
    users = any(r.user is not None for r in log.rows)  # a closed loop's: who sent each request
    due = any(r.scheduled is not None for r in log.rows)
    table = Table(title=f"{describe_params(record.benchmark, record.params)}: requests ({path.name})")
    who = (("user",) if users else ()) + (("session", "turn") if talks else ()) + (("due s",) if due else ())
    for col in ("id", "sample", *who, "sent s", "TTFT ms", "TPOT ms", "prompt", "output", "chunks", "status"):
        table.add_column(col, justify="left" if col == "status" else "right", no_wrap=col != "status")

    def num(value: Any, digits: int = 4) -> str:
        return "" if value is None else f"{value:.{digits}g}" if isinstance(value, float) else str(value)

    for row in flat[: ns.limit] if ns.limit else flat:
        cells = [num(row["id"]), num(row["sample"])] + ([num(row["user"])] if users else [])
        cells += [num(row["session"]), num(row["turn"])] if talks else []
        cells += [f"{row['scheduled_s']:.3f}" if row["scheduled_s"] is not None else ""] if due else []
        cells += [f"{row['sent_s']:.3f}", num(row["ttft_ms"]), num(row["tpot_ms"]), num(row["prompt_tokens"])]
        cells += [num(row["output_tokens"]), num(row["chunks"])]
        cells.append(row["status"] + (f": {escape(row['error'])}" if row["error"] else ""))
        table.add_row(*cells)
    console.print(table)
    if ns.limit and ns.limit < len(flat):
        console.print(f"the first {ns.limit} of {len(flat)} requests shown")
    console.print(escape(summary_line(log, ttft_ms, tpot_ms)))
    return 0


def cmd_compare(ns: argparse.Namespace) -> int:
    store = _store(ns)
    if ns.reference:
        if ns.candidate:
            raise UsageError("--reference compares one run with published results: give BASELINE only")
        return print_beside_references(select(store, ns.baseline), ns.baseline, ns.json)
    if not ns.candidate:
        raise UsageError("compare needs BASELINE and CANDIDATE (or BASELINE --reference)")
    base, cand = select(store, ns.baseline), select(store, ns.candidate)
    # other runs of the same workloads on the same systems: each side's run-to-run spread
    earlier = [
        r for name in sorted({r.benchmark for r in (*base, *cand)}) for r in store.query(benchmark=name, status="ok")
    ]
    comparison = compare(
        base,
        cand,
        ignore=ns.ignore,
        metric=ns.metric,
        describe=describe_params,
        earlier=earlier,
        defaults=default_params,
        rules=families.unlike,
    )
    if ns.json:
        sys.stdout.write(json.dumps(comparison.to_dict(), indent=2) + "\n")
        return 0
    if not comparison.rows:
        differ = nearest_difference(base, cand, ns.ignore, defaults=default_params)
        other = [k for k in differ if k in IDENTITY_PARAMS]
        hint = (
            f"the nearest records differ in {', '.join(other)}: other models, never compared"
            if other
            else f"the nearest records differ in {', '.join(differ)} ({' '.join(f'--ignore {k}' for k in differ)} "
            "pairs them)"
            if differ
            else "they share no benchmark"
        )
        raise UsageError(
            f"{ns.baseline} and {ns.candidate} have no benchmark with the same parameters in common; {hint}"
        )
    console.print(compare_table(comparison, ns.baseline, ns.candidate))
    print_published_ratios(base, cand)  # MLPerf Training v0.5's V100-PCIe over T4, when these are the two
    return 0
