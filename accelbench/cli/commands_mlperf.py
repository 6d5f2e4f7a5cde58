"""``accelbench mlperf inference``: an MLCommons MLPerf Inference submission tree from stored runs.

The runs are measured already; this command only puts their LoadGen logs where MLCommons' checker reads them and
writes the files around them from the records, saying for each result whether it is for submission and what the
closed division would still need (accelbench/submission/inference.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from accelbench.cli import args as a
from accelbench.errors import UsageError


def register(sub: Any) -> None:
    ml = sub.add_parser(
        "mlperf",
        help="an MLCommons MLPerf submission tree from stored runs",
        description="Write the folders MLCommons' submission checker reads, from runs accelbench stored.",
    )
    ml.set_defaults(help_parser=ml)
    msub = ml.add_subparsers(dest="mlperf_command", metavar="ACTION", parser_class=a.Parser)
    _add_inference(msub)


def _add_inference(msub: Any) -> None:
    from accelbench.loadgen.mlcommons import ROUNDS
    from accelbench.submission.inference import STATUSES
    from accelbench.submission.plan import DIVISIONS, SYSTEM_TYPES

    inf = msub.add_parser(
        "inference",
        help="an MLPerf Inference tree (closed/open) from accelbench infer runs",
        description=(
            "Write DIR/<division>/<org>/ as MLCommons' submission checker reads it (MLPerf Inference v6.x): "
            "results/<system>/<model>/<Scenario>/ with LoadGen's logs of each result's performance run "
            "(performance/run_1/), its accuracy run (accuracy/, the accuracy log truncated as MLCommons' "
            "truncate_accuracy_log.py does, its SHA-256 appended to accuracy.txt) and its compliance runs "
            "(TEST01/, TEST04/, TEST06/ with the verifiers' files), beside user.conf, measurements.json and a "
            "README with the command that made each; src/README.md, documentation/calibration.md and "
            "systems/<system>.json. For each model and scenario the latest ok performance record is the result "
            "(and the latest accuracy and audit records beside it). accuracy.txt holds MLPerf's metric only "
            "where the record measured it on the benchmark's data set; an agreement with FP32 on synthetic "
            "samples is written in words, so the checker reports the gap. Each result is printed with whether "
            "it is for submission, and why not, and what the closed division would still need. Refused: runs "
            "of different systems or MLPerf rounds, a model MLPerf does not have, a record whose LoadGen logs "
            "are gone, a closed tree without a scenario its system type requires, a system description the "
            "checker would reject (give the fields no program can read in --system-toml). Check the tree with "
            "MLCommons' checker: cd inference/tools/submission && python3 -m submission_checker.main --input DIR "
            "--version ROUND."
        ),
    )
    inf.add_argument("runs", nargs="+", metavar="RUN", help="a run id (or a unique part of it), or a run folder")
    inf.add_argument("-o", "--out", type=Path, required=True, metavar="DIR", help="the submission's root folder")
    inf.add_argument("--org", required=True, metavar="NAME", help="the submitter (the tree's <org> folder)")
    inf.add_argument("--system", required=True, metavar="NAME", help="the system's name (systems/NAME.json)")
    inf.add_argument(
        "--division",
        choices=DIVISIONS,
        default="open",
        help="open (default: any model, no compliance tests) or closed (MLPerf's rules in full)",
    )
    inf.add_argument(
        "--system-type",
        metavar="|".join(SYSTEM_TYPES),
        help="the MLPerf category, which sets the scenarios each model needs (default: the narrowest that holds "
        "every model of the runs)",
    )
    inf.add_argument("--status", choices=STATUSES, default="available", help="availability (default available)")
    inf.add_argument(
        "--system-toml",
        type=Path,
        metavar="FILE",
        help="field = value lines for systems/NAME.json: what no program reads (cooling, memory layout, network), "
        "and any captured value to override",
    )
    inf.add_argument(
        "--round",
        choices=tuple(ROUNDS),
        help="the MLPerf round (default: the one whose seeds the runs' LoadGen logs carry; none: the latest)",
    )
    a.add_store_option(inf)
    inf.set_defaults(handler=cmd_inference)


def sources(runs: list[str], db: Path | None) -> list[Any]:
    """The records of each RUN (a run folder, else a stored run id), each once."""
    from accelbench.results.store import Store
    from accelbench.submission.runs import Source, asked_of, read_run_folder

    out: list[Source] = []
    store: Store | None = None
    for run in runs:
        folder = Path(run).expanduser()
        if (folder / "results.jsonl").is_file():
            out += read_run_folder(folder)
            continue
        if folder.is_dir():
            raise UsageError(f"{folder} is not a run folder (it has no results.jsonl)")
        store = store or Store(db, readonly=True)
        run_id = store.resolve_run_id(run)
        if run_id is None:
            raise UsageError(f"unknown run {run!r}: give a run id (see 'accelbench results runs') or a run folder")
        info = store.get_run(run_id)
        run_dir = Path(info.run_dir) if info is not None and info.run_dir else None
        command = info.command if info is not None else ""
        out += [Source(r, run_dir, command, asked_of(run_dir)) for r in store.query(run_id=run_id)]
    seen: set[str] = set()
    unique = []
    for s in out:
        if s.record.id not in seen:
            seen.add(s.record.id)
            unique.append(s)
    return unique


def cmd_inference(ns: argparse.Namespace) -> int:
    from accelbench.submission.inference import Identity, check_names, summary, write
    from accelbench.submission.plan import plan

    ident = Identity(ns.org, ns.system, ns.status, ns.system_toml)
    check_names(ident)  # bad names are one line before any store is read
    the_plan = plan(sources(ns.runs, ns.db), division=ns.division, system_type=ns.system_type, round_name=ns.round)
    written = write(the_plan, ns.out, ident)
    for line in summary(the_plan, written, ns.out / ns.division / ns.org):
        sys.stdout.write(line + "\n")
    return 0
