"""``accelbench tune MODEL``: the best settings of a model's serving or training, found within a budget."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from rich.markup import escape

from accelbench.cli import args as a
from accelbench.cli.commands_measure import _options
from accelbench.cli.kernel_args import add_param_flags
from accelbench.cli.render import ProgressObserver, console, err_console, shown
from accelbench.devices import resolve_device
from accelbench.infer.catalog import BACKENDS
from accelbench.measure.rounding import HEADROOM
from accelbench.params import build_params, typed_by_person
from accelbench.results import format as fmt
from accelbench.results.record import Result
from accelbench.results.store import Store
from accelbench.suite.suites import Entry, Suite
from accelbench.tune.specs import TuneParams
from accelbench.tune.verdict import MIN_RUNS_RANGES

DESCRIPTION = (
    "Search the settings that make MODEL fastest on this machine, within --budget. Each trial is an ordinary "
    "benchmark run in its own process and stored in one run. First every runtime is screened at the default batch: "
    f"backend ({', '.join(n for n, b in BACKENDS.items() if b.runs_model)}, as installed), precision (only what "
    "this device runs natively, unless --emulated), memory format and torch.compile. Then batch sizes (and, for "
    "OpenVINO, requests in "
    "flight) are screened around the two best. For --task infer the best candidates must pass the accuracy gate "
    "before they are confirmed: with --dataset, MLPerf's 99% of the FP32 reference's quality on its labels (accuracy "
    "verified); without, fidelity to FP32 on the same weights (random, or --checkpoint), where a bf16, fp16 or INT8 "
    f"path may move the outputs at most {HEADROOM:g} times as far as rounding the FP32 model to its precision does "
    "(accuracy not verified, and the result says so). The finalists and the default settings are then confirmed "
    "side by side in "
    "interleaved rounds, and the rounds go on until the best separates from the runner-up (Mann-Whitney on the raw "
    f"samples where the runs keep them, else the ranges of {MIN_RUNS_RANGES} runs or more); candidates it does not "
    "separate from are reported as equivalent, not ranked. Server is screened on Offline throughput and confirmed "
    "by find-peak. The budget holds: no trial starts that is not expected to fit, so a search ends at most one trial "
    "late, and what was cut is said. A speed-up over the defaults is stated only against a default confirmed VALID "
    "more than once. A search that screened one candidate says 'no search' and names no best, and one whose "
    "finalists all fell out (gate failed, crashed, INVALID) says no setting was confirmed better than the defaults. "
    "Prints the outcome first, in one line (the winner, its speed-up over the defaults and the evidence), then the "
    "ranking (settings, figure, spread of confirmations, accuracy, validity) and the command that reproduces the "
    "winner's confirmation (its settings, at the confirmation's length). A candidate that "
    "crashes, runs out of memory or fails to compile is recorded as failed, with its reason, and the search goes on."
    " A language model's search is how it is served: engine (every local one installed), precision and "
    "compilation, then requests in flight and continuous batching's batch-token budget; each trial is an Offline "
    "run at its concurrency held to --tpot-ms (default the model's MLPerf Server limit), a run over it INVALID and "
    "never ranked, so the winner is the most tokens/s per device at that interactivity; every finalist passes the "
    "LLM accuracy gate (FP32's greedy tokens, or ROUGE on --prompts with --checkpoint)."
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "tune", help="search the fastest settings of a model's serving or training", description=DESCRIPTION
    )
    p.add_argument("model", metavar="MODEL", help="model name (accelbench list --models)")
    add_param_flags(p, TuneParams, "search", skip=frozenset({"model"}), sweeps=False)
    a.add_common_options(p)
    p.set_defaults(handler=cmd_tune)


def _params(ns: argparse.Namespace) -> Any:
    given = {f.name: getattr(ns, f.name, None) for f, _ in TuneParams.flags()}  # the searched benchmark's too
    values = {k: v[0] for k, v in given.items() if isinstance(v, list)}  # each flag parses as a one-element list
    values |= {"model": ns.model, "device": ns.device or "auto", "threads": ns.threads}
    with typed_by_person():  # another task's flag is refused even at its default
        return build_params(TuneParams, values, "tune")


def cmd_tune(ns: argparse.Namespace) -> int:
    from accelbench.suite.runner import Interrupted, SuiteRunner
    from accelbench.system.profile import collect_profile
    from accelbench.tune.outcome import NO_CLAIM, details_of, summary
    from accelbench.tune.search import Tuner
    from accelbench.tune.space import runtime_stage

    started = time.monotonic()  # the budget counts from here: the system profile's time is the search's too
    params = _params(ns)
    # a device this machine lacks is bad input; trials and the summary name the device that ran
    params = dataclasses.replace(params, device=str(resolve_device(params.device)))
    options = _options(ns)
    out = err_console if ns.json else console
    if ns.dry_run:
        _print_space(runtime_stage(params))
        return 0
    store = Store(ns.db)
    observer = _TuneObserver(params.budget_seconds, quiet=ns.json, started=started)
    runner = SuiteRunner(store, collect_profile(), options, observer)
    with observer:
        session = runner.open(
            Suite("tune", [], description=f"accelbench tune {params.model}", source="accelbench tune")
        )

        def trial(request: Any) -> list[Any]:
            entry = Entry(request.benchmark, request.params, request.timeout)  # validated by the search
            observer.entry_started(session.index + 1, 0, entry)
            t0 = time.perf_counter()
            results = runner.run_entry(session, entry)
            observer.entry_finished(entry, results, time.perf_counter() - t0)
            return results

        tuner = Tuner(params, trial, progress=observer.phase, timeout=ns.timeout, started=started)
        interrupted = False
        try:
            search = tuner.run()
        except Interrupted:
            interrupted = True
            search = tuner.search
            search.stopped.append("interrupted: the trials finished so far are kept")
            search.elapsed = time.monotonic() - tuner.t0
    record = runner.record(session, summary(search), key="tune")
    if ns.json:
        sys.stdout.write(json.dumps({"run_id": session.run_id, "summary": record.to_dict()}, indent=2) + "\n")
    else:
        _print_outcome(record, search)
    out.print(
        f"run {session.run_id}: {len(search.trials)} trial(s) and the summary stored in {escape(str(store.path))}"
    )
    if interrupted:
        return 130
    return 0 if record.status == "ok" or details_of(record).get("outcome") in NO_CLAIM else 1


def _print_space(space: Any) -> None:
    console.print(f"{len(space.candidates)} runtime(s) to screen first (then batch sizes around the best two):")
    for c in space.candidates:
        console.print(f"  {escape(c.label())}")
    _print_left_out(space.left_out)


def _print_left_out(left_out: list[Any]) -> None:
    from accelbench.tune.space import grouped

    for why, labels in grouped(left_out):
        console.print(f"[dim]left out {escape(', '.join(labels))}: {escape(why)}[/]")


def _print_outcome(record: Any, search: Any) -> None:
    """The headline first (what won, by how much, on what evidence, or why nothing is named), then the ranking that
    backs it, what was left out or cut, and the commands."""
    from rich.table import Table

    from accelbench.tune.outcome import ranking

    d = record.details
    first, *rest = _outcome_lines(record, search.params.model)
    console.print(first)
    words, unit = d.get("figure_words") or d.get("figure", ""), d.get("unit", "")
    table = Table(title=f"tune {escape(search.params.describe(search.params.to_dict()))}: ranked by {escape(words)}")
    for col in ("#", "settings", words, "confirmations", "screening", "accuracy", "valid", "status"):
        table.add_column(escape(col), justify="right" if col in ("#", words, "screening") else "left")
    for i, row in enumerate(ranking(search), 1):
        value = fmt.number(row.figure) + f" {unit}" if row.figure is not None else "-"
        spread = (
            f"{len(row.confirmations)}: {fmt.number(min(row.confirmations))}-{fmt.number(max(row.confirmations))}"
            if row.confirmations
            else "-"
        )
        valid = {True: "VALID", False: "[red]INVALID[/]", None: "-"}[row.valid]
        style = {"winner": "bold green", "equivalent": "green"}.get(row.status, "")
        style = "red" if row.status.startswith(("failed", "gate")) else style
        table.add_row(
            str(i),
            escape(row.candidate.label()),
            value,
            spread,
            fmt.number(row.screen) if row.screen is not None else "-",
            escape(row.accuracy),
            valid,
            f"[{style}]{escape(row.status)}[/]" if style else escape(row.status),
        )
    console.print(table)
    console.print(f"[dim]accuracy gate: {escape(d['gate'])}[/]")
    _print_left_out(search.left_out)
    for line in d["stopped"]:
        console.print(f"[yellow]{escape(line)}[/]")
    console.print(f"[dim]took {d['elapsed_seconds']:.0f} s of a {d['budget_seconds']:.0f} s budget[/]")
    for line in rest:
        console.print(line)


def _outcome_lines(record: Result, model: str) -> list[str]:
    """What the search found, in the words its evidence allows, its headline first (:func:`headline`): a best only
    where it separated, a speed-up only against a default that was measured, no best at all where nothing was
    compared or nothing was confirmed better than the default; then the evidence and the commands."""
    from accelbench.tune.outcome import NO_CLAIM, details_of, headline

    d = details_of(record)
    outcome = d.get("outcome")
    line = escape(d.get("headline") or headline(record))
    accuracy = [f"[dim]{escape(d.get('accuracy') or '')}[/]"] if d.get("accuracy") else []
    if outcome in NO_CLAIM:
        return [f"[yellow]{line}[/]"]
    if outcome == "equivalent":
        lines = [f"[yellow]{line}[/]"]
        for e in d["equivalent"]:
            lines.append(f"  {escape(model)} {escape(e['label'])}: [bold]{escape(e['reproduce'])}[/]")
        return lines + accuracy
    if record.status != "ok":
        return [f"[red]{line}[/]"]
    speed = record.metrics.get("speedup_over_default")
    evidence = d["verdict"] + (f"; against the default: {d['default']['evidence']}" if speed else "")
    lines = [f"[bold green]{line}[/]", *accuracy, f"[dim]{escape(evidence)}[/]"]
    lines.append(f"reproduce (its settings, at a confirmation's length): [bold]{escape(d['reproduce'])}[/]")
    return lines


class _TuneObserver:
    """The suite's progress display, with the budget left as the ETA and the search's phase as the status.

    The budget is counted from ``started`` (the command's start, as the search counts it), so the time left
    shown is the time the search itself will respect."""

    def __init__(self, budget: float, quiet: bool, started: float | None = None) -> None:
        self.budget, self.t0 = budget, time.monotonic() if started is None else started
        self.inner = ProgressObserver(quiet=quiet, eta=self._eta)
        self.message = "starting"

    def _eta(self) -> str:
        left = self.budget - (time.monotonic() - self.t0)
        return f"budget: {max(0.0, left):.0f} s left" if left > 0 else f"over budget by {-left:.0f} s"

    def __enter__(self) -> "_TuneObserver":
        self.inner.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.inner.__exit__(*exc)

    def phase(self, message: str, left: float) -> None:
        self.message = message

    def suite_started(self, run_id: str, run_dir: Path, todo: list[Entry], already_done: int) -> None:
        inner = self.inner
        inner.out.print(
            f"run [bold]{run_id}[/]: a search of {self.budget:.0f} s ({self._eta()}); folder {escape(shown(run_dir))}"
        )
        inner.task = inner.progress.add_task("starting", total=None, status=self._eta())

    def entry_started(self, index: int, total: int, entry: Entry) -> None:
        inner = self.inner
        inner.entry_t0, inner.entry_left = time.monotonic(), None
        inner.progress.update(inner.task, description=self.message, status=self._eta())
        if inner.plain:
            inner._line(f"trial {index}: {escape(self.message)} ({self._eta()})")

    def entry_progress(self, message: str, left: float | None = None) -> None:
        self.inner.entry_progress(message, None)

    def entry_finished(self, entry: Entry, results: list[Result], seconds: float) -> None:
        self.inner.entry_finished(entry, results, seconds)
