"""Rich output: the live progress of a suite and the tables people read afterwards."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from accelbench.families import family_of, metric_texts
from accelbench.registry import describe_params
from accelbench.results import format as fmt
from accelbench.results.details import not_judged
from accelbench.results.record import Result
from accelbench.suite.estimate import MEASURED, Estimate
from accelbench.suite.suites import Entry

if TYPE_CHECKING:
    from accelbench.suite.plan import Planned

STATUS_STYLE = {"ok": "green", "failed": "red", "skipped": "yellow"}

#: width of tables written to a file or a pipe (rich would assume 80 columns and fold every table)
PIPED_WIDTH = 140


def _console(stderr: bool = False) -> Console:
    """A terminal's own width; a pipe's ``COLUMNS`` when set, else ``PIPED_WIDTH``."""
    probe = Console(stderr=stderr)
    piped = not probe.is_terminal and "COLUMNS" not in os.environ
    return Console(stderr=stderr, highlight=False, width=PIPED_WIDTH if piped else None)


console = _console()
err_console = _console(stderr=True)


class ProgressObserver:
    """One progress bar for the suite on a terminal, plain lines on stderr otherwise; a line per finished entry.

    ``estimates`` (seconds per entry key, from the plan) give an ETA when every entry left has one; ``eta``
    replaces that ETA with the caller's own words for the time left (a search counts down its budget).
    """

    def __init__(
        self,
        estimates: dict[str, float | None] | None = None,
        quiet: bool = False,
        clock: Callable[[], float] = time.monotonic,
        eta: Callable[[], str] | None = None,
    ) -> None:
        #: seconds, for the ETA and the plain lines' elapsed time (a test hands in its own)
        self.clock = clock
        self.eta = eta
        self.plain = quiet or not console.is_terminal
        #: finished entries go to stdout (a table follows them) unless stdout is for JSON
        self.out = err_console if quiet else console
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=20),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[status]}", style="dim"),
            console=console,
            transient=True,
            disable=self.plain,
        )
        self.task: Any = None
        self.last_message = ""
        self.estimates = estimates or {}
        self.todo: list[Entry] = []
        self.index = 0
        self.t0 = self.entry_t0 = self.clock()
        #: the entry's own estimate of its seconds left, and when it said so
        self.entry_left: tuple[float, float] | None = None
        #: each finished entry and its wall time as the runner counted it (its process's start included)
        self.finished: list[tuple[Entry, float]] = []

    def __enter__(self) -> "ProgressObserver":
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def _eta(self) -> str:
        """Time left: the entry in progress by its own estimate (else its last time here, less what has passed),
        then the entries after it by their last time here; only this entry's when one of those never ran here."""
        if self.eta is not None:
            return self.eta()
        now = self.clock()
        if self.entry_left is not None:
            current: float | None = max(0.0, self.entry_left[0] - (now - self.entry_left[1]))
        else:
            last = self.estimates.get(self.todo[self.index].key) if self.index < len(self.todo) else None
            current = None if last is None else max(0.0, last - (now - self.entry_t0))
        rest = [self.estimates.get(e.key) for e in self.todo[self.index + 1 :]]
        if current is None:
            return ""
        if any(v is None for v in rest):
            return f"this one: about {_clock(current)} left"
        return f"about {_clock(current + sum(v for v in rest if v is not None))} left"

    def _line(self, text: str) -> None:
        err_console.print(f"[dim]\\[{_clock(self.clock() - self.t0)}][/] {text}")

    def suite_started(self, run_id: str, run_dir: Path, todo: list[Entry], already_done: int) -> None:
        resumed = f", {already_done} already done" if already_done else ""
        self.todo = todo
        self.out.print(
            f"run [bold]{run_id}[/]: {len(todo)} benchmark(s) to run{resumed}; folder {escape(shown(run_dir))}"
        )
        self.task = self.progress.add_task("starting", total=len(todo), status=self._eta())

    def entry_started(self, index: int, total: int, entry: Entry) -> None:
        self.index = index - 1  # the runner counts from 1
        self.entry_t0, self.entry_left = self.clock(), None
        eta = self._eta()
        self.progress.update(self.task, description=entry.label, status=eta or "starting")
        if self.plain:
            self._line(f"{index}/{total} {escape(entry.label)}" + (f" ({eta})" if eta else ""))

    def entry_progress(self, message: str, left: float | None = None) -> None:
        self.last_message = message
        if left is not None:
            self.entry_left = (left, self.clock())
        eta = self._eta()
        self.progress.update(self.task, status=f"{message} ({eta})" if eta else message)
        if self.plain:
            self._line(f"    {escape(message)}" + (f" ({eta})" if eta else ""))

    def entry_finished(self, entry: Entry, results: list[Result], seconds: float) -> None:
        self.finished.append((entry, seconds))
        out = self.progress.console if not self.plain else self.out
        if not results:  # another invocation records it (a multi-node job's other node): say so
            out.print(f"[dim]{' ' * 8}{entry.label}: {escape(self.last_message)}[/]")
        for r in results:
            style = STATUS_STYLE[r.status]
            flags = sorted({w.split(":", 1)[0] for w in r.warnings})
            flag = f" [yellow]{escape(', '.join(flags))}[/]" if flags else ""
            label = escape(f"{r.benchmark} {describe_params(r.benchmark, r.params)}")
            line = f"[{style}]{r.status:>7}[/] {label}  {escape(fmt.outcome(r))}{flag}  [dim]({seconds:.1f} s)[/]"
            out.print(line)
        self.progress.advance(self.task)


def shown(path: Path | str) -> str:
    """A path as short as it is clear: relative below the working directory (records keep it absolute)."""
    p = Path(path)
    try:
        return str(p.relative_to(Path.cwd()))
    except ValueError:
        return str(p)


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}" if m >= 60 else f"{m}:{s:02d}"


def _span(seconds: float) -> str:
    """A timeout in the unit a reader thinks in: '600 s', '30 min', '7 days'."""
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:g} s"


def plan_table(planned: list[Planned]) -> Table:
    """What a run will do: each entry, its timeout, and its estimate with where it came from (its last time here,
    or the cost model of :mod:`accelbench.suite.estimate`); the caption adds them up, measured and modelled apart."""
    table = Table(title_justify="left", caption_justify="left")
    table.add_column("#", justify="right")
    table.add_column("benchmark")
    table.add_column("timeout", justify="right")
    table.add_column("estimate", justify="right")
    table.add_column("from")
    table.add_column("process", justify="right")
    table.add_column("", style="yellow")
    for i, p in enumerate(planned, 1):
        est = p.estimate
        shown_est = f"{est.seconds:.1f} s" if est is not None else "-"
        source = ("here before" if est.source == MEASURED else "model") if est is not None else "none"
        warn = escape(p.warning or "")
        table.add_row(str(i), escape(p.entry.label), _span(p.timeout), shown_est, source, str(p.process), warn)
    table.caption = "; ".join(plan_caption(planned))
    if any(_span(p.timeout).endswith("days") for p in planned):
        table.caption += (
            "\na timeout in days is a time-to-accuracy run's: at full scale it can train that long; --timeout S "
            "lowers it (a run that reaches it is recorded as failed)"
        )
    return table


def plan_caption(planned: list[Planned]) -> list[str]:
    """The plan's length: its total, how much of it was measured here before and how much the cost model says,
    each with its count of entries; then its worker processes."""
    from accelbench.suite.plan import estimate

    total, n = estimate(planned), len(planned)
    parts = []
    if total.measured_entries:
        parts.append(f"{_clock(total.measured)} measured here before ({total.measured_entries}, plus start-up)")
    if total.modelled_entries:
        parts.append(f"{_clock(total.modelled)} from the cost model ({total.modelled_entries})")
    if total.unknown:
        parts.append(f"{total.unknown} with no estimate")
    known = total.measured_entries + total.modelled_entries
    said = [
        f"{n} benchmark(s), about {_clock(total.seconds)}: " + ", ".join(parts)
        if known
        else f"{n} benchmark(s): no estimate"
    ]
    processes = len({p.process for p in planned})
    if all(p.process for p in planned) and processes < n:
        plural = "es" if processes > 1 else ""
        said.append(f"in {processes} worker process{plural} (consecutive kernels of one benchmark share one)")
    return said


@dataclass(frozen=True)
class Checked:
    """One sampled entry: its estimate before the run and the wall time it took."""

    entry: Entry
    estimate: Estimate
    seconds: float

    @property
    def error_pct(self) -> float:
        """The estimate's error against the time taken, in % of that time (positive: the estimate was long)."""
        return (self.estimate.seconds - self.seconds) / max(self.seconds, 1e-9) * 100


def sample_table(checked: list[Checked]) -> Table:
    """Each sampled entry's estimate beside the time it took, and the estimate's error over the sample: the
    plan's own measure (median and worst absolute % error)."""
    import statistics

    table = Table(title="the plan's estimates against the run", title_justify="left", caption_justify="left")
    table.add_column("benchmark")
    table.add_column("estimate", justify="right")
    table.add_column("from")
    table.add_column("took", justify="right")
    table.add_column("error", justify="right")
    for c in checked:
        source = "here before" if c.estimate.source == MEASURED else "model"
        row = (escape(c.entry.label), f"{c.estimate.seconds:.1f} s", source, f"{c.seconds:.1f} s")
        table.add_row(*row, f"{c.error_pct:+.0f}%")
    errors = [abs(c.error_pct) for c in checked]
    if errors:
        table.caption = (
            f"estimate's error over {len(errors)} entries: median {statistics.median(errors):.0f}%, "
            f"worst {max(errors):.0f}% (absolute, of the time taken)"
        )
    return table


def _details(r: Result) -> str:
    """The record's other figures, each in the words its family's labels give it (accelbench.families), after
    its verdict where it has one."""
    shown = [escape(text) for text in metric_texts(r)]
    if r.valid is not None:
        word = fmt.verdict_word(r)
        shown.insert(0, word if r.valid else f"[red]{word}[/]")
    elif withheld := not_judged(r):
        shown.insert(0, f"[yellow]not judged: {escape(withheld[0])}[/]")
    return ", ".join(shown)


def results_table(results: list[Result], title: str | None = None, show_ids: bool = False) -> Table:
    """One row per record: what ran, its primary figure or why there is none, the other metrics.

    Warnings (noise, contention) are numbered in the last column and spelled out in
    the caption, so that the table stays readable in 80 columns.
    """
    table = Table(title=title, title_justify="left", caption_justify="left")
    if show_ids:
        table.add_column("id", style="dim", no_wrap=True)
    # the system (fingerprint, as in 'results runs') wherever the rows may come from several machines
    show_system = show_ids or len({r.fingerprint for r in results}) > 1
    if show_system:
        table.add_column("system", style="dim", no_wrap=True)
    table.add_column("benchmark", no_wrap=True)
    table.add_column("workload")
    table.add_column("device", no_wrap=True)
    table.add_column("result", justify="right")
    table.add_column("details")
    table.add_column("!", style="yellow")
    notes: list[str] = []
    for r in results:
        if r.status == "ok":
            result = escape(fmt.outcome(r))
            details = _details(r)
        else:
            result = f"[{STATUS_STYLE[r.status]}]{r.status}[/]"
            details = escape(r.error or r.reason or "")  # an exception's text is never markup
        marks = []
        for w in r.warnings:
            if w not in notes:
                notes.append(w)
            marks.append(str(notes.index(w) + 1))
        row = [
            escape(r.benchmark),
            escape(describe_params(r.benchmark, r.params)),
            escape(str(r.params.get("device", ""))),
            result,
            details,
            ",".join(marks),
        ]
        if show_system:
            row.insert(0, r.fingerprint[:8])
        if show_ids:
            row.insert(0, r.id[:8])
        table.add_row(*row)
    if notes:
        lines = [f"[yellow]{i}[/] {escape(w)}" for i, w in enumerate(notes, 1)]
        if any(r.has("noisy") for r in results):
            longer = {f.longer for r in results if r.has("noisy") and (f := family_of(r.benchmark)) and f.longer}
            how = f", or measure longer ({', '.join(sorted(longer))})" if longer else ""
            lines.append(f"noisy results: re-run on a quieter machine{how}")
        if any(r.has("contended") for r in results):
            lines.append(
                "contended results: other load shared this machine, and a figure can fall by far more than the share "
                "it took (threads that spin or wait on each other); they are kept but not compared"
            )
        table.caption = "\n".join(lines)
    return table
