"""Runs a suite: each entry in a worker process, with a timeout, committing records as they come. A crash, an OOM
kill, an exception or a hang ends only that entry's process, recorded as ``failed``, and the suite goes on; Ctrl-C
or SIGTERM stops with every record kept (``--resume``). Consecutive kernel entries of one benchmark share a
worker (a device context started once), each with its own timeout; after a crash or a lost context the next
runs in a fresh process."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator, Protocol

from accelbench import registry
from accelbench.cost.figures import energy, priced
from accelbench.cost.price import Price
from accelbench.errors import UsageError
from accelbench.measure.energy import idle_watts
from accelbench.results.record import Result, now_iso, schema_errors
from accelbench.results.runfolder import DEFAULT_OUT, RunFolder
from accelbench.results.store import RunInfo, Store
from accelbench.suite.plan import sharing, timeout_of
from accelbench.suite.process import Tail, cause, context, kill_group
from accelbench.suite.suites import Entry, Suite, make_entry
from accelbench.suite.worker import CACHE, SCRATCH
from accelbench.suite.worker import child_main as worker_child_main
from accelbench.system.profile import collect_profile

POLL_SECONDS = 0.2
#: after asking a benchmark to stop (Ctrl-C, its timeout), how long it has to report what it finished
STOP_GRACE_SECONDS = 30.0


def new_run_id() -> str:
    return datetime.now().strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


@dataclass(frozen=True)
class RunOptions:
    """Run-wide settings from the common command-line options."""

    device: str | None = None
    threads: int | None = None
    tags: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None
    out_dir: Path = DEFAULT_OUT
    retry_failed: bool = False
    command: str = ""
    #: what an hour of this machine costs (stated, owned or a named instance): priced figures in every record
    price: Price | None = None


class Observer(Protocol):
    """Receives the runner's events; the CLI draws progress and tables from them."""

    def suite_started(self, run_id: str, run_dir: Path, todo: list[Entry], already_done: int) -> None: ...
    def entry_started(self, index: int, total: int, entry: Entry) -> None: ...
    def entry_progress(self, message: str, left: float | None = None) -> None: ...
    def entry_finished(self, entry: Entry, results: list[Result], seconds: float) -> None: ...


class _Silent:
    def suite_started(self, *a: Any) -> None: ...
    def entry_started(self, *a: Any) -> None: ...
    def entry_progress(self, *a: Any) -> None: ...
    def entry_finished(self, *a: Any) -> None: ...


@dataclass
class RunSummary:
    run_id: str
    run_dir: Path
    results: list[Result]
    interrupted: bool = False
    already_done: int = 0


def apply_common(suite: Suite, device: str | None, threads: int | None) -> Suite:
    """Command-line --device/--threads override the suite's values for every entry."""
    if device is None and threads is None:
        return suite
    entries = []
    for e in suite.entries:
        params = dict(e.params)
        if device is not None:
            params["device"] = device
        if threads is not None:
            params["threads"] = threads
        entries.append(replace(make_entry(e.benchmark, params, e.timeout), on=e.on))
    return replace(suite, entries=entries)


class Interrupted(Exception):
    """The run was stopped (Ctrl-C, SIGTERM) during an entry; ``results`` are what it had committed."""

    def __init__(self, results: list[Result]) -> None:
        super().__init__("interrupted")
        self.results = results


@dataclass
class Session:
    """A run being written: where its records go, and how many entries it has run."""

    run_id: str
    folder: RunFolder
    index: int = 0
    keys: set[str] = field(default_factory=set)


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """A batch scheduler's SIGTERM stops the suite as Ctrl-C does (records kept)."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def attempt_log_path(folder: RunFolder, index: int, label: str) -> Path:
    """The log of an entry's next attempt: ``NNN-label.log``, then ``NNN.2-label.log`` and so on.

    An entry run again (``--resume`` after an interruption, ``--retry-failed``) keeps its number, and each attempt
    gets a file of its own, so the record of an earlier attempt still points at that attempt's output alone; the
    names sort in the order the attempts ran.
    """
    first = folder.log_path(index, label)
    number, rest = first.name.split("-", 1)
    path, n = first, 1
    while path.exists():
        n += 1
        path = first.with_name(f"{number}.{n}-{rest}")
    return path


class SuiteRunner:
    def __init__(self, store: Store, profile: dict[str, Any], options: RunOptions, observer: Observer | None = None):
        self.store = store
        self.profile = profile
        self.options = options
        #: average watts per energy domain before the first benchmark (None: nothing readable, or not measured)
        self.idle: dict[str, float] | None = None
        self.observer = observer or _Silent()
        #: whether the entry in progress listens for a stop (it said so through worker._stop_poll)
        self._stoppable = False
        #: why the worker of the entry just finished cannot run another (its ``done`` said the device context is
        #: lost), or None
        self._lost: str | None = None

    def run(self, suite: Suite, resume: str | None = None) -> RunSummary:
        run_id, suite, folder, done = self._start(suite, resume)
        todo = [(key, e) for key, e in suite.keyed_entries() if key not in done]
        summary = RunSummary(run_id, folder.path, [], already_done=len(suite.entries) - len(todo))
        self.observer.suite_started(run_id, folder.path, [e for _, e in todo], summary.already_done)
        if any(not registry.get(e.benchmark).family.harness for _, e in todo):
            self._measure_idle()  # a suite of harness checks only (the selftests) measures nothing worth it
        session = Session(run_id, folder)
        # an entry's files are numbered by its place in the suite, not in what is left: a resumed run's logs
        # continue the first run's numbering instead of starting again at 001
        place = {key: n for n, (key, _) in enumerate(suite.keyed_entries(), 1)}
        with _sigterm_as_interrupt(), self.closing(session):
            done_count = 0
            while done_count < len(todo):
                group = todo[done_count : done_count + sharing([e for _, e in todo[done_count:]])]
                jobs = [(key, entry, place[key]) for key, entry in group]
                try:
                    finished = self._run_group(session, jobs, (done_count, len(todo)), summary.results)
                except Interrupted as stop:
                    summary.results += stop.results
                    summary.interrupted = True
                    break
                done_count += finished
        return summary

    def _measure_idle(self) -> None:
        """The machine's floor, measured where any counter is readable, kept beside every figure."""
        self.idle = idle_watts([a["index"] for a in self.profile.get("accelerators") or []])

    # -- a run driven from outside (accelbench tune): entries decided one at a time ----------------

    def open(self, suite: Suite) -> "Session":
        """Start a new stored run whose entries the caller runs one by one with :meth:`run_entry`."""
        run_id, _, folder, _ = self._start(suite, None)
        self._measure_idle()
        self.observer.suite_started(run_id, folder.path, list(suite.entries), 0)
        return Session(run_id, folder)

    @contextlib.contextmanager
    def closing(self, session: "Session") -> Iterator[None]:
        """The run's shared cache (TensorRT engines, hundreds of MB for a large model) and what killed entries left
        in their scratch folders are deleted when it ends (ONNX exports are kept in the export cache)."""
        try:
            yield
        finally:
            shutil.rmtree(session.folder.path / CACHE, ignore_errors=True)
            shutil.rmtree(session.folder.path / SCRATCH, ignore_errors=True)

    def run_entry(self, session: "Session", entry: Entry) -> list[Result]:
        """One entry in its own process, committed as in a suite; :class:`Interrupted` on Ctrl-C or SIGTERM."""
        session.index += 1
        key = entry.key if entry.key not in session.keys else f"{entry.key}#{session.index}"
        session.keys.add(key)
        with _sigterm_as_interrupt():
            results: list[Result] = []
            self._run_group(session, [(key, entry, session.index)], None, results)
            return results

    def record(self, session: "Session", result: Result, key: str) -> Result:
        """Commit a record the caller made (a search's summary) with the run's fields, as the entries' are."""
        return self._commit(result, session.run_id, session.folder, key)

    # -- set-up ---------------------------------------------------------------------------

    def _start(self, suite: Suite, resume: str | None) -> tuple[str, Suite, RunFolder, set[str]]:
        if resume is None:
            run_id = new_run_id()
            # absolute: every path a record keeps (LoadGen logs, MLPerf logs) must work from anywhere later
            folder = RunFolder(Path(self.options.out_dir).resolve(), run_id)
            self.store.add_run(
                RunInfo(
                    run_id=run_id,
                    created_at=now_iso(),
                    command=self.options.command,
                    suite=suite.to_dict(),
                    fingerprint=self.profile["fingerprint"],
                    tags=self.options.tags,
                    run_dir=str(folder.path.resolve()),
                )
            )
            folder.write_json("suite.json", suite.to_dict())
            done: set[str] = set()
        else:
            full = self.store.resolve_run_id(resume)
            info = self.store.get_run(full) if full else None
            if info is None:
                raise UsageError(f"no run {resume!r} to resume in {self.store.path}; see 'accelbench results runs'")
            run_id = info.run_id
            suite = Suite.from_dict(info.suite)
            folder = RunFolder(
                Path(info.run_dir).parent if info.run_dir else Path(self.options.out_dir).resolve(), run_id
            )
            done = self.store.finished_entries(run_id, include_failed=not self.options.retry_failed)
        folder.write_json("system.json", self.profile)
        return run_id, suite, folder, done

    # -- one entry ------------------------------------------------------------------------

    def _timeout(self, entry: Entry) -> float:
        return timeout_of(entry, self.options.timeout)

    def _run_group(
        self,
        session: Session,
        jobs: list[tuple[str, Entry, int]],
        place: tuple[int, int] | None,
        results: list[Result],
    ) -> int:
        """Run ``jobs`` (key, entry, index in the suite) one after another in one worker process, each with its own
        timeout and log, committing records as they come (into ``results`` too); how many finished, the one a crash
        or a timeout ended among them. The process of an entry that crashes or overruns is killed, so the entries
        after it are left for a fresh one. ``place``: (entries done before, entries in all) for the observer; None:
        a run driven from outside, which says its own progress. :class:`Interrupted` on Ctrl-C or SIGTERM."""
        folder = session.folder
        work = folder.path / ".work"
        work.mkdir(exist_ok=True)
        outs, logs = [], []
        for _, entry, index in jobs:
            out = work / f"{index:03d}-{entry.key}.jsonl"
            out.unlink(missing_ok=True)
            outs.append(out)
            logs.append(attempt_log_path(folder, index, entry.label))
        proc = context().Process(
            target=worker_child_main,
            args=(
                [
                    (entry.to_dict(), str(out), str(log))
                    for (_, entry, _), out, log in zip(jobs, outs, logs, strict=True)
                ],
                str(folder.logs),
                os.getpid(),
            ),
            daemon=False,
        )
        proc.start()
        try:
            for j, (key, entry, _) in enumerate(jobs):
                if place is not None:
                    self.observer.entry_started(place[0] + j + 1, place[1], entry)
                t0 = time.perf_counter()
                committed, finished = self._follow(proc, session, key, entry, outs[j], logs[j], results)
                if place is not None:
                    self.observer.entry_finished(entry, committed, time.perf_counter() - t0)
                if not finished or self._lost:  # crashed, stopped or its context lost: the next need a fresh one
                    if finished:  # the worker leaves by itself once it has said so
                        proc.join(timeout=STOP_GRACE_SECONDS)
                    return j + 1
            proc.join(timeout=STOP_GRACE_SECONDS)
            return len(jobs)
        finally:
            if proc.exitcode is None:
                kill_group(proc)
            for out in outs:
                out.unlink(missing_ok=True)

    def _follow(
        self, proc: Any, session: Session, key: str, entry: Entry, out: Path, log_path: Path, results: list[Result]
    ) -> tuple[list[Result], bool]:
        """One entry of a worker process, from its first message to its ``done`` (or the process's end, or its
        timeout): its records, committed, and whether it finished and the process goes on."""
        run_id, folder = session.run_id, session.folder
        timeout = self._timeout(entry)
        committed: list[Result] = []
        tail = Tail(out)
        finished = False
        self._stoppable = False  # until the worker says its benchmark listens for a stop (worker._stop_poll)
        self._lost = None
        started = now_iso()
        deadline = time.monotonic() + timeout
        timed_out = False
        try:
            while True:
                finished |= self._drain(tail, run_id, folder, key, committed)
                if finished or proc.exitcode is not None:
                    break
                if time.monotonic() > deadline:
                    timed_out = True
                    finished |= self._stop(proc, "SIGUSR2", tail, run_id, folder, key, committed)
                    break
                proc.join(timeout=POLL_SECONDS)
        except KeyboardInterrupt:
            self._stop(proc, "SIGUSR1", tail, run_id, folder, key, committed)
            raise Interrupted(committed) from None
        finished |= self._drain(tail, run_id, folder, key, committed)
        if not finished:
            why = cause(proc.exitcode, timed_out, timeout, log_path)
            failed = Result.failed(
                entry.benchmark, entry.params, why, started_at=started, details={"log": str(log_path)}
            )
            self._commit(failed, run_id, folder, key)
            committed.append(failed)
        status = "failed" if any(r.status == "failed" for r in committed) else "ok"
        self.store.mark_entry(run_id, key, status)
        results += committed
        return committed, finished and not timed_out

    def _stop(
        self, proc: Any, how: str, tail: "Tail", run_id: str, folder: RunFolder, key: str, committed: list[Result]
    ) -> bool:
        """Ask the worker to stop (``how``: a signal of worker.STOP_SIGNALS) and keep what it had finished: a
        benchmark measuring in windows reports the finished ones after the step in progress. Killed with all it
        started after ``STOP_GRACE_SECONDS``, or at once on a second Ctrl-C. Whether the worker said it was done."""
        finished = self._drain(tail, run_id, folder, key, committed)
        if not self._stoppable:  # the benchmark never asked whether to stop: nothing to wait for
            kill_group(proc)
            return self._drain(tail, run_id, folder, key, committed) or finished
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, getattr(signal, how, signal.SIGKILL))
        self.observer.entry_progress(
            f"stopping: finished windows are kept after the step in progress (at most {STOP_GRACE_SECONDS:g} s; "
            "Ctrl-C again stops now)"
        )
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        try:
            while proc.exitcode is None and time.monotonic() < deadline:
                proc.join(timeout=POLL_SECONDS)
                finished |= self._drain(tail, run_id, folder, key, committed)
        except KeyboardInterrupt:
            pass
        kill_group(proc)
        return self._drain(tail, run_id, folder, key, committed) or finished

    def _drain(self, tail: "Tail", run_id: str, folder: RunFolder, key: str, committed: list[Result]) -> bool:
        finished = False
        for msg in tail.read():
            kind = msg.get("type")
            if kind == "progress":
                left = msg.get("left")
                self.observer.entry_progress(str(msg.get("message", "")), float(left) if left is not None else None)
            elif kind == "result":
                result = Result.from_dict(msg["record"])
                committed.append(self._commit(result, run_id, folder, key))
            elif kind == "done":
                finished = True
                self._lost = msg.get("context_lost") or None
            elif kind == "stoppable":
                self._stoppable = True
        return finished

    def _commit(self, result: Result, run_id: str, folder: RunFolder, key: str) -> Result:
        """Fill in the run-level fields, then store and append; an invalid record becomes a failed one."""
        result.run_id = run_id
        result.spec_key = key
        result.tags = dict(self.options.tags)
        result.system = {"fingerprint": self.profile["fingerprint"], "profile": self.profile}
        basis = registry.get(result.benchmark).efficiency_of
        if self.idle and result.conditions.get("energy"):
            result.conditions["energy"]["idle_watts"] = self.idle
        if result.status == "ok":  # per joule where the window's energy was measured; nothing where it was not
            result.metrics |= energy(result, basis)
        # A record carries the price only where a per-dollar figure derives from it (training, inference,
        # time to accuracy): a kernel's FLOPS or GB/s buy nothing a reader pays for, and a price on a record
        # that has no figure from it would let compare set prices against each other for nothing. The same
        # for a flag's price and config.toml's, so the settings file never prices a kernel silently.
        if self.options.price is not None and basis:
            watts = result.metrics.get("average_watts")
            price = self.options.price.at_power(watts.value if watts else None)
            result.system["price"] = price.to_dict()
            if result.status == "ok":
                result.metrics |= priced(result, basis, price)
        try:
            problems = schema_errors(json.loads(result.to_json()))
        except ValueError as exc:  # NaN or infinity in a metric
            problems = [str(exc)]
        if problems:  # the record as it was, less its figures
            kept = {k: v for k, v in vars(result).items() if k not in ("status", "metrics", "error", "samples")}
            result = Result.failed(error=f"the benchmark produced an invalid record: {problems[0]}", **kept)
        self.store.add(result)
        folder.append(result)
        return result


def run_suite(
    suite: Suite,
    store: Store,
    options: RunOptions | None = None,
    observer: Observer | None = None,
    resume: str | None = None,
    profile: dict[str, Any] | None = None,
) -> RunSummary:
    """Run ``suite`` isolated, storing every record; the library entry point behind ``accelbench run``."""
    options = options or RunOptions()
    if resume is None:
        suite = apply_common(suite, options.device, options.threads)
    return SuiteRunner(store, profile or collect_profile(), options, observer).run(suite, resume)
